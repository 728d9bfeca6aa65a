package group

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// ResetOptions are the bound arguments of reset.
type ResetOptions struct {
	F             *factory.Factory
	Kind          cg.Kind
	Stream, Group string
	Members       []string

	ToStart, ToEnd bool
	ToSeq          uint64
	ToTime         string
	ByDuration     time.Duration
	DryRun, Force  bool
}

// resetTargets are the target flags, exactly one of which is given.
var resetTargets = []string{"to-start", "to-end", "to-seq", "to-time", "by-duration"}

// NewCmdReset builds `cg <kind> reset <stream> <group> [<member>...]`.
func NewCmdReset(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &ResetOptions{F: f, Kind: k}
	long := "Move members (every member when none is named) to another place in the stream, to handle\n" +
		"messages again or to skip them. The plan is printed first: per member, the sequence it would\n" +
		"handle next, the one it handles next after the reset, and how many messages it handles again\n" +
		"(or skips). --dry-run stops there. It asks for confirmation on a terminal; elsewhere it needs --force.\n\n" +
		"Running members go on: each member consumer is paused, what its instances hold is handled and\n" +
		"acked, it is reset and resumed, so no instance has messages from before and after the reset in\n" +
		"hand at once. Needs nats-server 2.14 or later (the consumer reset API). See docs/replay.md."
	example := fmt.Sprintf("  cg %s reset ORDERS fulfillment --to-time 2026-12-01T10:00:00.250Z --dry-run\n"+
		"  cg %s reset ORDERS fulfillment m1 --by-duration 15m --force\n"+
		"  cg %s reset ORDERS fulfillment --to-seq 1200 --force", k, k, k)
	if k == cg.KindElastic {
		long = "Skip members' backlog (every member when none is named): the messages of their partitions\n" +
			"waiting in the group's work stream are removed, so they handle only what arrives after.\n" +
			"The plan is printed first (how many messages each member skips); --dry-run stops there.\n" +
			"It asks for confirmation on a terminal; elsewhere it needs --force.\n\n" +
			"Only --to-end is possible: the work stream deletes each message once it is acked, so nothing\n" +
			"before what members hold is left to replay. To replay, use a static group. See docs/replay.md."
		example = fmt.Sprintf("  cg %s reset ORDERS workers --to-end --dry-run\n  cg %s reset ORDERS workers m1 --to-end --force", k, k)
	}
	cmd := &cobra.Command{
		Use:     "reset <stream> <group> [member...]",
		Aliases: []string{"seek"},
		Short:   "Move members to a start, an end, a sequence or a time, to handle messages again or skip them",
		Long:    long,
		Example: example,
		Args:    cmdutil.ArgsVariadic("member", "stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group, opts.Members = args[0], args[1], args[2:]
			t, err := resetTarget(cmd, opts, time.Now())
			if err != nil {
				return err
			}
			return resetRun(cmd.Context(), opts, t)
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&opts.ToStart, "to-start", false, "to the stream's first message")
	fs.BoolVar(&opts.ToEnd, "to-end", false, "after the stream's last message: skip the backlog")
	fs.Uint64Var(&opts.ToSeq, "to-seq", 0, "to a stream sequence: the next message handled is this one")
	fs.StringVar(&opts.ToTime, "to-time", "", "to the first message stored at or after a time (RFC 3339, e.g. 2026-12-01T10:00:00.250Z)")
	cmdutil.DurationVar(fs, &opts.ByDuration, "by-duration", 0, "15m", "to the first message stored in the last duration")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "print the plan and change nothing")
	fs.BoolVarP(&opts.Force, "force", "f", false, "reset without asking")
	return cmd
}

