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

// InfoOptions are the bound arguments of info.
type InfoOptions struct {
	F      *factory.Factory
	Kind   cg.Kind
	Stream string
	Group  string
	Now    func() time.Time
}

// NewCmdInfo builds `cg <kind> info <stream> <group>`.
func NewCmdInfo(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &InfoOptions{F: f, Kind: k, Now: time.Now}
	return &cobra.Command{
		Use:     "info <stream> <group>",
		Short:   fmt.Sprintf("Show %s group: who owns which partitions, pins, standbys and backlog", article(k)),
		Example: fmt.Sprintf("  cg %s info ORDERS fulfillment\n  cg %s info ORDERS fulfillment --json", k, k),
		Args:    cmdutil.Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			return infoRun(cmd.Context(), opts)
		},
	}
}

func infoRun(ctx context.Context, o *InfoOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	gi, err := c.Info(ctx, o.Kind, o.Stream, o.Group)
	if err != nil {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	poison := readPoison(ctx, c, o.Kind, o.Stream, o.Group, ios.ErrOut)
	if o.F.JSON {
		return render.JSON(ios.Out, withPoison(groupInfoView(gi), poison))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	elastic := gi.Backlog != nil
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Group", cs.Bold(gi.Group)+" ("+gi.Kind+")")
	kv.Add("Stream", gi.Stream)
	if elastic {
		kv.Add("Work stream", gi.WorkStream)
	}
	kv.Add("Partitions", fmt.Sprintf("%d, %s", gi.Partitions, gi.Mode))
	if gi.Layout != "" {
		kv.Add("Layout", gi.Layout+" (one consumer per partition: "+o.Group+"-p<k>)")
	}
	kv.Add("Filters", strings.Join(infoFilters(gi), " "))
	kv.Add("Ownership", partitionMap(cs, gi))
	if elastic {
		kv.Add("Backlog", backlogLine(cs, gi))
		lag := "unknown (the work stream reports no source)"
		if gi.SourcingLag != nil {
			lag = strconv.FormatUint(*gi.SourcingLag, 10) + " messages"
		}
		kv.Add("Sourcing lag", lag)
	}
	kv.Add("Lag", lagLine(cs, gi))
	if hasPoison(poison) {
		kv.Add("Poison", poisonLine(cs, poison))
	}
	if line := dynamicLine(cs, seenInInfo(gi), o.Now()); line != "" {
		kv.Add("Dynamic", line)
	}
	if err := kv.Render(); err != nil {
		return err
	}
	fmt.Fprintln(ios.Out)
	headers := []string{"MEMBER", "PARTITIONS", "STATUS", "PINNED", "STANDBYS", "PENDING", "ACK PENDING", "LAG", "OLDEST"}
	if elastic {
		headers = append(headers, "BACKLOG")
	}
	if hasPoison(poison) {
		headers = append(headers, "DEAD-LETTERED", "PARKED")
	}
	t := render.NewTable(ios.Out, headers...)
	for _, ms := range gi.Members {
		row := []string{cs.Member(ms.Member), render.Ranges(ms.Partitions), status(cs, ms, elastic), pinned(ms, o.Now()),
			strconv.Itoa(ms.Standbys), strconv.FormatUint(ms.Pending, 10), strconv.Itoa(ms.AckPending)}
		row = append(row, lagCells(ms.Lag)...)
		if elastic {
			var sum uint64
			for _, p := range ms.Partitions {
				if p >= 0 && p < len(gi.Backlog) {
					sum += gi.Backlog[p]
				}
			}
			row = append(row, strconv.FormatUint(sum, 10))
		}
		if hasPoison(poison) {
			row = append(row, memberPoisonCells(cs, poison, ms.Member)...)
		}
		t.AddRow(row...)
	}
	if len(gi.Members) == 0 {
		t.AddRow(cs.Yellow("(no members)"))
	}
	if err := t.Render(); err != nil {
		return err
	}
	if gi.Layout != "" {
		fmt.Fprintln(ios.Out)
		if err := renderPartitionConsumers(ios.Out, cs, gi.Members, o.Now()); err != nil {
			return err
		}
	}
	renderParked(ios.Out, cs, o.Kind, o.Stream, o.Group, poison, o.Now())
	return nil
}

// renderPartitionConsumers lists a partition-layout group's consumers:
// which member owns each partition and which instance (pin id) holds it.
func renderPartitionConsumers(w io.Writer, cs *render.ColorScheme, members []health.MemberStatus, now time.Time) error {
	t := render.NewTable(w, "PARTITION", "CONSUMER", "OWNER", "PINNED", "WAITING", "PENDING", "ACK PENDING")
	var rows []health.PartitionConsumer
	for _, ms := range members {
		rows = append(rows, ms.PartitionConsumers...)
	}
	slices.SortFunc(rows, func(a, b health.PartitionConsumer) int { return a.Partition - b.Partition })
	for _, pc := range rows {
		pin := "-"
		switch {
		case !pc.Exists:
			pin = cs.Yellow("no consumer yet")
		case pc.Pinned:
			pin = pinned(health.MemberStatus{Pinned: true, PinID: pc.PinID, PinnedSince: pc.PinnedSince}, now)
		}
		t.AddRow(strconv.Itoa(pc.Partition), pc.Consumer, cs.Member(pc.Owner), pin, strconv.Itoa(pc.Waiting),
			strconv.FormatUint(pc.Pending, 10), strconv.Itoa(pc.AckPending))
	}
	return t.Render()
}

// infoFilters are the group's filters; an elastic group's in the
// create --filter syntax, so the hashed wildcards show.
func infoFilters(gi health.GroupInfo) []string {
	ec, ok := gi.Config.(cg.ElasticConfig)
	if !ok {
		return gi.Filters
	}
	if len(ec.PartitioningFilters) == 0 {
		return []string{"> (whole subject)"}
	}
	out := make([]string, len(ec.PartitioningFilters))
	for i, pf := range ec.PartitioningFilters {
		out[i] = pf.String()
	}
	return out
}

// backlogLine is the work stream's total backlog and each non-empty
// partition's share, in its owner's color.
func backlogLine(cs *render.ColorScheme, gi health.GroupInfo) string {
	var total uint64
	var parts []string
	for p, n := range gi.Backlog {
		total += n
		if n == 0 {
			continue
		}
		cell := fmt.Sprintf("%d:%d", p, n)
		if p < len(gi.Owners) && gi.Owners[p] != "" {
			cell = cs.MemberColor(gi.Owners[p])(cell)
		} else {
			cell = cs.Red(cell + "?")
		}
		parts = append(parts, cell)
	}
	if total == 0 {
		return "0 messages"
	}
	return fmt.Sprintf("%d messages in %d of %d partitions (partition:messages): %s", total, len(parts), len(gi.Backlog), strings.Join(parts, " "))
}

// partitionMap prints each partition number in its owner's color, so
// ownership is visible at a glance; without color the table says it.
func partitionMap(cs *render.ColorScheme, gi health.GroupInfo) string {
	if len(gi.Members) == 0 {
		return cs.Yellow("none: the group has no members")
	}
	var b strings.Builder
	for p, m := range gi.Owners {
		if p > 0 {
			b.WriteByte(' ')
		}
		if m == "" {
			b.WriteString(cs.Red(strconv.Itoa(p) + "?"))
			continue
		}
		b.WriteString(cs.MemberColor(m)(strconv.Itoa(p)))
	}
	if !cs.Enabled() {
		var parts []string
		for _, ms := range gi.Members {
			parts = append(parts, ms.Member+"="+render.Ranges(ms.Partitions))
		}
		return strings.Join(parts, "  ")
	}
	return b.String()
}

// status words a member's state. An elastic member's consumer goes away
// by inactivity once its instances stop, so its absence means no instance
// is running, not that none ever ran.
func status(cs *render.ColorScheme, ms health.MemberStatus, elastic bool) string {
	switch {
	case ms.Unusable != "":
		// A reference-made group may name a member the server cannot
		// hold a consumer for (such as ">"): it can never run.
		return cs.Red("impossible: the server refuses its consumer name")
	case !ms.ConsumerExists && elastic:
		return cs.Yellow("not running")
	case !ms.ConsumerExists:
		return cs.Yellow("never joined")
	case ms.Active:
		return cs.Green("active")
	default:
		return cs.Yellow("no instance")
	}
}

func pinned(ms health.MemberStatus, now time.Time) string {
	if !ms.Pinned {
		return "-"
	}
	s := shortPin(ms.PinID)
	if !ms.PinnedSince.IsZero() {
		s += " for " + now.Sub(ms.PinnedSince).Round(time.Second).String()
	}
	return s
}

// lagCells are a member's LAG and OLDEST cells: its unacked messages and
// how long the oldest has waited ("?" when unknown).
func lagCells(l *health.Lag) []string {
	if l == nil {
		return []string{"?", "?"}
	}
	return []string{strconv.FormatUint(l.Pending, 10), Age(*l)}
}

// Age is how long a lag's oldest message has waited: "-" when nothing is
// pending, "?" when the oldest could not be read.
func Age(l health.Lag) string {
	switch {
	case l.Pending == 0:
		return "-"
	case l.Oldest.IsZero():
		return "?"
	}
	return FormatAge(l.Age())
}

// FormatAge rounds a wait to what a person reads at a glance: 850ms,
// 3.2s, 4m12s, 2h5m.
func FormatAge(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}

// lagLine sums up the group's lag: unacked messages, the oldest wait, and
// each partition with something pending, in its owner's color.
func lagLine(cs *render.ColorScheme, gi health.GroupInfo) string {
	var total uint64
	var oldest *health.PartitionLag
	var parts []string
	unknown := 0
	for i, pl := range gi.PartitionLag {
		if !pl.Known {
			unknown++
			continue
		}
		if pl.Pending == 0 {
			continue
		}
		total += pl.Pending
		if !pl.Oldest.IsZero() && (oldest == nil || pl.Oldest.Before(oldest.Oldest)) {
			oldest = &gi.PartitionLag[i]
		}
		cell := fmt.Sprintf("%d:%d/%s", pl.Partition, pl.Pending, Age(pl.Lag))
		if gi.Backlog != nil {
			// The backlog line has the counts already.
			cell = fmt.Sprintf("%d:%s", pl.Partition, Age(pl.Lag))
		}
		if pl.Owner != "" {
			cell = cs.MemberColor(pl.Owner)(cell)
		} else {
			cell = cs.Red(cell + "?")
		}
		parts = append(parts, cell)
	}
	var b strings.Builder
	switch {
	case len(gi.PartitionLag) == 0:
		b.WriteString("unknown")
	case total == 0:
		b.WriteString("0 messages unacked")
	default:
		fmt.Fprintf(&b, "%d messages unacked", total)
		if oldest != nil {
			fmt.Fprintf(&b, ", oldest waiting %s (partition %d)", FormatAge(oldest.Age()), oldest.Partition)
		}
		legend := "partition:messages/oldest"
		if gi.Backlog != nil {
			legend = "partition:oldest"
		}
		fmt.Fprintf(&b, "; by partition (%s): %s", legend, strings.Join(parts, " "))
	}
	if unknown > 0 || gi.LagError != "" {
		b.WriteString("; " + cs.Yellow(gi.LagError))
	}
	return b.String()
}
