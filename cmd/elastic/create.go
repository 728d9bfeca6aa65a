package elastic

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// CreateOptions are the bound arguments and flags of create.
type CreateOptions struct {
	F             *factory.Factory
	Stream, Group string
	MaxMembers    int
	// Filters are the parsed --filter values; none means the subjects the
	// stream stores (cg.DefaultElasticFilters).
	Filters          []cg.PartitioningFilter
	MaxBufferedMsgs  int64
	MaxBufferedBytes int64
	Layout           cg.Layout
}

// Transform is one source subject transform of the work stream.
type Transform struct {
	Source      string `json:"source"`
	Destination string `json:"destination"`
}

// CreateOutput is create's --json view.
type CreateOutput struct {
	Stream  string `json:"stream"`
	Group   string `json:"group"`
	Created bool   `json:"created"`
	// DefaultFilters is true when no --filter was given and the filters
	// were taken from the stream's subjects.
	DefaultFilters bool             `json:"default_filters"`
	Config         cg.ElasticConfig `json:"config"`
	WorkStream     string           `json:"work_stream"`
	Transforms     []Transform      `json:"transforms"`
	Ownership      map[string][]int `json:"ownership"`
	// Repaired names the work stream settings that had drifted and were
	// set back.
	Repaired []string `json:"repaired,omitempty"`
}

const filterHelp = "partitioning filter filter[:w1,w2,...], repeatable, such as 'orders.*:1' (hash the token at the 1st '*');\n" +
	"a bare filter hashes all its '*' wildcards, 'orders.>' the whole subject, '>' alone every subject whole\n" +
	"(the reference's whole-subject mode, stored with no partitioning filters) (default: the subjects the stream stores)"

