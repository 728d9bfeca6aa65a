package elastic

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/cmd/internal/factory"
	"github.com/cg-dev/cg/cmd/internal/render"
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

// PlanOutput is the --json view of a --dry-run.
type PlanOutput struct {
	Moves []cg.Move `json:"moves"`
	// Moved is how many partitions would change owner.
	Moved int `json:"moved"`
	// Minimum is the fewest partitions any assignment with the new
	// membership (balanced shares, or the mappings' shares) must move.
	Minimum int              `json:"minimum"`
	Config  cg.ElasticConfig `json:"config"`
}

// renderPlan prints what a change would do: the membership it would leave,
// the partitions that would move, grouped as a real change prints them,
// and the fewest moves possible for comparison.
func renderPlan(f *factory.Factory, mc cg.MembershipChange) error {
	mc = jsonChange(mc)
	ios := f.IOStreams
	minimum := mc.MinimumMoves()
	if len(mc.Changed) == 0 {
		minimum = 0
	}
	if f.JSON {
		return render.JSON(ios.Out, PlanOutput{Moves: mc.Moves, Moved: len(mc.Moves), Minimum: minimum, Config: mc.Config})
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	fmt.Fprintf(ios.ErrOut, "dry run: nothing written to elastic group %s on %s (revision %d)\n", mc.Group, mc.Stream, mc.Revision)
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Members", membership(cs, mc.Config))
	moved := "none"
	if len(mc.Moves) > 0 {
		moved = fmt.Sprintf("%d of %d partitions", len(mc.Moves), mc.Config.MaxMembers)
	}
	kv.Add("Would move", moved)
	kv.Addf("Minimum", "%d (the fewest moves to reach these shares)", minimum)
	if err := kv.Render(); err != nil {
		return err
	}
	if len(mc.Moves) > 0 {
		fmt.Fprintln(ios.Out)
		t := render.NewTable(ios.Out, "PARTITIONS", "FROM", "TO")
		for _, run := range moveRuns(mc.Moves) {
			t.AddRow(group.Ranges(run.partitions), owner(cs, run.from), owner(cs, run.to))
		}
		return t.Render()
	}
	return nil
}
