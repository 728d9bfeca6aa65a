package cg

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// Check's part for dynamic membership. A member that added itself is
// dropped by the group's running dynamic instances once it has given no
// sign of life for its session timeout. One still in the group well past
// that has nobody to drop it: no dynamic instance of the group runs, or
// those that run cannot write the group's configuration. Its partitions
// stay with it meanwhile; the member findings say whether messages wait
// on them.

// CodeDynamicMemberGone is the Check finding for a dynamic member not seen
// for longer than its session timeout and still in the group (warning).
const CodeDynamicMemberGone = "dynamic-member-gone"

// RemedyStartDynamicOrDrop: start a dynamic instance of any member of the
// group, which drops Remedy.Member as gone, or drop Remedy.Member.
const RemedyStartDynamicOrDrop health.RemedyCode = "start-dynamic-or-drop"

// dynamicGrace is how far past a member's session timeout check waits
// before it calls the member gone and not dropped: a running instance
// notices at its next look (every dynamicRefresh) and its write takes a
// moment, so a drop under way is not reported.
const dynamicGrace = 2 * dynamicRefresh

// dynamicFindings are the dynamic-member-gone warnings of an elastic
// group. Every time compared is the server's: the records' write times and
// the time the server answered for the bucket's stream, so no clock of
// this machine is trusted. A bucket that is missing or cannot be read
// gives none.
func (r *checkRun) dynamicFindings(ctx context.Context, t checkTarget, cfg ElasticConfig) []health.Finding {
	bs, err := r.c.js.Stream(ctx, "KV_"+DynamicBucket)
	if err != nil {
		return nil
	}
	now := bs.CachedInfo().TimeStamp
	if now.IsZero() {
		return nil // a server that does not say its time
	}
	seen := r.c.readDynamic(ctx, t.stream, t.group)
	timeoutOf := func(ds *dynamicSeen) time.Duration {
		if ds.timeout > 0 {
			return ds.timeout
		}
		return DefaultSessionTimeout
	}
	// The members with a record written within their session timeout: a
	// dynamic instance runs for each, and every one of them reaps.
	var running []string
	for _, m := range cfg.MemberNames() {
		if ds := seen[dynamicToken(m)]; ds != nil && !ds.lastSeen.IsZero() && now.Sub(ds.lastSeen) <= timeoutOf(ds)+dynamicGrace {
			running = append(running, m)
		}
	}
	prefix := dynamicPrefix(t.stream, t.group)
	var out []health.Finding
	for _, m := range cfg.MemberNames() {
		ds := seen[dynamicToken(m)]
		if ds == nil || !ds.dynamic {
			continue // an operator's member: never dropped as gone
		}
		timeout := timeoutOf(ds)
		last := ds.lastSeen
		what := "was last seen %s ago"
		if last.IsZero() {
			// No record left: its last instance stopped other than
			// cleanly (or never wrote one). The latest sign of it is
			// that record's removal, or its mark.
			last = ds.marked
			if msg, err := bs.GetLastMsgForSubject(ctx, "$KV."+DynamicBucket+"."+prefix+"."+dynamicToken(m)+".*"); err == nil && msg.Time.After(last) {
				last = msg.Time
			}
			what = "has no instance on record (the last sign of one was %s ago)"
		}
		quiet := now.Sub(last)
		if quiet <= timeout+dynamicGrace {
			continue
		}
		parts := cfg.Assignment().MemberPartitions(m)
		who := "no dynamic instance of the group is running to drop it"
		if others := slices.DeleteFunc(slices.Clone(running), func(x string) bool { return x == m }); len(others) > 0 {
			who = fmt.Sprintf("dynamic instances of %s run but none has dropped it (may they write the group's configuration?)", strings.Join(others, ", "))
		}
		stays := "it owns no partitions"
		if len(parts) > 0 {
			stays = "its partitions " + partition.Ranges(parts) + " stay with it"
		}
		out = append(out, health.Finding{Severity: health.SeverityWarning, Code: CodeDynamicMemberGone, Member: m, Partitions: parts,
			Message: fmt.Sprintf("dynamic member %s "+what+", longer than its session timeout of %s, and is still in the group: %s, so %s",
				m, quiet.Round(100*time.Millisecond), timeout, who, stays),
			Hint:   fmt.Sprintf("start a dynamic instance of any member of the group (it drops %s and hands its partitions to the running members), or drop %s from the group", m, m),
			Remedy: &health.Remedy{Code: RemedyStartDynamicOrDrop, Kind: t.kind.String(), Stream: t.stream, Group: t.group, Member: m}})
	}
	return out
}
