package cmd

import (
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/bench"
	"github.com/cg-dev/cg/cmd/check"
	"github.com/cg-dev/cg/cmd/dashboard"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/cmd/elastic"
	"github.com/cg-dev/cg/cmd/partition"
	"github.com/cg-dev/cg/cmd/publish"
	"github.com/cg-dev/cg/cmd/server"
	"github.com/cg-dev/cg/cmd/static"
	"github.com/cg-dev/cg/internal/factory"
)

// addGroupCommands mounts every top-level command. A new command group
// adds one line here: the `cg static` and `cg elastic` trees go first.
func addGroupCommands(root *cobra.Command, f *factory.Factory) {
	root.AddCommand(
		static.NewCmd(f),
		elastic.NewCmd(f),
		partition.NewCmd(f),
		check.NewCmd(f),
		demo.NewCmd(f),
		bench.NewCmd(f, Run),
		publish.NewCmd(f),
		server.NewCmd(f),
		dashboard.NewCmd(f),
		newCmdVersion(f),
	)
}
