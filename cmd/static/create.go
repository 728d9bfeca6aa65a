package static

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// CreateOptions are the bound arguments of create balanced|mapped.
type CreateOptions struct {
	F             *factory.Factory
	Stream, Group string
	Config        cg.StaticConfig
}

// CreateOutput is create's --json view.
type CreateOutput struct {
	Stream    string            `json:"stream"`
	Group     string            `json:"group"`
	Created   bool              `json:"created"`
	Config    cg.StaticConfig   `json:"config"`
	Ownership map[string][]int  `json:"ownership"`
	Transform map[string]string `json:"stream_transform"`
	Consumers []string          `json:"consumers"`
}

func parseMax(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, cmdutil.UsageErrorf("max-members %q must be a whole number of partitions, at least 1 (such as 10)", s)
	}
	return n, nil
}

func bindFilters(cmd *cobra.Command, p *[]string) {
	cmd.Flags().StringArrayVar(p, "filter", nil, "subject filter within each partition, repeatable (default '>')")
}

func checkFilters(fs []string) error {
	for _, f := range fs {
		if err := cg.ValidateFilter(f); err != nil {
			return cmdutil.NewUsageError(err)
		}
	}
	return nil
}

// newCmdCreate builds one of the create verbs: both bind the same
// positional identity and --filter, and differ in how the arguments after
// max-members become membership.
func newCmdCreate(f *factory.Factory, cmd *cobra.Command, last string,
	membership func(cfg *cg.StaticConfig, args []string) error) *cobra.Command {
	opts := &CreateOptions{F: f}
	var filters []string
	var layout string
	cmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) < 4 {
			return cmdutil.Args("stream", "group", "max-members", last)(cmd, args)
		}
		return nil
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := validateIdentity(args[0], args[1]); err != nil {
			return err
		}
		n, err := parseMax(args[2])
		if err != nil {
			return err
		}
		if err := checkFilters(filters); err != nil {
			return err
		}
		if err := positionalFilter(args[3:]); err != nil {
			return err
		}
		opts.Stream, opts.Group = args[0], args[1]
		l, err := cmdutil.ParseLayout(layout)
		if err != nil {
			return err
		}
		opts.Config = cg.StaticConfig{MaxMembers: n, Filters: filters, Layout: l}
		if err := membership(&opts.Config, args[3:]); err != nil {
			return err
		}
		if err := opts.Config.Validate(); err != nil {
			return cmdutil.NewUsageError(err)
		}
		return createRun(cmd.Context(), opts)
	}
	bindFilters(cmd, &filters)
	cmdutil.BindLayout(cmd, &layout)
	return cmd
}

// NewCmdCreateBalanced builds `cg static create balanced`.
func NewCmdCreateBalanced(f *factory.Factory) *cobra.Command {
	return newCmdCreate(f, &cobra.Command{
		Use:   "balanced <stream> <group> <max-members> <member>...",
		Short: "Create a static group whose partitions are spread evenly over a member list",
		Long: "Create a static group over a stream whose subject transform starts with {{partition(N,...)}},\n" +
			"with N equal to max-members. Partitions are split in contiguous blocks over the members sorted by\n" +
			"name, leftovers round-robin, exactly as every implementation computes it.",
		Example: "  cg static create balanced ORDERS fulfillment 10 m1 m2\n  cg static create balanced ORDERS fulfillment 10 m1 m2 --filter '>'",
	}, "member", func(cfg *cg.StaticConfig, args []string) error {
		cfg.Members = args
		return nil
	})
}

