package cg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

var (
	_ health.GroupConfig = StaticConfig{}
	_ health.GroupConfig = ElasticConfig{}
)

// PartitionCount implements GroupConfig.
func (c StaticConfig) PartitionCount() int { return c.MaxMembers }

// Mode implements GroupConfig.
func (c StaticConfig) Mode() string { return mode(len(c.MemberMappings)) }

// SubjectFilters implements GroupConfig.
func (c StaticConfig) SubjectFilters() []string {
	if len(c.Filters) == 0 {
		return []string{">"}
	}
	return c.Filters
}

func mode(mappings int) string {
	if mappings > 0 {
		return "mapped"
	}
	return "balanced"
}

// PartitioningFilter selects subjects of the origin stream and says which
// of the filter's `*` wildcards (1-based) make the partition key; none
// means the whole subject.
type PartitioningFilter struct {
	Filter                string `json:"filter"`
	PartitioningWildcards []int  `json:"partitioning_wildcards"`
}

// String renders a filter in the CLI's syntax: filter[:w1,w2,...].
func (pf PartitioningFilter) String() string {
	if len(pf.PartitioningWildcards) == 0 {
		return pf.Filter
	}
	ws := make([]string, len(pf.PartitioningWildcards))
	for i, w := range pf.PartitioningWildcards {
		ws[i] = strconv.Itoa(w)
	}
	return pf.Filter + ":" + strings.Join(ws, ",")
}

// ParsePartitioningFilter reads the CLI syntax `filter[:w1,w2,...]`, such
// as `orders.*:1` (hash the first wildcard's token) or `orders.>` (hash
// the whole subject). A bare filter with `*` wildcards hashes all of them.
func ParsePartitioningFilter(s string) (PartitioningFilter, error) {
	f, ws, hasWs := strings.Cut(s, ":")
	pf := PartitioningFilter{Filter: f}
	if err := ValidateFilter(f); err != nil {
		return pf, invalid("partitioning filter", strconv.Quote(s), "%s", err.(*ValidationError).Reason)
	}
	stars := strings.Count("."+f+".", ".*.")
	if !hasWs {
		for i := 1; i <= stars; i++ {
			pf.PartitioningWildcards = append(pf.PartitioningWildcards, i)
		}
	} else {
		for _, w := range strings.Split(ws, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(w))
			if err != nil {
				return pf, invalid("partitioning filter", strconv.Quote(s), "wildcard index %q is not a number; write filter:1,2 such as orders.*:1", w)
			}
			pf.PartitioningWildcards = append(pf.PartitioningWildcards, n)
		}
	}
	return pf, pf.validate()
}

func (pf PartitioningFilter) validate() error {
	if pf.Filter == "" {
		return invalid("partitioning filter", `""`, "must not be empty")
	}
	toks := strings.Split(pf.Filter, ".")
	stars := 0
	for _, t := range toks {
		if t == "*" {
			stars++
		}
	}
	if stars == 0 && toks[len(toks)-1] != ">" {
		return invalid("partitioning filter", strconv.Quote(pf.Filter), "needs a '*' wildcard to hash on, or a trailing '>' to hash the whole subject")
	}
	seen := map[int]bool{}
	for _, w := range pf.PartitioningWildcards {
		if w < 1 || w > stars {
			return invalid("partitioning filter", strconv.Quote(pf.String()), "wildcard index %d out of range: the filter has %d '*' wildcard(s), numbered from 1", w, stars)
		}
		if seen[w] {
			return invalid("partitioning filter", strconv.Quote(pf.String()), "wildcard index %d listed twice", w)
		}
		seen[w] = true
	}
	return nil
}

// DefaultPartitioningFilters are the filters cg uses when none are given:
// each of the stream's subjects, hashed on all its `*` wildcards (the
// whole subject when it has none).
func DefaultPartitioningFilters(subjects []string) []PartitioningFilter {
	out := make([]PartitioningFilter, 0, len(subjects))
	for _, s := range subjects {
		pf := PartitioningFilter{Filter: s, PartitioningWildcards: []int{}}
		k := 0
		for _, t := range strings.Split(s, ".") {
			if t == "*" {
				k++
				pf.PartitioningWildcards = append(pf.PartitioningWildcards, k)
			}
		}
		out = append(out, pf)
	}
	return out
}