// resetTarget reads the one target flag given, refusing bad input before
// anything is asked of the server.
func resetTarget(cmd *cobra.Command, o *ResetOptions, now time.Time) (cg.ResetTarget, error) {
	var given []string
	for _, name := range resetTargets {
		if cmd.Flags().Changed(name) {
			given = append(given, "--"+name)
		}
	}
	all := "--" + strings.Join(resetTargets, ", --")
	switch {
	case len(given) == 0:
		return cg.ResetTarget{}, cmdutil.UsageErrorf("no target: give one of %s", all)
	case len(given) > 1:
		return cg.ResetTarget{}, cmdutil.UsageErrorf("%s given together: give exactly one of %s", strings.Join(given, " and "), all)
	}
	if o.Kind == cg.KindElastic && !o.ToEnd {
		return cg.ResetTarget{}, cmdutil.UsageErrorf("an elastic group can only skip its backlog (--to-end): its work stream deletes what was acked, so there is nothing to go back to; replay with a static group (see docs/replay.md)")
	}
	var t cg.ResetTarget
	switch given[0] {
	case "--to-start":
		t.Start = o.ToStart
		if !t.Start {
			return t, cmdutil.UsageErrorf("--to-start=false is no target: give one of %s", all)
		}
	case "--to-end":
		t.End = o.ToEnd
		if !t.End {
			return t, cmdutil.UsageErrorf("--to-end=false is no target: give one of %s", all)
		}
	case "--to-seq":
		if o.ToSeq == 0 {
			return t, cmdutil.UsageErrorf("--to-seq 0: stream sequences start at 1; use --to-start for the first message")
		}
		t.Seq = o.ToSeq
	case "--to-time":
		at, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(o.ToTime))
		if err != nil {
			return t, cmdutil.UsageErrorf("--to-time %q is not an RFC 3339 time; write one such as 2026-12-01T10:00:00.250Z", o.ToTime)
		}
		if at.After(now) {
			return t, cmdutil.UsageErrorf("--to-time %s is in the future (it is %s now); give a time already past", at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339))
		}
		t.Time = at
	case "--by-duration":
		if o.ByDuration <= 0 {
			return t, cmdutil.UsageErrorf("--by-duration must be above 0, such as 15m")
		}
		t.Ago = o.ByDuration
	}
	return t, nil
}

func resetRun(ctx context.Context, o *ResetOptions, t cg.ResetTarget) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ios := o.F.IOStreams
	plan, err := c.ResetPlan(ctx, o.Kind, o.Stream, o.Group, o.Members, t)
	if err != nil {
		return wrapReset(err, o.Kind, o.Stream, o.Group)
	}
	if o.DryRun || !o.F.JSON {
		if o.F.JSON {
			return render.JSON(ios.Out, resetView(plan, nil, true))
		}
		printResetPlan(ios.Out, plan)
	}
	if o.DryRun {
		fmt.Fprintln(ios.ErrOut, "dry run: nothing changed")
		return nil
	}
	if !o.Force {
		if !ios.CanPrompt() {
			return cmdutil.UsageErrorf("not reset: standard input is not a terminal; add --force to reset (or --dry-run to see the plan only)")
		}
		fmt.Fprintf(ios.ErrOut, "Reset %s of %s group %s on %s to %s? [y/N] ", memberWords(plan), o.Kind, o.Group, o.Stream, plan.Target)
		line, _ := bufio.NewReader(ios.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(ios.ErrOut, "not reset")
			return nil
		}
	}
	res, err := c.Reset(ctx, o.Kind, o.Stream, o.Group, o.Members, t)
	if err != nil {
		return wrapReset(err, o.Kind, o.Stream, o.Group)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, resetView(res.ResetPlan, res.Paused, false))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	for _, mp := range res.Members {
		what := fmt.Sprintf("next handles sequence %d (was %d)", mp.To, mp.From)
		if o.Kind == cg.KindElastic {
			what = fmt.Sprintf("skipped its backlog in %s", cg.WorkStreamName(o.Stream, o.Group))
		}
		switch {
		case mp.Again > 0:
			what += fmt.Sprintf(", %d to handle again", mp.Again)
		case mp.Skipped > 0:
			what += fmt.Sprintf(", %d skipped", mp.Skipped)
		}
		if !mp.ConsumerExists {
			what += " (no consumer yet: it starts there when it joins)"
		}
		if mp.Recreate {
			what += fmt.Sprintf(" (consumer %s deleted: the server cannot move it below its start; the member makes it again there when it joins)", mp.Consumer)
		}
		if mp.Unacked > 0 {
			what += fmt.Sprintf("; %d message(s) its instances held were still unacked at the reset", mp.Unacked)
		}
		fmt.Fprintf(ios.ErrOut, "%s: %s\n", cs.Member(mp.Member), what)
	}
	if len(res.Paused) > 0 {
		fmt.Fprintf(ios.ErrOut, "paused and resumed %s\n", strings.Join(res.Paused, " "))
	}
	return nil
}