// NewCmdCreateMapped builds `cg static create mapped`.
func NewCmdCreateMapped(f *factory.Factory) *cobra.Command {
	return newCmdCreate(f, &cobra.Command{
		Use:   "mapped <stream> <group> <max-members> <member:p,p,...>...",
		Short: "Create a static group with explicit member to partition mappings",
		Long: "Create a static group whose partitions are handed out explicitly, e.g. to give a hot key's\n" +
			"partition a member of its own. Every partition 0..max-members-1 must be mapped exactly once;\n" +
			"ranges such as 0-4 are accepted.",
		Example: "  cg static create mapped ORDERS fulfillment 10 m1:0,1,2,3 m2:4-8 whale:9",
	}, "member:p,p,...", func(cfg *cg.StaticConfig, args []string) error {
		for _, a := range args {
			mm, err := cg.ParseMapping(a)
			if err != nil {
				return cmdutil.NewUsageError(err)
			}
			cfg.MemberMappings = append(cfg.MemberMappings, mm)
		}
		return nil
	})
}

// positionalFilter refuses a subject filter given where a member goes, as
// the reference's CLI takes it (`create balanced S g 10 '>' m1 m2`); the
// reference would store '>' as a member whose consumer cannot exist.
func positionalFilter(args []string) error {
	for _, a := range args {
		if !strings.ContainsAny(a, "*>.") || strings.Contains(a, ":") || cg.ValidateFilter(a) != nil {
			continue
		}
		if cg.ValidateName("member", a) == nil {
			continue
		}
		return cmdutil.UsageErrorf("%q is not a member name (member names may not contain '.', '*' or '>'); it looks like a subject filter: did you mean --filter '%s'?", a, a)
	}
	return nil
}

func validateIdentity(stream, grp string) error {
	if err := cg.ValidateName("stream", stream); err != nil {
		return cmdutil.NewUsageError(err)
	}
	if err := cg.ValidateName("group", grp); err != nil {
		return cmdutil.NewUsageError(err)
	}
	return nil
}

// createError words a failed create. What the engine refuses as invalid
// input (a consumer name the server would reject, say) is a usage error; a
// stored configuration it cannot read is not the command line's fault.
func createError(err error) error {
	var ve *cg.ValidationError
	if errors.As(err, &ve) && !errors.Is(err, cg.ErrInvalidConfig) {
		return cmdutil.NewUsageError(err)
	}
	return err
}

func createRun(ctx context.Context, o *CreateOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	res, err := c.CreateStatic(ctx, o.Stream, o.Group, o.Config)
	if err != nil {
		return createError(err)
	}
	ios := o.F.IOStreams
	a := res.Config.Assignment()
	out := CreateOutput{Stream: o.Stream, Group: o.Group, Created: res.Created, Config: res.Config,
		Ownership: map[string][]int{}, Transform: map[string]string{"source": res.Transform.Source, "destination": res.Transform.Destination}}
	for _, m := range res.Config.MemberNames() {
		out.Ownership[m] = a.MemberPartitions(m)
		if res.Config.LayoutOf() == cg.LayoutMember {
			out.Consumers = append(out.Consumers, cg.StaticConsumerName(o.Group, m))
		}
	}
	if res.Config.LayoutOf() == cg.LayoutPartition {
		for p := range res.Config.MaxMembers {
			out.Consumers = append(out.Consumers, cg.PartitionConsumerName(o.Group, p))
		}
	}
	if o.F.JSON {
		return render.JSON(ios.Out, out)
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	verb := "created"
	if !res.Created {
		verb = "already exists, identical:"
	}
	layout := ""
	if res.Config.LayoutOf() == cg.LayoutPartition {
		layout = ", partition layout: one consumer per partition"
	}
	fmt.Fprintf(ios.ErrOut, "static group %s on %s %s %d partitions (stream transform %s%s)\n", o.Group, o.Stream, verb, res.Config.MaxMembers, res.Transform.Destination, layout)
	var parts []string
	for _, m := range res.Config.MemberNames() {
		parts = append(parts, cs.Member(m)+"="+render.Ranges(out.Ownership[m]))
	}
	fmt.Fprintf(ios.Out, "%s\n", strings.Join(parts, "  "))
	fmt.Fprintf(ios.ErrOut, "start members with: cg static consume %s %s <member>\n", o.Stream, o.Group)
	return nil
}
