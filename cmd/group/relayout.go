package group

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// RelayoutOptions are the bound arguments of relayout.
type RelayoutOptions struct {
	F             *factory.Factory
	Kind          cg.Kind
	Stream, Group string
	To            string
	DryRun, Force bool
}

// NewCmdRelayout builds `cg <kind> relayout <stream> <group> --to member|partition`.
func NewCmdRelayout(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &RelayoutOptions{F: f, Kind: k}
	where := "Each new consumer starts just after the lowest ack floor of the old consumers that read its\n" +
		"partitions, so messages acked above an ack floor may be handled again (the plan counts them)\n" +
		"and none is lost. The new consumers are made with the old ones' settings."
	if k == cg.KindElastic {
		where = "The group's place is its work stream, which holds exactly what was not acked: nothing is\n" +
			"lost, and what the old consumers had handed out unacked is handed out again. The members make\n" +
			"the new layout's consumers when they join."
	}
	cmd := &cobra.Command{
		Use:   "relayout <stream> <group> --to member|partition",
		Short: "Move a stopped group to the other layout, keeping its place in the stream",
		Long: "Move a group between the member layout (one consumer per member, the reference's format) and\n" +
			"the partition layout (one consumer per partition), keeping its place. Every instance of the\n" +
			"group must be stopped first.\n\n" + where + "\n\n" +
			"The plan is printed first; --dry-run stops there. It asks for confirmation on a terminal;\n" +
			"elsewhere it needs --force. If it fails part-way, what it made is removed; if it was killed\n" +
			"part-way, running it again finishes the move. See docs/layouts.md, \"Moving a group\".",
		Example: fmt.Sprintf("  cg %s relayout ORDERS fulfillment --to partition --dry-run\n"+
			"  cg %s relayout ORDERS fulfillment --to member --force", k, k),
		Args: cmdutil.Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			if !cmd.Flags().Changed("to") {
				return cmdutil.UsageErrorf("no layout to move to: give --to member or --to partition")
			}
			to, err := cg.ParseLayout(opts.To)
			if err != nil || opts.To == "" {
				return cmdutil.UsageErrorf("--to %q is not a layout: use member or partition", opts.To)
			}
			return relayoutRun(cmd.Context(), opts, to)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.To, "to", "", "the layout to move to: member or partition")
	fs.BoolVar(&opts.DryRun, "dry-run", false, "print the plan and change nothing")
	fs.BoolVarP(&opts.Force, "force", "f", false, "move without asking")
	return cmd
}

func relayoutRun(ctx context.Context, o *RelayoutOptions, to cg.Layout) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ios := o.F.IOStreams
	plan, err := c.RelayoutPlan(ctx, o.Kind, o.Stream, o.Group, to)
	if err != nil {
		return wrapRelayout(err, o.Kind, o.Stream, o.Group)
	}
	if plan.Nothing {
		if o.F.JSON {
			return render.JSON(ios.Out, relayoutView(plan, o.DryRun))
		}
		fmt.Fprintf(ios.ErrOut, "%s group %s on %s is on the %s layout already: nothing to do\n", o.Kind, o.Group, o.Stream, to)
		return nil
	}
	if o.DryRun || !o.F.JSON {
		if o.F.JSON {
			return render.JSON(ios.Out, relayoutView(plan, true))
		}
		printRelayoutPlan(ios.Out, plan)
	}
	if o.DryRun {
		fmt.Fprintln(ios.ErrOut, "dry run: nothing changed")
		return nil
	}
	if !o.Force {
		if !ios.CanPrompt() {
			return cmdutil.UsageErrorf("not moved: standard input is not a terminal; add --force to move the group (or --dry-run to see the plan only)")
		}
		fmt.Fprintf(ios.ErrOut, "Move %s group %s on %s to the %s layout? [y/N] ", o.Kind, o.Group, o.Stream, to)
		line, _ := bufio.NewReader(ios.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(ios.ErrOut, "not moved")
			return nil
		}
	}
	done, err := c.Relayout(ctx, o.Kind, o.Stream, o.Group, to)
	if err != nil {
		return wrapRelayout(err, o.Kind, o.Stream, o.Group)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, relayoutView(done, false))
	}
	var again uint64
	for _, n := range done.New {
		again += n.Again
	}
	fmt.Fprintf(ios.ErrOut, "moved %s group %s on %s to the %s layout: %d new consumer(s), %d old removed, %d message(s) may be handled again\n",
		o.Kind, o.Group, o.Stream, to, len(done.New), len(done.Old), again)
	perm := fmt.Sprintf("cg %s permissions %s %s", o.Kind, o.Stream, o.Group)
	if to == cg.LayoutPartition {
		perm += " --layout partition --partitions " + strconv.Itoa(partitionCount(done))
	}
	fmt.Fprintf(ios.ErrOut, "members' rights name the consumers: if you grant them per consumer, regenerate them with '%s'\n", perm)
	return nil
}

