package group

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// WatchOptions are the bound arguments and flags of watch.
type WatchOptions struct {
	F             *factory.Factory
	Kind          cg.Kind
	Stream, Group string
	Interval      time.Duration
	Count         int
}

// NewCmdWatch builds `cg <kind> watch <stream> <group>`.
func NewCmdWatch(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &WatchOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:     "watch <stream> <group>",
		Aliases: []string{"top"},
		Short:   fmt.Sprintf("Watch %s group live: instances, pins, lag, rates and a status per partition", article(k)),
		Long: "Watch a group live. Every interval it samples the group and shows each member's instances,\n" +
			"pinned instance and standbys, and each partition's pending messages, the age of the oldest,\n" +
			"how fast the backlog changes, and a status: ok; lagging (the backlog only grew over the last\n" +
			"5 samples); stalled (messages pending while the owner delivered and acked nothing over the\n" +
			"last 5 samples); unowned (no member, or the member has no running instance); unknown (the lag\n" +
			"could not be read). Pin and unpin events come from the server's advisories.\n\n" +
			"On a terminal the view is redrawn in place; otherwise, or with --json, one snapshot is printed\n" +
			"per interval (a text block, or one JSON document per line). Ctrl-C stops it.",
		Example: fmt.Sprintf("  cg %s watch ORDERS fulfillment\n  cg %s top ORDERS fulfillment --interval 5s\n  cg %s watch ORDERS fulfillment --json --count 10", k, k, k),
		Args:    cmdutil.Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			if opts.Interval <= 0 {
				return cmdutil.UsageErrorf("--interval must be more than 0, such as 1s")
			}
			return watchRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	cmdutil.DurationVar(fs, &opts.Interval, "interval", time.Second, "2s", "time between samples")
	cmdutil.CountVar(fs, &opts.Count, "count", 0, 0, "10", "stop after this many snapshots (0: until interrupted)")
	return cmd
}

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

