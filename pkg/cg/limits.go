package cg

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits.
//
// The server builds a consumer's filter subjects in time quadratic in
// their number: one consumer with 1024 filter subjects is created in
// 0.03-0.14 s, with 4096 in 0.4-1.9 s, 8192 in 1.7-6.4 s, 16384 in 7 s,
// and with 100,000 JetStream stopped answering every client for minutes
// (measured with TestMeasureConsumerFilters on a loaded 2-core machine
// and as reported in issue 9). A member owning all partitions has one
// filter subject per partition and group filter, so cg refuses to create
// a group beyond MaxPartitions, and refuses to start a member whose
// consumer would carry more than MaxPartitions filter subjects (a group
// the reference stored without that ceiling): such a group can still be
// shown, checked and deleted.

// MaxPartitions is the largest partition count cg creates, and the
// largest number of filter subjects it puts on one member consumer.
const MaxPartitions = 4096

// maxStoredPartitions bounds max_members in a stored value. The wire
// format has no limit, but info builds per-partition state, so a corrupt
// value such as 1e11 must be refused rather than allocated; a million
// partitions is far beyond any useful parallelism.
const maxStoredPartitions = 1 << 20

// ErrTooManyPartitions is wrapped by the refusals of the ceiling.
var ErrTooManyPartitions = fmt.Errorf("more partitions than cg supports (at most %d)", MaxPartitions)

// checkCreateCeiling refuses a group a member consumer of which could carry
// more than MaxPartitions filter subjects: n partitions times f filters
// (a member may come to own all of them).
func checkCreateCeiling(n, f int) error {
	f = max(f, 1)
	if n > MaxPartitions {
		return &ValidationError{Field: "max-members", Value: strconv.Itoa(n), Reason: fmt.Sprintf(
			"is above cg's ceiling of %d partitions: the server creates a member consumer in time quadratic in its filter subjects (4096 take about a second, 100000 stall JetStream for minutes); use at most %d", MaxPartitions, MaxPartitions)}
	}
	if n*f > MaxPartitions {
		return &ValidationError{Field: "max-members", Value: strconv.Itoa(n), Reason: fmt.Sprintf(
			"times %d filters makes %d filter subjects for a member owning every partition, above cg's ceiling of %d (the server creates a consumer in time quadratic in its filter subjects); use fewer partitions or filters", f, n*f, MaxPartitions)}
	}
	return nil
}

// checkStaticCeiling is checkCreateCeiling for a static group, whose
// membership never changes: what counts is the largest member's share.
func checkStaticCeiling(c StaticConfig) error {
	if err := checkCreateCeiling(c.MaxMembers, 1); err != nil || c.MaxMembers < 1 {
		return err
	}
	f := max(len(c.Filters), 1)
	if c.MaxMembers*f <= MaxPartitions {
		return nil
	}
	most := 0
	for _, ps := range newLayout(c).parts {
		most = max(most, len(ps))
	}
	for _, mm := range c.MemberMappings {
		most = max(most, len(mm.Partitions))
	}
	if most*f > MaxPartitions {
		return &ValidationError{Field: "max-members", Value: strconv.Itoa(c.MaxMembers), Reason: fmt.Sprintf(
			"gives a member %d partitions times %d filters, %d filter subjects, above cg's ceiling of %d (the server creates a consumer in time quadratic in its filter subjects); use fewer partitions or filters, or more members", most, f, most*f, MaxPartitions)}
	}
	return nil
}

// ConsumerNameProblem says why the server can hold no consumer named
// name, or "" when it can. A reference-made group may list a member such
// as ">" (its README's positional filter taken as a member).
func ConsumerNameProblem(name string) string {
	switch {
	case name == "":
		return "a consumer name must not be empty"
	case strings.ContainsAny(name, ">*. /\\\t\r\n"):
		return fmt.Sprintf("consumer name %q is impossible: the server refuses names with '.', '*', '>', '/', '\\' or white space", name)
	case len(name) > 255:
		return fmt.Sprintf("consumer name %q... is longer than the server allows (255 bytes)", name[:20])
	}
	return ""
}

