package group

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// LsOptions are the bound arguments of ls.
type LsOptions struct {
	F      *factory.Factory
	Kind   cg.Kind
	Stream string
}

// LsEntry is one group in ls --json.
type LsEntry struct {
	Group      string   `json:"group"`
	Partitions int      `json:"partitions"`
	Mode       string   `json:"mode"`
	Members    []string `json:"members"`
	// Layout is "partition" for a partition-layout group, absent for the
	// member layout (the reference's).
	Layout string `json:"layout,omitempty"`
	Error  string `json:"error,omitempty"`
}

// NewCmdLs builds `cg <kind> ls <stream>`.
func NewCmdLs(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &LsOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:     "ls <stream>",
		Aliases: []string{"list"},
		Short:   fmt.Sprintf("List the %s groups on a stream", k),
		Example: fmt.Sprintf("  cg %s ls ORDERS\n  cg %s ls ORDERS --json", k, k),
		Args:    cmdutil.Args("stream"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream = args[0]
			return lsRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func lsRun(ctx context.Context, o *LsOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	names, err := c.List(ctx, o.Kind, o.Stream)
	if err != nil {
		return err
	}
	entries := make([]LsEntry, 0, len(names))
	for _, n := range names {
		e := LsEntry{Group: n, Members: []string{}}
		cfg, err := c.Config(ctx, o.Kind, o.Stream, n)
		if err != nil {
			e.Error = hints.Error(err)
		} else {
			e.Partitions = cfg.PartitionCount()
			e.Mode = cfg.Mode()
			e.Members = cfg.MemberNames()
			if l := cg.LayoutOfConfig(cfg); l == cg.LayoutPartition {
				e.Layout = string(l)
			}
		}
		entries = append(entries, e)
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		return render.JSON(ios.Out, entries)
	}
	if len(entries) == 0 {
		fmt.Fprintf(ios.ErrOut, "no %s groups on stream %s; create one with 'cg %s create ...'\n", o.Kind, o.Stream, o.Kind)
		return nil
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	// The layout column shows once a partition-layout group is listed:
	// a stream of member-layout groups lists as it always has.
	layouts := false
	for _, e := range entries {
		layouts = layouts || e.Layout != ""
	}
	cols := []string{"GROUP", "PARTITIONS", "MODE"}
	if layouts {
		cols = append(cols, "LAYOUT")
	}
	t := render.NewTable(ios.Out, append(cols, "MEMBERS")...)
	for _, e := range entries {
		row := []string{e.Group, strconv.Itoa(e.Partitions), e.Mode}
		if e.Error != "" {
			row = []string{e.Group, "?", "?"}
		}
		if layouts {
			row = append(row, cmp.Or(e.Layout, string(cg.LayoutMember)))
		}
		if e.Error != "" {
			t.AddRow(append(row, cs.Red("unreadable: "+e.Error))...)
			continue
		}
		ms := make([]string, len(e.Members))
		for i, m := range e.Members {
			ms[i] = cs.Member(m)
		}
		t.AddRow(append(row, strings.Join(ms, " "))...)
	}
	return t.Render()
}
