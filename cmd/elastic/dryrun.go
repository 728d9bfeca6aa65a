package elastic

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

func bindDryRun(cmd *cobra.Command, p *bool) {
	cmd.Flags().BoolVar(p, "dry-run", false, "show the partitions that would move, and the fewest possible, without changing anything")
}

func changeOptions(dryRun bool) []cg.ChangeOption {
	if dryRun {
		return []cg.ChangeOption{cg.DryRun()}
	}
	return nil
}

// How a change hands partitions out, as a dry run names it.
const (
	// modeBalanced: add or drop re-splits the member list in blocks.
	modeBalanced = "balanced"
	// modeMinimal: add or drop --minimal, the fewest moves.
	modeMinimal = "minimal"
	// modeMappings: create-mapping, the mappings as given.
	modeMappings = "mappings"
)

// PlanOutput is the --json view of a --dry-run.
type PlanOutput struct {
	// Mode is how the change hands partitions out: balanced, minimal or
	// mappings.
	Mode  string     `json:"mode"`
	Moves []MoveView `json:"moves"`
	// Moved is how many partitions would change owner.
	Moved int `json:"moved"`
	// Minimum is the fewest partitions any assignment with the new
	// membership (balanced shares, or the mappings' shares) must move.
	Minimum int `json:"minimum"`
	// BalancedMoved is, in minimal mode, how many partitions the plain
	// re-split of a member list would move instead.
	BalancedMoved *int             `json:"balanced_moved,omitempty"`
	Config        cg.ElasticConfig `json:"config"`
}

// renderPlan prints what a change would do: how it hands partitions out,
// the membership it would leave, the partitions that would move, grouped
// as a real change prints them, and the fewest moves possible for
// comparison.
func renderPlan(f *factory.Factory, mc cg.MembershipChange, mode string) error {
	mc = withEmptyLists(mc)
	ios := f.IOStreams
	minimum, balanced := mc.MinimumMoves(), mc.BalancedMoves()
	if len(mc.Changed) == 0 {
		minimum, balanced = 0, 0
	}
	if f.JSON {
		out := PlanOutput{Mode: mode, Moves: moveViews(mc.Moves), Moved: len(mc.Moves), Minimum: minimum, Config: mc.Config}
		if mode == modeMinimal {
			out.BalancedMoved = &balanced
		}
		return render.JSON(ios.Out, out)
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	fmt.Fprintf(ios.ErrOut, "dry run: nothing written to elastic group %s on %s (revision %d)\n", mc.Group, mc.Stream, mc.Revision)
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Mode", modeLine(mode, mc))
	kv.Add("Members", membership(cs, mc.Config))
	moved := "none"
	if len(mc.Moves) > 0 {
		moved = fmt.Sprintf("%d of %d partitions", len(mc.Moves), mc.Config.MaxMembers)
	}
	kv.Add("Would move", moved)
	kv.Addf("Minimum", "%d (the fewest moves to reach these shares)", minimum)
	if mode == modeMinimal {
		kv.Addf("Balanced", "%d (what re-splitting a member list would move)", balanced)
	}
	if err := kv.Render(); err != nil {
		return err
	}
	if mode == modeBalanced && len(mc.Moves) > minimum {
		fmt.Fprintf(ios.ErrOut, "hint: with --minimal it would move %d (shares stay even, stored as member mappings)\n", minimum)
	}
	if len(mc.Moves) > 0 {
		fmt.Fprintln(ios.Out)
		t := render.NewTable(ios.Out, "PARTITIONS", "FROM", "TO")
		for _, run := range moveRuns(mc.Moves) {
			t.AddRow(render.Ranges(run.partitions), owner(cs, run.from), owner(cs, run.to))
		}
		return t.Render()
	}
	return nil
}

// modeLine says how a change hands partitions out.
func modeLine(mode string, mc cg.MembershipChange) string {
	switch {
	case mode == modeMappings:
		return "mappings (as given)"
	case mode == modeBalanced:
		return "balanced (the member list re-split in blocks)"
	case len(mc.Config.MemberMappings) > 0:
		return "minimal (even shares, fewest moves; stored as member mappings)"
	default:
		return "minimal (a member list moves no more, so it stays one)"
	}
}