// ElasticConfig is the stored configuration of an elastic group, kept as
// JSON under <stream>.<group> in the elastic-consumer-groups bucket. Field
// names (max_buffered_msg, singular) and omitempty rules are the
// reference's.
type ElasticConfig struct {
	MaxMembers          int                       `json:"max_members"`
	PartitioningFilters []PartitioningFilter      `json:"partitioning_filters"`
	MaxBufferedMsgs     int64                     `json:"max_buffered_msg,omitempty"`
	MaxBufferedBytes    int64                     `json:"max_buffered_bytes,omitempty"`
	Members             []string                  `json:"members,omitempty"`
	MemberMappings      []partition.MemberMapping `json:"member_mappings,omitempty"`
	// Layout is LayoutMember when empty; LayoutPartition groups are stored
	// in ElasticPartitionBucket.
	Layout Layout `json:"layout,omitempty"`
}

// PartitionCount implements GroupConfig.
func (c ElasticConfig) PartitionCount() int { return c.MaxMembers }

// Mode implements GroupConfig.
func (c ElasticConfig) Mode() string { return mode(len(c.MemberMappings)) }

// SubjectFilters implements GroupConfig.
func (c ElasticConfig) SubjectFilters() []string {
	if len(c.PartitioningFilters) == 0 {
		return []string{">"}
	}
	out := make([]string, len(c.PartitioningFilters))
	for i, pf := range c.PartitioningFilters {
		out[i] = pf.Filter
	}
	return out
}

// Assignment implements GroupConfig.
func (c ElasticConfig) Assignment() partition.Assignment {
	if len(c.Members) > 0 {
		return partition.BalancedAssignment(c.Members, c.MaxMembers)
	}
	return partition.MappedAssignment(c.MemberMappings, c.MaxMembers)
}

// IsMember implements GroupConfig.
func (c ElasticConfig) IsMember(name string) bool {
	return StaticConfig{MaxMembers: c.MaxMembers, Members: c.Members, MemberMappings: c.MemberMappings}.IsMember(name)
}

// MemberNames implements GroupConfig.
func (c ElasticConfig) MemberNames() []string {
	return StaticConfig{MaxMembers: c.MaxMembers, Members: c.Members, MemberMappings: c.MemberMappings}.MemberNames()
}

// MemberFilters implements GroupConfig, in the reference's order. For a
// mapped group they are <p>.> whatever the partitioning filters, as the
// reference writes them: the work stream holds only subjects that matched
// a partitioning filter, so it selects the same messages, and instances of
// one member from either implementation share one consumer.
func (c ElasticConfig) MemberFilters(member string) []string {
	if len(c.Members) == 0 && len(c.MemberMappings) > 0 {
		var out []string
		for _, mm := range c.MemberMappings {
			if mm.Member == member {
				out = append(out, partition.PartitionFilters(mm.Partitions, nil)...)
			}
		}
		return out
	}
	return StaticConfig{MaxMembers: c.MaxMembers, Filters: c.SubjectFilters(), Members: c.Members, MemberMappings: c.MemberMappings}.MemberFilters(member)
}

// ValidateStored applies the rules every implementation relies on.
func (c ElasticConfig) ValidateStored() error {
	if err := (StaticConfig{MaxMembers: c.MaxMembers, Members: c.Members, MemberMappings: c.MemberMappings}).ValidateStored(); err != nil {
		return err
	}
	for _, pf := range c.PartitioningFilters {
		if err := pf.validate(); err != nil {
			return err
		}
	}
	if len(c.PartitioningFilters) > 0 {
		if err := validateStoredFilters(c.SubjectFilters(), true); err != nil {
			return err
		}
	}
	if c.MaxBufferedMsgs < 0 {
		return invalid("max_buffered_msg", strconv.FormatInt(c.MaxBufferedMsgs, 10), "must not be negative (0 is unlimited)")
	}
	if c.MaxBufferedBytes < 0 {
		return invalid("max_buffered_bytes", strconv.FormatInt(c.MaxBufferedBytes, 10), "must not be negative (0 is unlimited)")
	}
	return nil
}

