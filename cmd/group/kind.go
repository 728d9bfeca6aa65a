// Package group holds the verbs static and elastic groups share, written
// once and mounted under both kinds: ls, info, member-info, step-down,
// delete and consume.
package group

import (
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/pkg/cg"
)

// article is the kind's name with its indefinite article: "a static", "an elastic".
func article(k cg.Kind) string {
	if k == cg.KindElastic {
		return "an " + string(k)
	}
	return "a " + string(k)
}

// owns says what delete removes of a group of kind k besides its stored
// configuration.
func owns(k cg.Kind) string {
	if k.HasWorkStream() {
		return "its work-queue stream (<stream>-<group>, with the member consumers on it)"
	}
	return "its member consumers (<group>-<member>)"
}

// AddCommands mounts the shared verbs of kind k under parent.
func AddCommands(parent *cobra.Command, f *factory.Factory, k cg.Kind) {
	parent.AddCommand(
		NewCmdLs(f, k),
		NewCmdInfo(f, k),
		NewCmdMemberInfo(f, k),
		NewCmdStepDown(f, k),
		NewCmdDelete(f, k),
		NewCmdConsume(f, k),
		NewCmdWatch(f, k),
		NewCmdReset(f, k),
		NewCmdPermissions(f, k),
	)
}
