// Package group holds the verbs static and elastic groups share, written
// once and mounted under both kinds: ls, info, member-info, step-down,
// delete and consume.
package group

import (
	"fmt"
	"strings"
	"unicode"

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

// Args checks the positional arguments and names them in a usage error.
func Args(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == len(names) {
			return checkNames(cmd, names, args)
		}
		want := "<" + strings.Join(names, "> <") + ">"
		if len(args) < len(names) {
			return cmdutil.UsageErrorf("missing %s: %s takes %s", "<"+names[len(args)]+">", cmd.CommandPath(), want)
		}
		return cmdutil.UsageErrorf("too many arguments (%d): %s takes %s", len(args), cmd.CommandPath(), want)
	}
}

// ArgsVariadic checks positional arguments of the form <names...> <rest>...:
// at least len(names), the first ones named and checked as Args does, the
// extra ones checked as rest. Put rest among names too when one is required.
func ArgsVariadic(rest string, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		want := "<" + strings.Join(names, "> <") + ">"
		if len(names) == 0 || names[len(names)-1] != rest {
			want += " [" + rest + "...]"
		} else {
			want += "..."
		}
		if len(args) < len(names) {
			return cmdutil.UsageErrorf("missing %s: %s takes %s", "<"+names[len(args)]+">", cmd.CommandPath(), want)
		}
		if err := checkNames(cmd, names, args[:len(names)]); err != nil {
			return err
		}
		extra := args[len(names):]
		kinds := make([]string, len(extra))
		for i := range kinds {
			kinds[i] = rest
		}
		return checkNames(cmd, kinds, extra)
	}
}

// checkNames validates stream, group and member names before any dial.
func checkNames(cmd *cobra.Command, names, args []string) error {
	// Verbs that only look at a member may name one cg would not create.
	lenient := cmd.Name() == "member-info" || cmd.Name() == "step-down"
	for i, n := range names {
		switch n {
		case "group":
			// Verbs on stored groups take the names the reference stores
			// (with '.'); create checks strictly itself.
			if err := cg.ValidateStoredGroupName(args[i]); err != nil {
				return cmdutil.NewUsageError(err)
			}
		case "stream", "member":
			if err := cg.ValidateName(n, args[i]); err != nil {
				if n == "member" && lenient && storableMember(args[i]) {
					// A reference-made group may list such a member
					// (">" say): it can be shown and stepped down; consume
					// refuses it here, saying why it cannot run.
					continue
				}
				return cmdutil.NewUsageError(err)
			}
		}
	}
	return nil
}

// storableMember reports whether a member name that cg would not create
// may still be stored by another implementation and is worth looking up:
// anything printable and without white space.
func storableMember(name string) bool {
	if name == "" || len(name) > 255 {
		return false
	}
	for _, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Wrap words an engine error for people, as the shared verbs do: what
// went wrong and which command shows more.
func Wrap(err error, k cg.Kind, stream, group string) error { return wrap(err, k, stream, group) }

// wrap words engine errors for people: what went wrong and what to do.
func wrap(err error, k cg.Kind, stream, group string) error {
	if err == nil {
		return nil
	}
	switch {
	case isErr(err, cg.ErrGroupNotFound):
		return fmt.Errorf("%w; list groups with 'cg %s ls %s'", err, k, stream)
	case isErr(err, cg.ErrMemberNotFound):
		return fmt.Errorf("%w; see 'cg %s info %s %s'", err, k, stream, group)
	}
	return err
}
