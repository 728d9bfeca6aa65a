package elastic

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// MembersOptions are the bound arguments of add and drop.
type MembersOptions struct {
	F             *factory.Factory
	Stream, Group string
	Members       []string
	Drop          bool
	// DryRun computes the change and writes nothing.
	DryRun bool
	// Minimal moves the fewest partitions, storing member mappings.
	Minimal bool
}

// NewCmdAdd builds `cg elastic add <stream> <group> <member>...`.
func NewCmdAdd(f *factory.Factory) *cobra.Command {
	return newCmdMembers(f, false)
}

// NewCmdDrop builds `cg elastic drop <stream> <group> <member>...`.
func NewCmdDrop(f *factory.Factory) *cobra.Command {
	return newCmdMembers(f, true)
}

func newCmdMembers(f *factory.Factory, drop bool) *cobra.Command {
	opts := &MembersOptions{F: f, Drop: drop}
	cmd := &cobra.Command{
		Use:   "add <stream> <group> <member>...",
		Short: "Add members to an elastic group; running members rebalance live",
		Long: "Add members to an elastic group that uses a member list (not mappings), up to max-members.\n" +
			"Partitions are re-split in contiguous blocks over the members sorted by name, so few move; running\n" +
			"members hand over and take up partitions at once. Members already in the group are left as they\n" +
			"are. It prints the membership that results and each partition that changed owner.\n\n" +
			minimalHelp,
		Example: "  cg elastic add ORDERS fulfillment m1 m2\n  cg elastic add ORDERS fulfillment m3 --json",
	}
	if drop {
		cmd.Use = "drop <stream> <group> <member>..."
		cmd.Short = "Drop members from an elastic group; the others take over their partitions live"
		cmd.Long = "Drop members from an elastic group that uses a member list (not mappings). Their running\n" +
			"instances stop consuming and the remaining members take over their partitions at once. Names that\n" +
			"are not members are reported; if none is, the command fails. It prints the membership that results\n" +
			"and each partition that changed owner.\n\n" + minimalHelp
		cmd.Example = "  cg elastic drop ORDERS fulfillment m1\n  cg elastic drop ORDERS fulfillment m2 m3 --json"
	}
	cmd.Example += "\n  cg elastic " + cmd.Name() + " ORDERS fulfillment m9 --dry-run" +
		"\n  cg elastic " + cmd.Name() + " ORDERS fulfillment m9 --minimal --dry-run"
	bindDryRun(cmd, &opts.DryRun)
	cmd.Flags().BoolVar(&opts.Minimal, "minimal", false, "move the fewest partitions: keep shares even by storing member mappings instead of re-splitting the member list")
	cmd.Args = cmdutil.ArgsVariadic("member", "stream", "group", "member")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts.Stream, opts.Group, opts.Members = args[0], args[1], unique(args[2:])
		return membersRun(cmd.Context(), opts)
	}
	return cmd
}

