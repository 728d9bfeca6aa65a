package group

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/internal/factory"
	"github.com/cg-dev/cg/cmd/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// InfoOptions are the bound arguments of info.
type InfoOptions struct {
	F      *factory.Factory
	Kind   Kind
	Stream string
	Group  string
	Now    func() time.Time
}

// NewCmdInfo builds `cg <kind> info <stream> <group>`.
func NewCmdInfo(f *factory.Factory, k Kind, runF func(context.Context, *InfoOptions) error) *cobra.Command {
	opts := &InfoOptions{F: f, Kind: k, Now: time.Now}
	return &cobra.Command{
		Use:     "info <stream> <group>",
		Short:   fmt.Sprintf("Show a %s group: who owns which partitions, pins, standbys and backlog", k.Name),
		Example: fmt.Sprintf("  cg %s info ORDERS fulfillment\n  cg %s info ORDERS fulfillment --json", k.Name, k.Name),
		Args:    Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return infoRun(cmd.Context(), opts)
		},
	}
}

func infoRun(ctx context.Context, o *InfoOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	gi, err := o.Kind.Info(c, ctx, o.Stream, o.Group)
	if err != nil {
		return wrap(err, o.Kind, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		return render.JSON(ios.Out, gi)
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	filters := gi.Filters
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Group", cs.Bold(gi.Group)+" ("+gi.Kind+")")
	kv.Add("Stream", gi.Stream)
	kv.Add("Partitions", fmt.Sprintf("%d, %s", gi.Partitions, gi.Mode))
	kv.Add("Filters", strings.Join(filters, " "))
	kv.Add("Ownership", partitionMap(cs, gi))
	if err := kv.Render(); err != nil {
		return err
	}
	fmt.Fprintln(ios.Out)
	t := render.NewTable(ios.Out, "MEMBER", "PARTITIONS", "STATUS", "PINNED", "STANDBYS", "PENDING", "ACK PENDING")
	for _, ms := range gi.Members {
		t.AddRow(cs.Member(ms.Member), Ranges(ms.Partitions), status(cs, ms), pinned(ms, o.Now()),
			strconv.Itoa(ms.Standbys), strconv.FormatUint(ms.Pending, 10), strconv.Itoa(ms.AckPending))
	}
	return t.Render()
}

// partitionMap prints each partition number in its owner's color, so
// ownership is visible at a glance; without color the table says it.
func partitionMap(cs *render.ColorScheme, gi cg.GroupInfo) string {
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
			parts = append(parts, ms.Member+"="+Ranges(ms.Partitions))
		}
		return strings.Join(parts, "  ")
	}
	return b.String()
}

func status(cs *render.ColorScheme, ms cg.MemberStatus) string {
	switch {
	case !ms.ConsumerExists:
		return cs.Yellow("never joined")
	case ms.Active:
		return cs.Green("active")
	default:
		return cs.Yellow("no instance")
	}
}

func pinned(ms cg.MemberStatus, now time.Time) string {
	if !ms.Pinned {
		return "-"
	}
	s := shortPin(ms.PinID)
	if !ms.PinnedSince.IsZero() {
		s += " for " + now.Sub(ms.PinnedSince).Round(time.Second).String()
	}
	return s
}