// NewCmdCreate builds `cg elastic create <stream> <group> <max-members>`.
func NewCmdCreate(f *factory.Factory) *cobra.Command {
	opts := &CreateOptions{F: f}
	var filters []string
	var layout string
	cmd := &cobra.Command{
		Use:   "create <stream> <group> <max-members>",
		Short: "Create an elastic group over any stream, with max-members partitions and no members yet",
		Long: "Create an elastic group: its stored configuration and its work-queue stream <stream>-<group>, which\n" +
			"sources the stream and puts each message's partition first in its subject. max-members is the\n" +
			"partition count, fixed for the group's life. Add members afterwards with 'cg elastic add'.\n\n" +
			"What is hashed comes from --filter, written filter[:w1,w2,...]: 'orders.*:1' takes orders.<id>\n" +
			"and hashes the token at the first '*', 'orders.*.*:2,1' hashes the second token then the first,\n" +
			"'orders.*' hashes every '*', 'orders.>' the whole subject; '>' alone is the reference's whole-subject\n" +
			"mode (stored with no partitioning filters, as the reference stores it). Filters match the subjects the stream\n" +
			"stores: on a partition-stamped stream (orders.* stored as <p>.orders.*) that is '*.orders.*:2',\n" +
			"and a filter that matches nothing stored is refused. Without --filter the stored subjects are\n" +
			"used, each hashed on the stream subject's own '*' wildcards, and create prints that choice.\n\n" +
			"Re-running an identical create succeeds; a different partition count, filter set or buffer cap\n" +
			"fails: delete and recreate the group. create never prompts.",
		Example: "  cg elastic create ORDERS fulfillment 10\n" +
			"  cg elastic create ORDERS fulfillment 10 --filter 'orders.*:1'\n" +
			"  cg elastic create EVENTS billing 16 --filter 'events.*.*:2' --filter 'audit.>' --max-buffered-msgs 100000",
		Args: cmdutil.Args("stream", "group", "max-members"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cg.ValidateName("group", args[1]); err != nil {
				return cmdutil.NewUsageError(err)
			}
			n, err := parseMax(args[2])
			if err != nil {
				return err
			}
			opts.Stream, opts.Group, opts.MaxMembers = args[0], args[1], n
			if opts.Layout, err = cmdutil.ParseLayout(layout); err != nil {
				return err
			}
			opts.Filters = nil
			for _, s := range filters {
				pf, err := cg.ParsePartitioningFilter(s)
				if err != nil {
					return cmdutil.NewUsageError(err)
				}
				opts.Filters = append(opts.Filters, pf)
			}
			// Without --filter the filters come from the stream later, but
			// max-members and the buffer caps can be checked now: a bad
			// number is the command line's fault, not the stream's.
			if err := opts.config(opts.Filters).Validate(); err != nil {
				return cmdutil.NewUsageError(err)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&filters, "filter", nil, filterHelp)
	cmdutil.BindLayout(cmd, &layout)
	cmdutil.Int64Var(fs, &opts.MaxBufferedMsgs, "max-buffered-msgs", 0, 0, "100000",
		"most messages the work-queue stream holds (0: unlimited); when full, sourcing pauses until members catch up")
	cmdutil.Int64Var(fs, &opts.MaxBufferedBytes, "max-buffered-bytes", 0, 0, "1073741824",
		"most bytes the work-queue stream holds (0: unlimited); when full, sourcing pauses until members catch up")
	return cmd
}

func parseMax(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, cmdutil.UsageErrorf("max-members %q must be a whole number of partitions, at least 1 (such as 10)", s)
	}
	return n, nil
}

func (o *CreateOptions) config(pfs []cg.PartitioningFilter) cg.ElasticConfig {
	return cg.ElasticConfig{MaxMembers: o.MaxMembers, PartitioningFilters: pfs,
		MaxBufferedMsgs: o.MaxBufferedMsgs, MaxBufferedBytes: o.MaxBufferedBytes, Layout: o.Layout}
}

// streamInfo reads the origin stream, for the default filters.
func streamInfo(ctx context.Context, c *cg.Client, stream string) (*jetstream.StreamInfo, error) {
	s, err := c.JetStream().Stream(ctx, stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("%w: %q", cg.ErrStreamNotFound, stream)
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %q: %w", stream, err)
	}
	return s.CachedInfo(), nil
}

func createRun(ctx context.Context, o *CreateOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ios := o.F.IOStreams
	pfs := o.Filters
	defaulted := len(pfs) == 0
	if defaulted {
		si, err := streamInfo(ctx, c, o.Stream)
		if err != nil {
			return err
		}
		subjects := si.Config.Subjects
		// The work stream sources what the stream stores: on a
		// partition-stamped stream that is not its configured subjects.
		pfs, err = cg.DefaultElasticFilters(si)
		if err != nil {
			return fmt.Errorf("%w; name the partitioning filters with --filter, none overlapping another", err)
		}
		if err := o.config(pfs).Validate(); err != nil {
			return fmt.Errorf("stream %s's subjects %s cannot serve as partitioning filters: %w; name the filters with --filter",
				o.Stream, strings.Join(subjects, " "), err)
		}
		stored := !slices.EqualFunc(pfs, cg.DefaultPartitioningFilters(subjects), func(a, b cg.PartitioningFilter) bool { return a.String() == b.String() })
		switch {
		case len(pfs) == 0:
			fmt.Fprintf(ios.ErrOut, "no --filter given and stream %s lists no subjects: hashing whole subjects (source '>')\n", o.Stream)
		case stored:
			fmt.Fprintf(ios.ErrOut, "no --filter given: stream %s stores its subjects %s as %s (its subject transform rewrites them), so using the stored form, hashed on the same tokens: --filter %s\n",
				o.Stream, strings.Join(subjects, " "), strings.Join(filterPatterns(pfs), " "), strings.Join(quoteAll(filterStrings(pfs)), " --filter "))
		default:
			fmt.Fprintf(ios.ErrOut, "no --filter given: using stream %s's subjects, hashed on all their '*' wildcards: --filter %s\n",
				o.Stream, strings.Join(quoteAll(filterStrings(pfs)), " --filter "))
		}
	}
	res, err := c.CreateElastic(ctx, o.Stream, o.Group, o.config(pfs))
	if err != nil {
		if errors.Is(err, cg.ErrGroupExists) {
			return fmt.Errorf("%w (cg elastic delete %s %s)", err, o.Stream, o.Group)
		}
		return err
	}
	out := CreateOutput{Stream: o.Stream, Group: o.Group, Created: res.Created, DefaultFilters: defaulted,
		Config: res.Config, WorkStream: res.WorkStream, Ownership: map[string][]int{}, Repaired: res.Repaired}
	if out.Config.PartitioningFilters == nil {
		out.Config.PartitioningFilters = []cg.PartitioningFilter{}
	}
	for _, t := range res.Transforms {
		out.Transforms = append(out.Transforms, Transform{Source: t.Source, Destination: t.Destination})
	}
	a := res.Config.Assignment()
	for _, m := range res.Config.MemberNames() {
		out.Ownership[m] = a.MemberPartitions(m)
	}
	if o.F.JSON {
		return render.JSON(ios.Out, out)
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	if res.Created {
		fmt.Fprintf(ios.ErrOut, "created elastic group %s on %s with %d partitions\n", o.Group, o.Stream, res.Config.MaxMembers)
	} else if len(res.Repaired) > 0 {
		fmt.Fprintf(ios.ErrOut, "elastic group %s on %s already exists (%d partitions); repaired its work stream %s: %s\n", o.Group, o.Stream, res.Config.MaxMembers, res.WorkStream, strings.Join(res.Repaired, ", "))
	} else {
		fmt.Fprintf(ios.ErrOut, "elastic group %s on %s already exists, identical (%d partitions)\n", o.Group, o.Stream, res.Config.MaxMembers)
	}
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Work stream", res.WorkStream+" (work queue, sourcing "+o.Stream+")")
	for _, t := range out.Transforms {
		kv.Add("Transform", t.Source+" -> "+t.Destination)
	}
	kv.Add("Buffer caps", caps(res.Config))
	kv.Add("Members", membership(cs, res.Config))
	if err := kv.Render(); err != nil {
		return err
	}
	if len(res.Config.MemberNames()) == 0 {
		fmt.Fprintf(ios.ErrOut, "add members with: cg elastic add %s %s <member>...\n", o.Stream, o.Group)
	}
	fmt.Fprintf(ios.ErrOut, "start members with: cg elastic consume %s %s <member>\n", o.Stream, o.Group)
	return nil
}

func filterPatterns(pfs []cg.PartitioningFilter) []string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = pf.Filter
	}
	return out
}

func filterStrings(pfs []cg.PartitioningFilter) []string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = pf.String()
	}
	return out
}

// quoteAll single-quotes shell words that hold wildcards.
func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		if strings.ContainsAny(s, "*>") {
			s = "'" + s + "'"
		}
		out[i] = s
	}
	return out
}

func caps(cfg cg.ElasticConfig) string {
	f := func(n int64, unit string) string {
		if n == 0 {
			return "unlimited " + unit
		}
		return strconv.FormatInt(n, 10) + " " + unit
	}
	return f(cfg.MaxBufferedMsgs, "messages") + ", " + f(cfg.MaxBufferedBytes, "bytes")
}

// membership renders who owns what: m1=0-4  m2=5-9 (balanced).
func membership(cs *render.ColorScheme, cfg cg.ElasticConfig) string {
	names := cfg.MemberNames()
	if len(names) == 0 {
		return cs.Yellow("none") + " (messages wait in the work stream until members are added)"
	}
	a := cfg.Assignment()
	parts := make([]string, len(names))
	for i, m := range names {
		parts[i] = cs.Member(m) + "=" + render.Ranges(a.MemberPartitions(m))
	}
	return strings.Join(parts, "  ") + " (" + cfg.Mode() + ")"
}