// Validate checks an elastic configuration as strictly as cg writes one.
func (c ElasticConfig) Validate() error {
	if err := checkLayout(c.Layout, c.MaxMembers); err != nil {
		return err
	}
	if err := checkCreateCeiling(c.MaxMembers, len(c.SubjectFilters())); err != nil {
		return err
	}
	if err := c.ValidateStored(); err != nil {
		return err
	}
	for _, pf := range c.PartitioningFilters {
		if err := ValidateFilter(pf.Filter); err != nil {
			return err
		}
	}
	fs := c.SubjectFilters()
	for i, a := range fs {
		for j, b := range fs {
			if i != j && subjectSubset(a, b) {
				return invalid("partitioning filters", strconv.Quote(a)+" and "+strconv.Quote(b), "overlap; a member's consumer cannot have overlapping filters")
			}
		}
	}
	members := StaticConfig{MaxMembers: c.MaxMembers, Members: c.Members, MemberMappings: c.MemberMappings}
	if len(c.Members) > 0 || len(c.MemberMappings) > 0 {
		return members.Validate()
	}
	return nil
}

// SameShape reports whether o has the same partitions, filters and
// buffer caps: what an existing elastic group can never change.
func (c ElasticConfig) SameShape(o ElasticConfig) bool {
	a, _ := json.Marshal(ElasticConfig{MaxMembers: c.MaxMembers, PartitioningFilters: c.PartitioningFilters, MaxBufferedMsgs: c.MaxBufferedMsgs, MaxBufferedBytes: c.MaxBufferedBytes})
	b, _ := json.Marshal(ElasticConfig{MaxMembers: o.MaxMembers, PartitioningFilters: o.PartitioningFilters, MaxBufferedMsgs: o.MaxBufferedMsgs, MaxBufferedBytes: o.MaxBufferedBytes})
	return string(normalizeNull(a)) == string(normalizeNull(b))
}

// ShapeDiff names what differs in shape, for "delete and recreate" errors.
func (c ElasticConfig) ShapeDiff(o ElasticConfig) []string {
	var out []string
	if c.MaxMembers != o.MaxMembers {
		out = append(out, fmt.Sprintf("max-members %d (asked %d)", c.MaxMembers, o.MaxMembers))
	}
	fa, fb := filterStrings(c.PartitioningFilters), filterStrings(o.PartitioningFilters)
	if !slices.Equal(fa, fb) {
		out = append(out, fmt.Sprintf("filters %v (asked %v)", fa, fb))
	}
	if c.MaxBufferedMsgs != o.MaxBufferedMsgs {
		out = append(out, fmt.Sprintf("max-buffered-msgs %d (asked %d)", c.MaxBufferedMsgs, o.MaxBufferedMsgs))
	}
	if c.MaxBufferedBytes != o.MaxBufferedBytes {
		out = append(out, fmt.Sprintf("max-buffered-bytes %d (asked %d)", c.MaxBufferedBytes, o.MaxBufferedBytes))
	}
	return out
}

func filterStrings(pfs []PartitioningFilter) []string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = pf.String()
	}
	return out
}

// normalizeNull makes "partitioning_filters":null and [] compare equal,
// and a nil wildcard list equal to an empty one.
func normalizeNull(b []byte) []byte {
	s := strings.ReplaceAll(string(b), `"partitioning_filters":null`, `"partitioning_filters":[]`)
	return []byte(strings.ReplaceAll(s, `"partitioning_wildcards":null`, `"partitioning_wildcards":[]`))
}

// WorkStreamName is the hidden work-queue stream of an elastic group.
func WorkStreamName(stream, group string) string { return stream + "-" + group }

// minimalChange sets cfg's membership to list the minimal way: mappings
// from MinimalMappings, unless a plain member list moves no more
// partitions (growing from one member to two, dropping the last member),
// in which case the member list stays: it is the contract's simpler form,
// and plain add and drop (the reference's too) can still change it.
func minimalChange(cfg *ElasticConfig, list []string) {
	before := cfg.Assignment()
	if len(partition.Moves(before, partition.BalancedAssignment(list, cfg.MaxMembers))) <= partition.MinimumBalancedMoves(before, list) {
		cfg.Members, cfg.MemberMappings = list, nil
		return
	}
	cfg.Members, cfg.MemberMappings = nil, partition.MinimalMappings(before, list)
}