func watchRun(ctx context.Context, o *WatchOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ios := o.F.IOStreams
	sampler := health.NewSampler()
	cstream := o.Stream
	if o.Kind.HasWorkStream() {
		cstream = o.Kind.WorkStream(o.Stream, o.Group)
	}
	stop, err := c.WatchPins(cstream, sampler.AddPin)
	if err != nil {
		fmt.Fprintf(ios.ErrOut, "warning: pin events unavailable: %v\n", err)
	}
	defer stop()

	redraw := !o.F.JSON && ios.IsStdoutTTY() && o.F.Env("TERM") != "dumb"
	cs := render.NewColorScheme(ios.ColorEnabled())
	js := render.NewJSONStream(ios.Out)
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	poisonEvery := &poisonSampler{every: time.Second}
	for n := 0; o.Count == 0 || n < o.Count; n++ {
		if n > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
			}
		}
		gi, err := c.Info(ctx, o.Kind, o.Stream, o.Group)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted: a clean stop
			}
			if n == 0 || isErr(err, cg.ErrGroupNotFound) || isErr(err, cg.ErrStreamNotFound) {
				return hints.Wrap(err, o.Kind, o.Stream, o.Group)
			}
			// A blip (a timeout, a leader election) should not end a live view.
			fmt.Fprintf(ios.ErrOut, "warning: sample failed: %s\n", hints.Error(err))
			continue
		}
		snap := sampler.Add(gi)
		poison := poisonEvery.read(ctx, c, o.Kind, o.Stream, o.Group, ios.ErrOut)
		switch {
		case o.F.JSON:
			err = js.Encode(snapshotWithPoison(snapshotView(snap), poison))
		case redraw:
			var b strings.Builder
			b.WriteString(clearScreen)
			renderSnapshot(&b, cs, snap, o.Interval)
			renderWatchPoison(&b, cs, o.Kind, o.Stream, o.Group, poison, snap.Time)
			_, err = io.WriteString(ios.Out, b.String())
		default:
			var b strings.Builder
			if n > 0 {
				b.WriteString("\n")
			}
			renderSnapshot(&b, cs, snap, o.Interval)
			renderWatchPoison(&b, cs, o.Kind, o.Stream, o.Group, poison, snap.Time)
			_, err = io.WriteString(ios.Out, b.String())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// maxPartitionRows bounds the partition table of a large group: it lists
// the partitions that need a look first and sums up the rest.
const maxPartitionRows = 20

// renderSnapshot writes one snapshot as text.
func renderSnapshot(w io.Writer, cs *render.ColorScheme, s health.Snapshot, every time.Duration) {
	fmt.Fprintf(w, "%s (%s) on %s   sample %d every %s   %s\n", cs.Bold(s.Group), s.Kind, s.Stream, s.Seq, every, s.Time.Local().Format("15:04:05"))
	line := fmt.Sprintf("Pending %d", s.Pending)
	if o := oldestOf(s); o != nil {
		line += ", oldest waiting " + FormatAge(o.Age()) + " (partition " + strconv.Itoa(o.Partition) + ")"
	}
	if s.AckRate != nil {
		line += "   acks " + perSecond(*s.AckRate)
	}
	var counts []string
	for _, st := range []health.PartitionStatus{health.StatusOK, health.StatusLagging, health.StatusStalled, health.StatusUnowned, health.StatusUnknown} {
		if n := s.Statuses[st]; n > 0 || st == health.StatusOK {
			counts = append(counts, fmt.Sprintf("%d %s", n, statusWord(cs, st)))
		}
	}
	fmt.Fprintf(w, "%s   partitions: %s\n", line, strings.Join(counts, ", "))
	if s.LagError != "" {
		fmt.Fprintln(w, cs.Yellow(s.LagError))
	}
	if line := dynamicLine(cs, seenInSnapshot(s), s.Time); line != "" {
		fmt.Fprintln(w, "Dynamic: "+line)
	}
	fmt.Fprintln(w)

	t := render.NewTable(w, "MEMBER", "STATUS", "INSTANCES", "PINNED", "STANDBYS", "PARTITIONS", "PENDING", "OLDEST", "ACKS/S")
	for _, m := range s.Members {
		pin := "-"
		if m.PinID != "" {
			pin = shortPin(m.PinID)
			if !m.PinnedSince.IsZero() {
				pin += " for " + s.Time.Sub(m.PinnedSince).Round(time.Second).String()
			}
		}
		pending, oldest := lagCells(m.Lag)[0], lagCells(m.Lag)[1]
		rate := "-"
		if m.AckRate != nil {
			rate = fmt.Sprintf("%.1f", *m.AckRate)
		}
		t.AddRow(cs.Member(m.Member), statusWord(cs, m.Status), strconv.Itoa(m.Instances), pin, strconv.Itoa(m.Standbys),
			render.Ranges(m.Partitions), pending, oldest, rate)
	}
	if len(s.Members) == 0 {
		t.AddRow(cs.Yellow("(no members)"))
	}
	_ = t.Render()
	fmt.Fprintln(w)

	rows := slices.Clone(s.Partitions)
	hidden := 0
	if len(rows) > maxPartitionRows {
		// Worst first, then the biggest backlog; quiet partitions go.
		slices.SortStableFunc(rows, func(a, b health.PartitionSnapshot) int {
			if d := b.Status.Severity() - a.Status.Severity(); d != 0 {
				return d
			}
			switch {
			case a.Pending > b.Pending:
				return -1
			case a.Pending < b.Pending:
				return 1
			}
			return a.Partition - b.Partition
		})
		keep := 0
		for keep < len(rows) && keep < maxPartitionRows && (rows[keep].Status != health.StatusOK || rows[keep].Pending > 0) {
			keep++
		}
		hidden = len(rows) - keep
		rows = rows[:keep]
		slices.SortFunc(rows, func(a, b health.PartitionSnapshot) int { return a.Partition - b.Partition })
	}
	pt := render.NewTable(w, "PARTITION", "OWNER", "STATUS", "PENDING", "RATE", "OLDEST", "WHY")
	for _, p := range rows {
		owner := cs.Red("none")
		if p.Owner != "" {
			owner = cs.Member(p.Owner)
		}
		pending, rate := "?", "-"
		if p.Known {
			pending = strconv.FormatUint(p.Pending, 10)
		}
		if p.Rate != nil {
			rate = fmt.Sprintf("%+.1f/s", *p.Rate)
		}
		oldest := "?"
		if p.Known {
			oldest = Age(p.Lag)
		}
		row := []string{strconv.Itoa(p.Partition), owner, statusWord(cs, p.Status), pending, rate, oldest}
		if p.Reason != "" {
			row = append(row, cs.Faint(p.Reason))
		}
		pt.AddRow(row...)
	}
	_ = pt.Render()
	if hidden > 0 {
		fmt.Fprintf(w, "%s\n", cs.Faint(fmt.Sprintf("(%d more partitions ok with nothing pending)", hidden)))
	}

	if len(s.Events) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Recent pin events:")
		et := render.NewTable(w)
		for i := len(s.Events) - 1; i >= 0; i-- {
			e := s.Events[i]
			what := cs.Green(e.Event)
			detail := "pin " + shortPin(e.PinID)
			if e.Event == "unpinned" {
				what = cs.Yellow(e.Event)
				detail = unpinReason(e.Reason)
			}
			et.AddRow("  "+e.Time.Local().Format("15:04:05.000"), cs.Member(e.Member), what, detail)
		}
		_ = et.Render()
	}
}

// unpinReason words the server's reason for an unpin.
func unpinReason(r string) string {
	switch r {
	case "admin":
		return "step-down (unpin request)"
	case "timeout":
		return "the pinned instance stopped pulling (pinned TTL)"
	case "":
		return "-"
	}
	return r
}

func oldestOf(s health.Snapshot) *health.PartitionSnapshot {
	var o *health.PartitionSnapshot
	for i, p := range s.Partitions {
		if p.Known && p.Pending > 0 && !p.Oldest.IsZero() && (o == nil || p.Oldest.Before(o.Oldest)) {
			o = &s.Partitions[i]
		}
	}
	return o
}

func perSecond(r float64) string { return fmt.Sprintf("%.1f/s", r) }

// statusWord colors a status: green ok, yellow lagging and unknown, red
// stalled and unowned.
func statusWord(cs *render.ColorScheme, s health.PartitionStatus) string {
	switch s {
	case health.StatusOK:
		return cs.Green(string(s))
	case health.StatusLagging, health.StatusUnknown:
		return cs.Yellow(string(s))
	}
	return cs.Red(string(s))
}

// encodeSnapshot writes one snapshot as a --json line.
func encodeSnapshot(js *render.JSONStream, s health.Snapshot) error {
	return js.Encode(snapshotView(s))
}
