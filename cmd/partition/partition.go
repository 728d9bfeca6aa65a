// Package partition holds `cg partition`: where does a subject or a key go.
package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// Options are the bound arguments and flags of partition.
type Options struct {
	F          *factory.Factory
	Subject    string
	Keys       []string
	Partitions int
	Filter     *cg.PartitioningFilter
	Stream     string
	Group      string
	Elastic    bool
}

// Output is partition's --json view.
type Output struct {
	Subject    string   `json:"subject,omitempty"`
	Filter     string   `json:"filter,omitempty"`
	Tokens     []string `json:"tokens"`
	Key        string   `json:"key"`
	Hash       string   `json:"hash"`
	Partition  int      `json:"partition"`
	Partitions int      `json:"partitions"`
	Stream     string   `json:"stream,omitempty"`
	Group      string   `json:"group,omitempty"`
	Kind       string   `json:"kind,omitempty"`
	// Owner is the member owning the partition ("" when unowned or no
	// group was given).
	Owner string `json:"owner,omitempty"`
	// SameAs is a different split of the key's tokens that hashes alike,
	// when there is one.
	SameAs []string `json:"same_as,omitempty"`
}

// NewCmd builds `cg partition [subject]`.
func NewCmd(f *factory.Factory) *cobra.Command {
	opts := &Options{F: f}
	var filter string
	cmd := &cobra.Command{
		Use:     "partition [subject]",
		Aliases: []string{"part", "where"},
		Short:   "Show where a subject or key goes: the hashed key, its hash, the partition and its owner",
		Long: "Compute the partition a subject (or partition key) lands in, as the server's {{partition(N,...)}}\n" +
			"transform does: the FNV-1a hash of the tokens at the partitioning wildcards, concatenated, modulo N.\n" +
			"Give N and the partitioning filter (filter[:w1,...], as 'cg elastic create --filter'; none hashes\n" +
			"the whole subject), or the key tokens directly with --key, or --stream and --group to read them\n" +
			"from a group (its stream's transform for a static group, its filters with --elastic), which also\n" +
			"shows the member owning the partition. Only the group form connects to NATS.\n\n" +
			"Because tokens are concatenated with no separator, keys split differently (ab+c and a+bc) hash\n" +
			"alike: a warning says so when more than one token is hashed.",
		Example: "  cg partition orders.alice --partitions 10 --filter 'orders.*:1'\n" +
			"  cg partition --key alice --partitions 10\n" +
			"  cg partition orders.alice --stream ORDERS --group fulfillment --elastic\n" +
			"  cg partition events.eu.alice --partitions 8 --filter 'events.*.*:1,2' --json",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Subject = args[0]
			}
			if err := bind(cmd, opts, filter); err != nil {
				return err
			}
			return run(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Partitions, "partitions", 0, "number of partitions N (without --group)")
	fl.StringVar(&filter, "filter", "", "partitioning filter filter[:w1,w2,...], such as 'orders.*:1' (default: hash the whole subject)")
	fl.StringArrayVar(&opts.Keys, "key", nil, "a key token to hash instead of a subject; repeat to concatenate several in order")
	fl.StringVar(&opts.Stream, "stream", "", "read N, the filters and the owner from a group on this stream (with --group)")
	fl.StringVar(&opts.Group, "group", "", "the group to read (with --stream)")
	fl.BoolVar(&opts.Elastic, "elastic", false, "the group is an elastic group (default static)")
	return cmd
}

// bind checks the flags together, before anything dials.
func bind(cmd *cobra.Command, o *Options, filter string) error {
	fl := cmd.Flags()
	switch {
	case o.Subject == "" && len(o.Keys) == 0:
		return cmdutil.UsageErrorf("give a subject or --key: cg partition <subject> --partitions N, or cg partition --key K --partitions N")
	case o.Subject != "" && len(o.Keys) > 0:
		return cmdutil.UsageErrorf("give a subject or --key, not both")
	}
	for _, k := range o.Keys {
		if k == "" {
			return cmdutil.UsageErrorf("--key must not be empty")
		}
	}
	grouped := o.Stream != "" || o.Group != ""
	if grouped {
		if o.Stream == "" || o.Group == "" {
			return cmdutil.UsageErrorf("--stream and --group go together")
		}
		if err := cg.ValidateName("stream", o.Stream); err != nil {
			return cmdutil.NewUsageError(err)
		}
		if err := cg.ValidateName("group", o.Group); err != nil {
			return cmdutil.NewUsageError(err)
		}
		if fl.Changed("partitions") || fl.Changed("filter") {
			return cmdutil.UsageErrorf("--partitions and --filter come from the group with --stream and --group; leave them out")
		}
		return nil
	}
	if o.Elastic {
		return cmdutil.UsageErrorf("--elastic needs --stream and --group")
	}
	if !fl.Changed("partitions") {
		return cmdutil.UsageErrorf("--partitions N is required (or --stream and --group to read it from a group)")
	}
	if o.Partitions < 1 {
		return cmdutil.UsageErrorf("--partitions %d must be at least 1", o.Partitions)
	}
	if filter != "" {
		if len(o.Keys) > 0 {
			return cmdutil.UsageErrorf("--filter selects tokens of a subject; with --key give the tokens themselves")
		}
		pf, err := cg.ParsePartitioningFilter(filter)
		if err != nil {
			return cmdutil.NewUsageError(err)
		}
		o.Filter = &pf
	}
	return nil
}