// wrapReset words engine errors of a reset.
func wrapReset(err error, k cg.Kind, stream, group string) error {
	if isErr(err, cg.ErrResetTarget) {
		return cmdutil.NewUsageError(err)
	}
	return hints.Wrap(err, k, stream, group)
}

func memberWords(p cg.ResetPlan) string {
	names := make([]string, len(p.Members))
	for i, mp := range p.Members {
		names[i] = mp.Member
	}
	if len(names) == 1 {
		return "member " + names[0]
	}
	return "members " + strings.Join(names, ", ")
}

func printResetPlan(w interface{ Write([]byte) (int, error) }, p cg.ResetPlan) {
	fmt.Fprintf(w, "%s group %s on %s: reset to %s", p.Kind, p.Group, p.Stream, p.Target)
	if p.Kind == cg.KindStatic {
		if p.Target != fmt.Sprintf("stream sequence %d", p.Seq) {
			fmt.Fprintf(w, ", sequence %d", p.Seq)
		}
		fmt.Fprintf(w, " (the stream holds %d..%d)", p.FirstSeq, p.LastSeq)
	} else {
		fmt.Fprintf(w, " (work stream %s holds %d..%d)", cg.WorkStreamName(p.Stream, p.Group), p.FirstSeq, p.LastSeq)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tCONSUMER\tFROM\tTO\tAGAIN\tSKIPPED\tRUNNING")
	for _, mp := range p.Members {
		cons := mp.Consumer
		if !mp.ConsumerExists {
			cons += " (none yet)"
		}
		if mp.Recreate {
			cons += " (to remake)"
		}
		running := "no"
		if mp.Running {
			running = fmt.Sprintf("yes, %d unacked", mp.AckPending)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\n", mp.Member, cons, mp.From, mp.To, mp.Again, mp.Skipped, running)
	}
	tw.Flush()
}

// ResetMemberView is one member of reset --json.
type ResetMemberView struct {
	Member         string `json:"member"`
	Consumer       string `json:"consumer"`
	ConsumerExists bool   `json:"consumer_exists"`
	From           uint64 `json:"from_seq"`
	To             uint64 `json:"to_seq"`
	Again          uint64 `json:"handled_again"`
	Skipped        uint64 `json:"skipped"`
	Running        bool   `json:"running"`
	AckPending     int    `json:"ack_pending"`
	Recreate       bool   `json:"recreate,omitempty"`
	Unacked        int    `json:"unacked_at_reset,omitempty"`
}

// ResetView is reset --json: the plan (dry_run true) or what was done.
type ResetView struct {
	Kind     string            `json:"kind"`
	Stream   string            `json:"stream"`
	Group    string            `json:"group"`
	Target   string            `json:"target"`
	Seq      uint64            `json:"seq"`
	FirstSeq uint64            `json:"stream_first_seq"`
	LastSeq  uint64            `json:"stream_last_seq"`
	DryRun   bool              `json:"dry_run"`
	Members  []ResetMemberView `json:"members"`
	Paused   []string          `json:"paused,omitempty"`
}

func resetView(p cg.ResetPlan, paused []string, dry bool) ResetView {
	v := ResetView{Kind: string(p.Kind), Stream: p.Stream, Group: p.Group, Target: p.Target, Seq: p.Seq,
		FirstSeq: p.FirstSeq, LastSeq: p.LastSeq, DryRun: dry, Paused: paused, Members: []ResetMemberView{}}
	for _, mp := range p.Members {
		v.Members = append(v.Members, ResetMemberView{Member: mp.Member, Consumer: mp.Consumer, ConsumerExists: mp.ConsumerExists,
			From: mp.From, To: mp.To, Again: mp.Again, Skipped: mp.Skipped, Running: mp.Running, AckPending: mp.AckPending, Recreate: mp.Recreate, Unacked: mp.Unacked})
	}
	return v
}