// unique drops repeated names, first occurrence first.
func unique(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func membersRun(ctx context.Context, o *MembersOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	change, verb, prep, missing := c.AddMembers, "added", "to", "already a member"
	if o.Drop {
		change, verb, prep, missing = c.DropMembers, "dropped", "from", "not a member"
	}
	opts, mode := changeOptions(o.DryRun), modeBalanced
	if o.Minimal {
		opts, mode = append(opts, cg.Minimal()), modeMinimal
	}
	mc, err := change(ctx, o.Stream, o.Group, o.Members, opts...)
	if err != nil {
		return changeError(err, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	if o.DryRun {
		if !o.F.JSON {
			cs := render.NewColorScheme(ios.ColorEnabled())
			for _, m := range mc.Unchanged {
				fmt.Fprintf(ios.ErrOut, "%s: %s\n", cs.Member(m), missing)
			}
		}
		return renderPlan(o.F, mc, mode)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, jsonChange(mc))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	if len(mc.Changed) > 0 {
		fmt.Fprintf(ios.ErrOut, "%s %s %s elastic group %s on %s\n", verb, members(cs, mc.Changed), prep, o.Group, o.Stream)
	}
	for _, m := range mc.Unchanged {
		fmt.Fprintf(ios.ErrOut, "%s: %s\n", cs.Member(m), missing)
	}
	if len(mc.Changed) > 0 && len(mc.Config.MemberMappings) > 0 && len(mc.Previous.MemberMappings) == 0 {
		fmt.Fprintf(ios.ErrOut, "elastic group %s on %s now uses member mappings: change its members with --minimal, or go back to a member list with 'cg elastic delete-mapping %s %s'\n",
			o.Group, o.Stream, o.Stream, o.Group)
	}
	return renderChange(o.F, cs, mc)
}

// minimalHelp is the part of add's and drop's help about --minimal.
const minimalHelp = "With --minimal, the fewest partitions move: shares stay even (N/M rounded down or up) but each\n" +
	"member keeps as many of its partitions as it can, so growing 8 to 9 members over 256 partitions\n" +
	"moves 28 rather than 144. The result is stored as member mappings (unless a member list moves no\n" +
	"more), which every implementation honours; later adds and drops then need --minimal too, and\n" +
	"delete-mapping goes back to a member list. --minimal also works on a group that uses mappings,\n" +
	"evening out its shares."

// changeError words a failed membership change. Invalid input for this
// group (a bad mapping, more members than partitions) is a usage error.
func changeError(err error, stream, grp string) error {
	var ve *cg.ValidationError
	if errors.As(err, &ve) {
		return cmdutil.NewUsageError(err)
	}
	switch {
	case errors.Is(err, cg.ErrMappedGroup), errors.Is(err, cg.ErrNotMapped):
		return fmt.Errorf("%w; see 'cg elastic info %s %s'", err, stream, grp)
	}
	return hints.Wrap(err, cg.KindElastic, stream, grp)
}

func members(cs *render.ColorScheme, names []string) string {
	out := make([]string, len(names))
	for i, m := range names {
		out[i] = cs.Member(m)
	}
	return strings.Join(out, " ")
}

// renderChange prints the membership a change left and the partitions it
// moved, grouped into runs with the same old and new owner.
func renderChange(f *factory.Factory, cs *render.ColorScheme, mc cg.MembershipChange) error {
	ios := f.IOStreams
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Members", membership(cs, mc.Config))
	moved := "none"
	if len(mc.Moves) > 0 {
		moved = fmt.Sprintf("%d of %d partitions", len(mc.Moves), mc.Config.MaxMembers)
	}
	kv.Add("Moved", moved)
	kv.Add("Revision", strconv.FormatUint(mc.Revision, 10))
	if err := kv.Render(); err != nil {
		return err
	}
	if len(mc.Moves) > 0 {
		fmt.Fprintln(ios.Out)
		t := render.NewTable(ios.Out, "PARTITIONS", "FROM", "TO")
		for _, run := range moveRuns(mc.Moves) {
			t.AddRow(render.Ranges(run.partitions), owner(cs, run.from), owner(cs, run.to))
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if len(mc.Config.MemberNames()) == 0 {
		fmt.Fprintf(ios.ErrOut, "%s: elastic group %s on %s has no members now; messages wait in its work stream until you add one\n",
			cs.Yellow("warning"), mc.Group, mc.Stream)
	}
	return nil
}

func owner(cs *render.ColorScheme, m string) string {
	if m == "" {
		return "-"
	}
	return cs.Member(m)
}

type moveRun struct {
	from, to   string
	partitions []int
}

// moveRuns groups moves by (from, to), in order of first partition.
func moveRuns(moves []partition.Move) []moveRun {
	var runs []moveRun
	index := map[[2]string]int{}
	for _, mv := range moves {
		k := [2]string{mv.From, mv.To}
		i, ok := index[k]
		if !ok {
			i = len(runs)
			index[k] = i
			runs = append(runs, moveRun{from: mv.From, to: mv.To})
		}
		runs[i].partitions = append(runs[i].partitions, mv.Partition)
	}
	return runs
}
