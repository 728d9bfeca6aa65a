package group

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// DeleteOptions are the bound arguments of delete.
type DeleteOptions struct {
	F             *factory.Factory
	Kind          cg.Kind
	Stream, Group string
	Force         bool
}

// NewCmdDelete builds `cg <kind> delete <stream> <group>`.
func NewCmdDelete(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &DeleteOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:     "delete <stream> <group>",
		Aliases: []string{"rm"},
		Short:   fmt.Sprintf("Delete %s group: its stored configuration and %s", article(k), shortOwns(k)),
		Long: fmt.Sprintf("Delete %s group and nothing else: its stored configuration and\n%s.\n"+
			"Running members stop cleanly. It asks for confirmation on a terminal; elsewhere it needs --force.", article(k), owns(k)),
		Example: fmt.Sprintf("  cg %s delete ORDERS fulfillment\n  cg %s rm ORDERS fulfillment --force", k, k),
		Args:    cmdutil.Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			return deleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVarP(&opts.Force, "force", "f", false, "delete without asking")
	return cmd
}

func deleteRun(ctx context.Context, o *DeleteOptions) error {
	ios := o.F.IOStreams
	if !o.Force && !ios.CanPrompt() {
		return cmdutil.UsageErrorf("refusing to delete %s group %s on %s without confirmation: standard input is not a terminal; add --force", o.Kind, o.Group, o.Stream)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	// Look it up first so an unknown group is an error before any prompt.
	if _, err := c.Config(ctx, o.Kind, o.Stream, o.Group); err != nil && isErr(err, errGroupNotFound) {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	if !o.Force {
		fmt.Fprintf(ios.ErrOut, "Delete %s group %s on stream %s and %s? [y/N] ", o.Kind, o.Group, o.Stream, shortOwns(o.Kind))
		line, _ := bufio.NewReader(ios.In).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(line)); a != "y" && a != "yes" {
			fmt.Fprintln(ios.ErrOut, "not deleted")
			return nil
		}
	}
	res, err := c.Delete(ctx, o.Kind, o.Stream, o.Group)
	if err != nil {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, deleteView(res))
	}
	fmt.Fprintf(ios.ErrOut, "deleted %s group %s on %s (key %s", o.Kind, o.Group, o.Stream, res.Key)
	if res.WorkStream != "" {
		fmt.Fprintf(ios.ErrOut, ", work stream %s", res.WorkStream)
	}
	if len(res.Consumers) > 0 {
		fmt.Fprintf(ios.ErrOut, ", consumers %s", strings.Join(res.Consumers, " "))
	}
	fmt.Fprintln(ios.ErrOut, ")")
	for _, k := range res.Kept {
		fmt.Fprintf(ios.ErrOut, "kept %s\n", k)
	}
	return nil
}

// shortOwns is owns(k) without its parenthesised detail.
func shortOwns(k cg.Kind) string {
	s, _, _ := strings.Cut(owns(k), " (")
	return s
}
