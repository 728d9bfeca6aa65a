package group

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/internal/exitcode"
	"github.com/cg-dev/cg/cmd/internal/factory"
	"github.com/cg-dev/cg/cmd/internal/render"
)

// DeleteOptions are the bound arguments of delete.
type DeleteOptions struct {
	F             *factory.Factory
	Kind          Kind
	Stream, Group string
	Force         bool
}

// NewCmdDelete builds `cg <kind> delete <stream> <group>`.
func NewCmdDelete(f *factory.Factory, k Kind, runF func(context.Context, *DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:     "delete <stream> <group>",
		Aliases: []string{"rm"},
		Short:   fmt.Sprintf("Delete a %s group: its stored configuration and its member consumers", k.Name),
		Long: fmt.Sprintf("Delete a %s group: its stored configuration and its own member consumers, nothing else.\n"+
			"Running members stop cleanly. It asks for confirmation on a terminal; elsewhere it needs --force.", k.Name),
		Example: fmt.Sprintf("  cg %s delete ORDERS fulfillment\n  cg %s rm ORDERS fulfillment --force", k.Name, k.Name),
		Args:    Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return deleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Force, "force", "f", false, "delete without asking")
	return cmd
}

func deleteRun(ctx context.Context, o *DeleteOptions) error {
	ios := o.F.IOStreams
	if !o.Force && !ios.CanPrompt() {
		return exitcode.UsageErrorf("refusing to delete %s group %s on %s without confirmation: standard input is not a terminal; add --force", o.Kind.Name, o.Group, o.Stream)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	// Look it up first so an unknown group is an error before any prompt.
	if _, err := o.Kind.Config(c, ctx, o.Stream, o.Group); err != nil && isErr(err, errGroupNotFound) {
		return wrap(err, o.Kind, o.Stream, o.Group)
	}
	if !o.Force {
		fmt.Fprintf(ios.ErrOut, "Delete %s group %s on stream %s and its member consumers? [y/N] ", o.Kind.Name, o.Group, o.Stream)
		line, _ := bufio.NewReader(ios.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(ios.ErrOut, "not deleted")
			return nil
		}
	}
	res, err := o.Kind.Delete(c, ctx, o.Stream, o.Group)
	if err != nil {
		return wrap(err, o.Kind, o.Stream, o.Group)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, res)
	}
	fmt.Fprintf(ios.ErrOut, "deleted %s group %s on %s (key %s", o.Kind.Name, o.Group, o.Stream, res.Key)
	if len(res.Consumers) > 0 {
		fmt.Fprintf(ios.ErrOut, ", consumers %s", strings.Join(res.Consumers, " "))
	}
	fmt.Fprintln(ios.ErrOut, ")")
	return nil
}
