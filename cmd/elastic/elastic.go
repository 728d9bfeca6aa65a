// Package elastic holds `cg elastic`: the verbs only elastic groups have
// (create, add, drop, create-mapping, delete-mapping) plus the shared
// group verbs.
package elastic

import (
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/pkg/cg"
)

// NewCmd builds `cg elastic`.
func NewCmd(f *factory.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "elastic",
		Short: "Elastic groups: live membership over any stream, through a work-queue copy",
		Long: "Elastic groups work on any stream. create makes a hidden work-queue stream <stream>-<group> that\n" +
			"sources the stream and stamps each message with its partition; each member consumes from it\n" +
			"through a pinned consumer named <member>. Membership is live: add, drop and the mapping verbs edit\n" +
			"the stored configuration and running members rebalance at once. The partition count, filters and\n" +
			"buffer caps never change: to change them, delete and recreate the group.",
		Example: "  cg elastic create ORDERS fulfillment 10 --filter 'orders.*:1'\n" +
			"  cg elastic add ORDERS fulfillment m1 m2\n" +
			"  cg elastic consume ORDERS fulfillment m1",
	}
	k := cg.KindElastic
	cmd.AddCommand(
		NewCmdCreate(f),
		NewCmdAdd(f),
		NewCmdDrop(f),
		NewCmdCreateMapping(f),
		NewCmdDeleteMapping(f),
	)
	group.AddCommands(cmd, f, k)
	cmd.AddCommand(group.NewCmdRelease(f, k))
	return cmd
}
