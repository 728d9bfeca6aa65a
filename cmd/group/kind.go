// Package group holds the verbs static and elastic groups share, written
// once and mounted under both kinds: ls, info, member-info, step-down,
// delete and consume.
package group

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
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
		NewCmdRelayout(f, k),
		NewCmdPermissions(f, k),
	)
}

// MemberOptions are the bound arguments of the verbs that act on one
// member and take no flags of their own: member-info and step-down.
type MemberOptions struct {
	F                     *factory.Factory
	Kind                  cg.Kind
	Stream, Group, Member string
}

// newMemberCmd completes cmd, whose Use names <stream> <group> <member>,
// into a verb that binds those arguments and hands them to run.
func newMemberCmd(f *factory.Factory, k cg.Kind, cmd *cobra.Command, run func(context.Context, *MemberOptions) error) *cobra.Command {
	opts := &MemberOptions{F: f, Kind: k}
	cmd.Args = cmdutil.Args("stream", "group", "member")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		opts.Stream, opts.Group, opts.Member = args[0], args[1], args[2]
		return run(cmd.Context(), opts)
	}
	return cmd
}
