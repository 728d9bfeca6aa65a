// Package group holds the verbs static and elastic groups share, written
// once and mounted under both kinds: ls, info, member-info, step-down,
// delete and consume.
package group

import (
	"context"
	"fmt"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/pkg/cg"
)

// Kind binds the shared verbs to one kind of group. Its functions have the
// shape of the engine's method expressions, (*cg.Client).StaticInfo and so on.
type Kind struct {
	Name       string // "static" or "elastic"
	List       func(c *cg.Client, ctx context.Context, stream string) ([]string, error)
	Config     func(c *cg.Client, ctx context.Context, stream, group string) (cg.GroupConfig, error)
	Info       func(c *cg.Client, ctx context.Context, stream, group string) (cg.GroupInfo, error)
	MemberInfo func(c *cg.Client, ctx context.Context, stream, group, member string) (cg.MemberStatus, error)
	StepDown   func(c *cg.Client, ctx context.Context, stream, group, member string) (cg.StepDownResult, error)
	Delete     func(c *cg.Client, ctx context.Context, stream, group string) (cg.DeleteResult, error)
	Join       func(c *cg.Client, ctx context.Context, stream, group, member string, h cg.Handler, o cg.JoinOptions) (*cg.Member, error)
	// WorkStream names the stream the member consumers live on when it is
	// not the group's own stream (elastic groups); nil for static groups.
	WorkStream func(stream, group string) string
	// Owns says what delete removes besides the stored configuration.
	Owns string
}

// article is the kind's name with its indefinite article: "a static", "an elastic".
func (k Kind) article() string {
	if strings.ContainsRune("aeiou", rune(k.Name[0])) {
		return "an " + k.Name
	}
	return "a " + k.Name
}

// Static is the static kind.
func Static() Kind {
	return Kind{
		Name: "static",
		List: (*cg.Client).ListStatic,
		Config: func(c *cg.Client, ctx context.Context, stream, group string) (cg.GroupConfig, error) {
			return c.StaticConfig(ctx, stream, group)
		},
		Info:       (*cg.Client).StaticInfo,
		MemberInfo: (*cg.Client).StaticMemberInfo,
		StepDown:   (*cg.Client).StaticStepDown,
		Delete:     (*cg.Client).DeleteStatic,
		Join:       (*cg.Client).JoinStatic,
		Owns:       "its member consumers (<group>-<member>)",
	}
}

// Elastic is the elastic kind: members consume from the group's hidden
// work-queue stream <stream>-<group>.
func Elastic() Kind {
	return Kind{
		Name: "elastic",
		List: (*cg.Client).ListElastic,
		Config: func(c *cg.Client, ctx context.Context, stream, group string) (cg.GroupConfig, error) {
			return c.ElasticConfig(ctx, stream, group)
		},
		Info:       (*cg.Client).ElasticInfo,
		MemberInfo: (*cg.Client).ElasticMemberInfo,
		StepDown:   (*cg.Client).ElasticStepDown,
		Delete:     (*cg.Client).DeleteElastic,
		Join:       (*cg.Client).JoinElastic,
		WorkStream: cg.WorkStreamName,
		Owns:       "its work-queue stream (<stream>-<group>, with the member consumers on it)",
	}
}

// AddCommands mounts the shared verbs of kind k under parent.
func AddCommands(parent *cobra.Command, f *factory.Factory, k Kind) {
	parent.AddCommand(
		NewCmdLs(f, k),
		NewCmdInfo(f, k),
		NewCmdMemberInfo(f, k),
		NewCmdStepDown(f, k),
		NewCmdDelete(f, k),
		NewCmdConsume(f, k),
		NewCmdWatch(f, k),
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
func Wrap(err error, k Kind, stream, group string) error { return wrap(err, k, stream, group) }

// wrap words engine errors for people: what went wrong and what to do.
func wrap(err error, k Kind, stream, group string) error {
	if err == nil {
		return nil
	}
	switch {
	case isErr(err, cg.ErrGroupNotFound):
		return fmt.Errorf("%w; list groups with 'cg %s ls %s'", err, k.Name, stream)
	case isErr(err, cg.ErrMemberNotFound):
		return fmt.Errorf("%w; see 'cg %s info %s %s'", err, k.Name, stream, group)
	}
	return err
}