// partitionCount is how many partitions a plan's group has.
func partitionCount(p cg.RelayoutPlan) int {
	n := 0
	for _, c := range p.New {
		for _, q := range c.Partitions {
			n = max(n, q+1)
		}
	}
	return n
}

// wrapRelayout words engine errors of a relayout.
func wrapRelayout(err error, k cg.Kind, stream, group string) error {
	if isErr(err, cg.ErrGroupRunning) {
		return fmt.Errorf("%w; 'cg %s info %s %s' shows which members run", err, k, stream, group)
	}
	return hints.Wrap(err, k, stream, group)
}

func printRelayoutPlan(w io.Writer, p cg.RelayoutPlan) {
	fmt.Fprintf(w, "%s group %s on %s: %s layout -> %s layout", p.Kind, p.Group, p.Stream, p.From, p.To)
	if p.Kind == cg.KindElastic {
		fmt.Fprintf(w, " (work stream %s holds %d..%d)", cg.WorkStreamName(p.Stream, p.Group), p.FirstSeq, p.LastSeq)
	} else {
		fmt.Fprintf(w, " (the stream holds %d..%d)", p.FirstSeq, p.LastSeq)
	}
	if p.Finish {
		fmt.Fprint(w, "; finishing an earlier relayout")
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(p.New) > 0 {
		fmt.Fprintln(tw, "NEW CONSUMER\tMEMBER\tPARTITIONS\tSTART\tAGAIN\tMADE")
		for _, n := range p.New {
			start, made := strconv.FormatUint(n.Start, 10), "now"
			switch {
			case p.Kind == cg.KindElastic:
				start, made = "work stream", "by the member"
			case !n.Create:
				made = "by the member (position saved)"
			case n.Replace:
				made = "now (replaces a leftover)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", n.Consumer, n.Member, render.Ranges(n.Partitions), start, n.Again, made)
		}
	}
	if len(p.Old) > 0 {
		fmt.Fprintln(tw, "OLD CONSUMER\tMEMBER\tPARTITIONS\tACK FLOOR\tUNACKED\tREMOVED")
		for _, o := range p.Old {
			what := "yes"
			if !o.Exists {
				what = "no consumer (position cleared)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\n", o.Consumer, o.Member, render.Ranges(o.Partitions), o.AckFloor, o.AckPending, what)
		}
	}
	tw.Flush()
}

// RelayoutNewView is one new consumer of relayout --json.
type RelayoutNewView struct {
	Consumer   string `json:"consumer"`
	Member     string `json:"member"`
	Partitions []int  `json:"partitions"`
	Start      uint64 `json:"start_seq"`
	Again      uint64 `json:"handled_again"`
	Create     bool   `json:"create"`
	Replace    bool   `json:"replace,omitempty"`
}

// RelayoutOldView is one old consumer of relayout --json.
type RelayoutOldView struct {
	Consumer   string `json:"consumer"`
	Member     string `json:"member,omitempty"`
	Partitions []int  `json:"partitions"`
	Exists     bool   `json:"exists"`
	AckFloor   uint64 `json:"ack_floor"`
	AckPending int    `json:"ack_pending"`
}

// RelayoutView is relayout --json: the plan (dry_run true) or what was done.
type RelayoutView struct {
	Kind     string            `json:"kind"`
	Stream   string            `json:"stream"`
	Group    string            `json:"group"`
	From     string            `json:"from"`
	To       string            `json:"to"`
	DryRun   bool              `json:"dry_run"`
	Finish   bool              `json:"finish,omitempty"`
	Nothing  bool              `json:"nothing,omitempty"`
	FirstSeq uint64            `json:"stream_first_seq"`
	LastSeq  uint64            `json:"stream_last_seq"`
	New      []RelayoutNewView `json:"new"`
	Old      []RelayoutOldView `json:"old"`
}

func relayoutView(p cg.RelayoutPlan, dry bool) RelayoutView {
	v := RelayoutView{Kind: string(p.Kind), Stream: p.Stream, Group: p.Group, From: p.From.String(), To: p.To.String(), DryRun: dry,
		Finish: p.Finish, Nothing: p.Nothing, FirstSeq: p.FirstSeq, LastSeq: p.LastSeq, New: []RelayoutNewView{}, Old: []RelayoutOldView{}}
	for _, n := range p.New {
		v.New = append(v.New, RelayoutNewView{Consumer: n.Consumer, Member: n.Member, Partitions: n.Partitions, Start: n.Start, Again: n.Again, Create: n.Create, Replace: n.Replace})
	}
	for _, o := range p.Old {
		v.Old = append(v.Old, RelayoutOldView{Consumer: o.Consumer, Member: o.Member, Partitions: o.Partitions, Exists: o.Exists, AckFloor: o.AckFloor, AckPending: o.AckPending})
	}
	return v
}