// checkJoinable refuses to start member of a stored group the server
// cannot serve: a consumer name it cannot hold, or more filter subjects
// than MaxPartitions (see above). It is called once the stored
// configuration has been read, before anything is sent to the server.
func checkJoinable(kind, stream, group, member, consumer string, cfg GroupConfig) error {
	if p := ConsumerNameProblem(consumer); p != "" {
		return described{fmt.Sprintf("member %q of %s group %q on %q cannot run: %s; the group can still be shown and deleted, and its other members run", member, kind, group, stream, p), ErrInvalidConfig}
	}
	if n := cfg.PartitionCount(); n > MaxPartitions {
		return described{fmt.Sprintf("%s group %q on %q has %d partitions, above cg's ceiling of %d: its member consumers would take the server minutes to create and stall JetStream; recreate the group with at most %d partitions", kind, group, stream, n, MaxPartitions, MaxPartitions), ErrTooManyPartitions}
	}
	if f := len(cfg.MemberFilters(member)); f > MaxPartitions {
		return described{fmt.Sprintf("member %q of %s group %q on %q would need a consumer with %d filter subjects, above cg's ceiling of %d: the server would take minutes to create it; recreate the group with fewer partitions or filters", member, kind, group, stream, f, MaxPartitions), ErrTooManyPartitions}
	}
	return nil
}

// CheckJoinStatic and CheckJoinElastic are checkJoinable for each kind,
// the one line JoinStatic and JoinElastic call after reading the config.
func CheckJoinStatic(stream, group, member string, cfg StaticConfig) error {
	return checkJoinable("static", stream, group, member, StaticConsumerName(group, member), cfg)
}

// CheckJoinElastic: see CheckJoinStatic.
func CheckJoinElastic(stream, group, member string, cfg ElasticConfig) error {
	return checkJoinable("elastic", stream, group, member, member, cfg)
}

// layout is a group's partitions and consumer filters per member,
// computed in one pass over the partitions and members: info on a group
// of many partitions must not redo the assignment for every member (or
// partition), which made it quadratic.
type layout struct {
	parts   map[string][]int
	filters map[string][]string
}

func newLayout(cfg GroupConfig) layout {
	l := layout{parts: map[string][]int{}, filters: map[string][]string{}}
	for p, m := range cfg.Assignment().Owner {
		if m != "" {
			l.parts[m] = append(l.parts[m], p)
		}
	}
	switch c := cfg.(type) {
	case StaticConfig:
		if len(c.Members) == 0 {
			for _, mm := range c.MemberMappings {
				if _, seen := l.filters[mm.Member]; !seen {
					l.filters[mm.Member] = PartitionFilters(mm.Partitions, c.Filters)
				}
			}
		} else {
			for m, ps := range l.parts {
				l.filters[m] = PartitionFilters(ps, c.Filters)
			}
		}
	case ElasticConfig:
		if len(c.Members) == 0 && len(c.MemberMappings) > 0 {
			for _, mm := range c.MemberMappings {
				l.filters[mm.Member] = append(l.filters[mm.Member], PartitionFilters(mm.Partitions, nil)...)
			}
		} else {
			for m, ps := range l.parts {
				l.filters[m] = PartitionFilters(ps, c.SubjectFilters())
			}
		}
	}
	return l
}

// memberFilters is cfg.MemberFilters(member), from the layout when it has
// the member.
func (l layout) memberFilters(cfg GroupConfig, member string) []string {
	if fs, ok := l.filters[member]; ok {
		return fs
	}
	return cfg.MemberFilters(member)
}

// byPartition groups filter subjects <p>.<rest> by their partition token,
// once, so each partition finds its own without scanning all of them.
func byPartition(fs []string) map[int][]string {
	out := map[int][]string{}
	for _, f := range fs {
		tok, _, ok := strings.Cut(f, ".")
		if !ok {
			continue
		}
		if p, err := strconv.Atoi(tok); err == nil && strconv.Itoa(p) == tok {
			out[p] = append(out[p], f)
		}
	}
	return out
}

// notPinned tells whether a step-down of ms has nothing to release, and why.
func notPinned(ms MemberStatus) (bool, string) {
	switch {
	case ms.Unusable != "":
		return true, ms.Unusable
	case !ms.ConsumerExists:
		return true, fmt.Sprintf("member %q has no consumer %s: no instance is running", ms.Member, ms.Consumer)
	case !ms.Pinned:
		return true, fmt.Sprintf("member %q has no pinned instance", ms.Member)
	}
	return false, ""
}

// memberNameReason says why a member name may not hold r: the member's
// consumer would carry it, and the server refuses such consumer names.
func memberNameReason(r rune) string {
	what := fmt.Sprintf("%q", r)
	if r == '*' || r == '>' {
		what = "the wildcards '*' or '>'"
	}
	return "must not contain " + what + ": the server refuses it in a consumer name, so no instance of such a member could run"
}