func run(ctx context.Context, o *Options) error {
	out := Output{Subject: o.Subject, Partitions: o.Partitions}
	var filters []cg.PartitioningFilter
	if o.Filter != nil {
		filters = []cg.PartitioningFilter{*o.Filter}
	}
	var owners partition.Assignment
	if o.Stream != "" {
		var err error
		if filters, owners, err = readGroup(ctx, o); err != nil {
			return err
		}
		out.Stream, out.Group, out.Kind, out.Partitions = o.Stream, o.Group, string(kind(o)), owners.Partitions
	}
	var loc cg.KeyLocation
	if len(o.Keys) > 0 {
		loc = cg.LocateKey(o.Keys, out.Partitions)
	} else {
		var err error
		if loc, err = cg.LocateSubject(o.Subject, out.Partitions, filters); err != nil {
			return cmdutil.NewUsageError(err)
		}
		if len(filters) > 0 {
			out.Filter = loc.Filter.String()
		}
	}
	out.Tokens, out.Key, out.Hash, out.Partition = loc.Tokens, loc.Key, fmt.Sprintf("%08x", loc.Hash), loc.Partition
	if o.Stream != "" && loc.Partition < len(owners.Owner) {
		out.Owner = owners.Owner[loc.Partition]
	}
	out.SameAs, _ = partition.OtherSplit(loc.Tokens)

	ios := o.F.IOStreams
	cs := render.NewColorScheme(ios.ColorEnabled())
	if len(out.SameAs) > 0 {
		fmt.Fprintf(ios.ErrOut, "%s: the key is %d tokens concatenated (%s), so a subject splitting it differently, such as %s, hashes alike and lands in partition %d too\n",
			cs.Yellow("warning"), len(loc.Tokens), plus(loc.Tokens), plus(out.SameAs), loc.Partition)
	}
	if o.F.JSON {
		if out.Tokens == nil {
			out.Tokens = []string{}
		}
		return render.JSON(ios.Out, out)
	}
	kv := render.NewKeyValues(ios.Out)
	if out.Subject != "" {
		kv.Add("Subject", out.Subject)
	}
	if out.Filter != "" {
		kv.Add("Filter", out.Filter)
	}
	key := strconv.Quote(out.Key)
	if len(loc.Tokens) > 1 {
		key += " (" + plus(loc.Tokens) + ")"
	}
	kv.Add("Key", key)
	kv.Add("Hash", "0x"+out.Hash+" (FNV-1a)")
	kv.Add("Partition", cs.Bold(strconv.Itoa(out.Partition))+fmt.Sprintf(" of %d", out.Partitions))
	if o.Stream != "" {
		who := cs.Yellow("none") + " (unowned: its messages wait until a member owns it)"
		if out.Owner != "" {
			who = cs.Member(out.Owner)
		}
		kv.Add("Owner", who+" in "+out.Kind+" group "+o.Group+" on "+o.Stream)
	}
	return kv.Render()
}

func kind(o *Options) cg.Kind {
	if o.Elastic {
		return cg.KindElastic
	}
	return cg.KindStatic
}

// readGroup reads the partitioning filters and the ownership of the
// group: from the stream's transform and the static config, or from the
// elastic config.
func readGroup(ctx context.Context, o *Options) ([]cg.PartitioningFilter, partition.Assignment, error) {
	c, err := o.F.Client()
	if err != nil {
		return nil, partition.Assignment{}, err
	}
	if o.Elastic {
		cfg, err := c.ElasticConfig(ctx, o.Stream, o.Group)
		if err != nil {
			return nil, partition.Assignment{}, hints.Wrap(err, kind(o), o.Stream, o.Group)
		}
		return cfg.PartitioningFilters, cfg.Assignment(), nil
	}
	cfg, err := c.StaticConfig(ctx, o.Stream, o.Group)
	if err != nil {
		if errors.Is(err, cg.ErrGroupNotFound) {
			err = fmt.Errorf("%w (for an elastic group add --elastic)", err)
		}
		return nil, partition.Assignment{}, hints.Wrap(err, kind(o), o.Stream, o.Group)
	}
	pf, n, err := c.StaticPartitioning(ctx, o.Stream)
	if err != nil {
		return nil, partition.Assignment{}, err
	}
	a := cfg.Assignment()
	if n != a.Partitions {
		return nil, partition.Assignment{}, fmt.Errorf("stream %q partitions into %d but static group %q has max-members %d; recreate the group to match", o.Stream, n, o.Group, a.Partitions)
	}
	return []cg.PartitioningFilter{pf}, a, nil
}

func plus(tokens []string) string {
	q := make([]string, len(tokens))
	for i, t := range tokens {
		q[i] = strconv.Quote(t)
	}
	return strings.Join(q, "+")
}
