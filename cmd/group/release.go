package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// ReleaseOptions are the bound arguments and flags of release.
type ReleaseOptions struct {
	F                     *factory.Factory
	Kind                  cg.Kind
	Stream, Group, Member string
	Seq                   uint64
	Retry, Skip           bool
}

// NewCmdRelease builds `cg <kind> release <stream> <group> <member>`.
func NewCmdRelease(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &ReleaseOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:   "release <stream> <group> <member>",
		Short: "Let a member's parked key go: retry its poison message once more, or skip it to the dead-letter subject",
		Long: "Let a member's parked messages go (consume --on-poison park): every one of the member, or the one\n" +
			"at stream sequence --seq. --retry (the default) delivers it once more under the same policy: handled,\n" +
			"its key goes on; failing again, it parks again. --skip dead-letters it (to the subject the running\n" +
			"instance was given with --dead-letter; refused without one) and its key goes on. The request is\n" +
			"recorded in the group's poison state: the member's running instance acts on it at once; with no\n" +
			"instance running, the next instance of the member started with a retry policy acts on it when the\n" +
			"message is redelivered to it. With nothing parked, release says so and succeeds; a name that is not\n" +
			"a member of the group is refused.",
		Example: fmt.Sprintf("  cg %s release ORDERS fulfillment m1\n  cg %s release ORDERS fulfillment m1 --seq 4711 --skip", k, k),
		Args:    cmdutil.Args("stream", "group", "member"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group, opts.Member = args[0], args[1], args[2]
			if opts.Retry && opts.Skip {
				return cmdutil.UsageErrorf("--retry and --skip exclude each other: retry the message once more, or skip it to the dead-letter subject")
			}
			if cmd.Flags().Changed("seq") && opts.Seq == 0 {
				return cmdutil.UsageErrorf("--seq 0 names no message: give the parked message's stream sequence (see 'cg %s info %s %s'), or leave --seq out to release every parked message of %s", k, opts.Stream, opts.Group, opts.Member)
			}
			return releaseRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.Uint64Var(&opts.Seq, "seq", 0, "release only the parked message at this stream sequence (default: every parked message of the member)")
	fs.BoolVar(&opts.Retry, "retry", false, "deliver the message once more under the same policy (the default)")
	fs.BoolVar(&opts.Skip, "skip", false, "dead-letter the message instead, and let its key go on")
	return cmd
}

func releaseRun(ctx context.Context, o *ReleaseOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	res, err := c.Release(ctx, o.Kind, o.Stream, o.Group, o.Member, cg.ReleaseOptions{Seq: o.Seq, Skip: o.Skip})
	ios := o.F.IOStreams
	if errors.Is(err, cg.ErrNotParked) && o.Seq == 0 {
		// Nothing parked is the state a release asks for: success, as
		// step-down with nothing pinned.
		if o.F.JSON {
			return render.JSON(ios.Out, releaseView(o, res))
		}
		fmt.Fprintf(ios.ErrOut, "%s: nothing to release: no parked message\n", render.NewColorScheme(ios.ColorEnabled()).Member(o.Member))
		return nil
	}
	if errors.Is(err, cg.ErrNotParked) {
		return fmt.Errorf("%w; see 'cg %s info %s %s' for the parked messages", err, o.Kind, o.Stream, o.Group)
	}
	if errors.Is(err, cg.ErrNoPoisonState) {
		return fmt.Errorf("%w: nothing was ever parked in this group (it is made by 'cg %s create', which an identical re-run repairs)", err, o.Kind)
	}
	if err != nil {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, releaseView(o, res))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	running, known := instanceRunning(ctx, c, o)
	return releaseText(ios.ErrOut, cs, o, res, running, known)
}

// instanceRunning tells whether an instance of the member runs now (its
// consumer has a waiting pull or a pin), so that release says who acts on
// the request; unknown when the member's state cannot be read.
func instanceRunning(ctx context.Context, c *cg.Client, o *ReleaseOptions) (running, known bool) {
	ms, err := c.MemberInfo(ctx, o.Kind, o.Stream, o.Group, o.Member)
	if err != nil {
		return false, false
	}
	return ms.Active || ms.Pinned, true
}

// ReleaseView is release --json.
type ReleaseView struct {
	Kind     string       `json:"kind"`
	Stream   string       `json:"stream"`
	Group    string       `json:"group"`
	Member   string       `json:"member"`
	Action   string       `json:"action"` // retry or skip
	Released []ParkedView `json:"released"`
}

// ParkedView is one parked message in the --json views of release, info
// and watch.
type ParkedView struct {
	Member     string    `json:"member,omitempty"`
	Stream     string    `json:"stream"`
	Sequence   uint64    `json:"sequence"`
	Subject    string    `json:"subject"`
	Partition  int       `json:"partition"`
	Key        string    `json:"key,omitempty"`
	Deliveries uint64    `json:"deliveries"`
	Error      string    `json:"error,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	DeadLetter string    `json:"dead_letter,omitempty"`
	ParkedAt   time.Time `json:"parked_at,omitzero"`
	Release    string    `json:"release,omitempty"`
}

func parkedView(p cg.ParkedMessage) ParkedView {
	return ParkedView{Member: p.Member, Stream: p.Stream, Sequence: p.Sequence, Subject: p.Subject, Partition: p.Partition,
		Key: p.Key, Deliveries: p.Deliveries, Error: p.Error, Reason: p.Reason, DeadLetter: p.DeadLetter, ParkedAt: p.ParkedAt, Release: p.Release}
}

func releaseView(o *ReleaseOptions, res cg.ReleaseResult) ReleaseView {
	v := ReleaseView{Kind: string(o.Kind), Stream: o.Stream, Group: o.Group, Member: o.Member, Action: "retry", Released: []ParkedView{}}
	if o.Skip {
		v.Action = "skip"
	}
	for _, p := range res.Released {
		v.Released = append(v.Released, parkedView(p))
	}
	return v
}

func releaseText(w io.Writer, cs *render.ColorScheme, o *ReleaseOptions, res cg.ReleaseResult, running, known bool) error {
	for _, p := range res.Released {
		what := "retries it once more (failing again, its --on-poison action applies again)"
		if o.Skip {
			what = "dead-letters it to " + p.DeadLetter + ", then acks it"
		}
		where := p.Subject
		if p.Key != "" {
			where += ", key " + p.Key
		}
		switch {
		case running:
			fmt.Fprintf(w, "%s: released parked message %d (%s, partition %d, after %d deliveries): the member's running instance %s\n",
				cs.Member(o.Member), p.Sequence, where, p.Partition, p.Deliveries, what)
		case known:
			fmt.Fprintf(w, "%s: release of parked message %d (%s, partition %d, after %d deliveries) recorded: no instance of %s is running; the next one started with a retry policy (--max-deliver, --backoff or --on-poison) %s when the message is redelivered to it\n",
				cs.Member(o.Member), p.Sequence, where, p.Partition, p.Deliveries, o.Member, what)
		default:
			fmt.Fprintf(w, "%s: release of parked message %d (%s, partition %d, after %d deliveries) recorded: the member's instance that holds it %s (with none running, the next one does when the message is redelivered to it)\n",
				cs.Member(o.Member), p.Sequence, where, p.Partition, p.Deliveries, what)
		}
	}
	seqs := make([]string, len(res.Released))
	for i, p := range res.Released {
		seqs[i] = fmt.Sprint(p.Sequence)
	}
	if len(res.Released) > 1 {
		verb := "released"
		if !running {
			verb = "to be released"
		}
		fmt.Fprintf(w, "%s: %d messages %s (%s)\n", cs.Member(o.Member), len(res.Released), verb, strings.Join(seqs, ", "))
	}
	return nil
}
