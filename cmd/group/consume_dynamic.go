package group

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// DynamicFlags are elastic consume's dynamic membership (--dynamic,
// --session-timeout): the member follows its processes.
type DynamicFlags struct {
	On             bool
	SessionTimeout time.Duration
	kind           cg.Kind
}

func (d *DynamicFlags) bind(fs *pflag.FlagSet, k cg.Kind) {
	d.kind = k
	fs.BoolVar(&d.On, "dynamic", false, "the member follows its processes: the first instance adds it to the group (fewest partitions moved), the clean stop (Ctrl-C, SIGTERM, --count) of its last instance drops it, and the other dynamic members drop it once all its instances are gone for --session-timeout (kill -9, a lost machine); a member added with 'cg elastic add' is never dropped this way")
	cmdutil.DurationVar(fs, &d.SessionTimeout, "session-timeout", cg.DefaultSessionTimeout, "10s", "with --dynamic, how long the member may give no sign of life (its instances refresh a liveness record every 500ms) before the others drop it; at least "+cg.MinSessionTimeout.String())
	if k != cg.KindElastic {
		// Bound only to be refused in words rather than as an unknown flag.
		_ = fs.MarkHidden("dynamic")
		_ = fs.MarkHidden("session-timeout")
	}
}

// check refuses bad dynamic flags before anything is dialled.
func (d *DynamicFlags) check(fs *pflag.FlagSet, group string) error {
	if !d.On {
		if fs.Changed("session-timeout") {
			return cmdutil.UsageErrorf("--session-timeout applies only with --dynamic: add --dynamic, or leave it out")
		}
		return nil
	}
	if d.kind != cg.KindElastic {
		return cmdutil.UsageErrorf("--dynamic: static group %s has a fixed membership; only an elastic group's members can add and drop themselves (create one with 'cg elastic create')", group)
	}
	if d.SessionTimeout < cg.MinSessionTimeout {
		return cmdutil.UsageErrorf("--session-timeout %s is too short: the liveness record is refreshed every 500ms and a member must be allowed to miss a few; use %s or more (%s is the default)", d.SessionTimeout, cg.MinSessionTimeout, cg.DefaultSessionTimeout)
	}
	return nil
}

func (d *DynamicFlags) apply(jo *cg.JoinOptions) {
	if d.On {
		jo.Dynamic, jo.SessionTimeout = true, d.SessionTimeout
	}
}

// joinErr words a join the group refused to let add itself (a group with
// as many members as partitions, say) as the usage error it is.
func (d *DynamicFlags) joinErr(err error) error {
	var ve *cg.ValidationError
	if d.On && errors.As(err, &ve) {
		return cmdutil.NewUsageError(err)
	}
	return nil
}

// memberSeen is one member's dynamic membership, as info and watch word
// it: whether it added itself, and the server's time of its instances'
// latest liveness write (zero: none on record).
type memberSeen struct {
	member   string
	dynamic  bool
	lastSeen time.Time
}

// seenInInfo is info's members' dynamic membership.
func seenInInfo(gi health.GroupInfo) []memberSeen {
	out := make([]memberSeen, len(gi.Members))
	for i, ms := range gi.Members {
		out[i] = memberSeen{ms.Member, ms.Dynamic, ms.LastSeen}
	}
	return out
}

// seenInSnapshot is a watch sample's members' dynamic membership.
func seenInSnapshot(s health.Snapshot) []memberSeen {
	out := make([]memberSeen, len(s.Members))
	for i, m := range s.Members {
		out[i] = memberSeen{m.Member, m.Dynamic, m.LastSeen}
	}
	return out
}

// dynamicLine is the word of info and watch on dynamic membership: the
// members that added themselves and those with liveness records, with
// when each was last seen; "" when the group has none.
func dynamicLine(cs *render.ColorScheme, members []memberSeen, now time.Time) string {
	var parts []string
	for _, ms := range members {
		if !ms.dynamic && ms.lastSeen.IsZero() {
			continue
		}
		s := cs.Member(ms.member)
		if !ms.dynamic {
			s += " (operator's)"
		}
		if !ms.lastSeen.IsZero() {
			s += fmt.Sprintf(" seen %s ago", max(now.Sub(ms.lastSeen), 0).Round(100*time.Millisecond))
		} else {
			s += " no instance seen"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}
