package elastic

import (
	"context"
	"fmt"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// CreateMappingOptions are the bound arguments of create-mapping.
type CreateMappingOptions struct {
	F             *factory.Factory
	Stream, Group string
	Mappings      []partition.MemberMapping
	// DryRun computes the change and writes nothing.
	DryRun bool
}

// NewCmdCreateMapping builds `cg elastic create-mapping <stream> <group> <member:p,p,...>...`.
func NewCmdCreateMapping(f *factory.Factory) *cobra.Command {
	opts := &CreateMappingOptions{F: f}
	cmd := &cobra.Command{
		Use:     "create-mapping <stream> <group> <member:p,p,...>...",
		Aliases: []string{"cm", "createmapping"},
		Short:   "Hand an elastic group's partitions out explicitly; running members rebalance live",
		Long: "Replace an elastic group's membership with explicit member to partition mappings, e.g. to give a\n" +
			"hot key's partition a member of its own. Every partition 0..max-members-1 must be mapped exactly\n" +
			"once; ranges such as 0-4 are accepted. It replaces a member list or earlier mappings; go back to a\n" +
			"member list with delete-mapping.",
		Example: "  cg elastic create-mapping ORDERS fulfillment m1:0-3 m2:4-8 whale:9\n" +
			"  cg elastic cm ORDERS fulfillment m1:0,2,4,6,8 m2:1,3,5,7,9 --json\n" +
			"  cg elastic cm ORDERS fulfillment m1:0-4 m2:5-9 --dry-run",
		Args: cmdutil.ArgsVariadic("member:p,p,...", "stream", "group", "member:p,p,..."),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group, opts.Mappings = args[0], args[1], nil
			for _, a := range args[2:] {
				mm, err := cg.ParseMapping(a)
				if err != nil {
					return cmdutil.NewUsageError(err)
				}
				opts.Mappings = append(opts.Mappings, mm)
			}
			return createMappingRun(cmd.Context(), opts)
		},
	}
	bindDryRun(cmd, &opts.DryRun)
	return cmd
}

func createMappingRun(ctx context.Context, o *CreateMappingOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	mc, err := c.SetMappings(ctx, o.Stream, o.Group, o.Mappings, changeOptions(o.DryRun)...)
	if err != nil {
		return changeError(err, o.Stream, o.Group)
	}
	if o.DryRun {
		return renderPlan(o.F, mc, modeMappings)
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		return render.JSON(ios.Out, jsonChange(mc))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	fmt.Fprintf(ios.ErrOut, "mapped the %d partitions of elastic group %s on %s to %s\n", mc.Config.MaxMembers, o.Group, o.Stream, members(cs, mc.Changed))
	return renderChange(o.F, cs, mc)
}

// DeleteMappingOptions are the bound arguments of delete-mapping.
type DeleteMappingOptions struct {
	F             *factory.Factory
	Stream, Group string
	// Members are the member list to go back to; none means the members
	// the mappings named.
	Members []string
}

// NewCmdDeleteMapping builds `cg elastic delete-mapping <stream> <group> [member...]`.
func NewCmdDeleteMapping(f *factory.Factory) *cobra.Command {
	opts := &DeleteMappingOptions{F: f}
	return &cobra.Command{
		Use:     "delete-mapping <stream> <group> [member...]",
		Aliases: []string{"dm", "deletemapping"},
		Short:   "Go back from mappings to a member list: the given members, or the mapped ones",
		Long: "Delete an elastic group's member mappings and split its partitions evenly over a member list\n" +
			"again: the members given, or by default the members the mappings named, so the group is never left\n" +
			"with no one to consume. Running members rebalance live. It prints the membership that results.",
		Example: "  cg elastic delete-mapping ORDERS fulfillment\n  cg elastic dm ORDERS fulfillment m1 m2 m3",
		Args:    cmdutil.ArgsVariadic("member", "stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group, opts.Members = args[0], args[1], unique(args[2:])
			return deleteMappingRun(cmd.Context(), opts)
		},
	}
}

func deleteMappingRun(ctx context.Context, o *DeleteMappingOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	mc, err := c.DeleteMappings(ctx, o.Stream, o.Group, o.Members)
	if err != nil {
		return changeError(err, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		return render.JSON(ios.Out, jsonChange(mc))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	which := "the members given"
	if len(o.Members) == 0 {
		which = "the members the mappings named"
	}
	fmt.Fprintf(ios.ErrOut, "deleted the member mappings of elastic group %s on %s; its partitions are split over %s: %s\n",
		o.Group, o.Stream, which, members(cs, mc.Config.MemberNames()))
	return renderChange(o.F, cs, mc)
}
