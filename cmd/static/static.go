// Package static holds `cg static`: the verbs only static groups have
// (create balanced|mapped) plus the shared group verbs.
package static

import (
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/pkg/cg"
)

// NewCmd builds `cg static`.
func NewCmd(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "static",
		Short: "Static groups: fixed membership over a partition-stamped stream",
		Long: "Static groups attach one pinned consumer per member, named <group>-<member>, directly to a\n" +
			"stream whose subject transform already puts {{partition(N,...)}} first. Membership is fixed at\n" +
			"creation: to change it, delete and recreate the group.",
		Example: "  cg static create balanced ORDERS fulfillment 10 m1 m2\n" +
			"  cg static consume ORDERS fulfillment m1\n" +
			"  cg static info ORDERS fulfillment",
	}
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a static group (balanced or mapped)",
	}
	create.AddCommand(NewCmdCreateBalanced(f), NewCmdCreateMapped(f))
	cmd.AddCommand(create)
	group.AddCommands(cmd, f, cg.KindStatic)
	cmd.AddCommand(group.NewCmdRelease(f, cg.KindStatic))
	return cmd
}
