package cg

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// Limits.
//
// The server builds a consumer's filter subjects in time quadratic in
// their number: one consumer with 1024 filter subjects is created in
// 0.03-0.14 s, with 4096 in 0.4-1.9 s, 8192 in 1.7-6.4 s, 16384 in 7 s,
// and with 100,000 JetStream stopped answering every client for minutes
// (measured with TestMeasureConsumerFilters on a loaded 2-core machine). A member owning all partitions has one
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
func checkJoinable(kind Kind, stream, group, member, consumer string, cfg health.GroupConfig) error {
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
	return checkJoinable(KindStatic, stream, group, member, StaticConsumerName(group, member), cfg)
}

// CheckJoinElastic: see CheckJoinStatic.
func CheckJoinElastic(stream, group, member string, cfg ElasticConfig) error {
	return checkJoinable(KindElastic, stream, group, member, member, cfg)
}

// layout is a group's partitions and consumer filters per member,
// computed in one pass over the partitions and members: info on a group
// of many partitions must not redo the assignment for every member (or
// partition), which made it quadratic.
type layout struct {
	parts   map[string][]int
	filters map[string][]string
}

func newLayout(cfg health.GroupConfig) layout {
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
					l.filters[mm.Member] = partition.PartitionFilters(mm.Partitions, c.Filters)
				}
			}
		} else {
			for m, ps := range l.parts {
				l.filters[m] = partition.PartitionFilters(ps, c.Filters)
			}
		}
	case ElasticConfig:
		if len(c.Members) == 0 && len(c.MemberMappings) > 0 {
			for _, mm := range c.MemberMappings {
				l.filters[mm.Member] = append(l.filters[mm.Member], partition.PartitionFilters(mm.Partitions, nil)...)
			}
		} else {
			for m, ps := range l.parts {
				l.filters[m] = partition.PartitionFilters(ps, c.SubjectFilters())
			}
		}
	}
	return l
}

// memberFilters is cfg.MemberFilters(member), from the layout when it has
// the member.
func (l layout) memberFilters(cfg health.GroupConfig, member string) []string {
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
func notPinned(ms health.MemberStatus) (bool, string) {
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

// Ceilings of the member's numeric options. Each bounds what the option
// costs in the member's memory, measured with TestMeasureMemoryPerUnit
// (runtime.MemStats after a collection, on a loaded 2-core machine):
//
//   - a handler slot (Concurrency) costs about 2.2 KB (a worker goroutine
//     and its lane): 1024 slots take about 2.2 MB (the built binary's
//     peak RSS, TestMeasureConsumeRSS: 29.8 MB at 1, 32.5 MB at 1024);
//   - a message held unacked in the instance (MaxAckPending: queued in a
//     lane, a batch or the pull buffer) costs about 1 KB plus its payload:
//     4096 of 1 KB take about 8 MB. The pull buffer is sized for at most
//     4096 unacknowledged messages, so a serial instance allowed more could
//     overflow it (the client drops what a full buffer cannot take);
//   - a batch (Batch.Size) holds its messages and, with the default max
//     ack pending of 4×Size, four batches' worth: 1024 is 4096 messages.
//
// With every option at its ceiling and 1 KB messages an instance holds
// about 10 MB for them. Beyond a ceiling Join refuses with an error
// wrapping ErrAboveCeiling, before anything is joined.
const (
	MaxConcurrency   = 1024
	MaxAckPendingMax = 4096
	MaxBatchSize     = 1024
	// MaxDeliverMax bounds RetryPolicy.MaxDeliver: it costs nothing per
	// unit, but a bound of more deliveries than this is no bound on a
	// poison message (at the shortest backoff it would be retried for
	// hours before it is dealt with).
	MaxDeliverMax = 1000
	// MaxBackoffSteps and MaxBackoffDelay bound RetryPolicy.Backoff and
	// BatchOptions.Backoff: a schedule is kept in the instance, and a nak
	// delayed by more than a day is a park, which the policy has.
	MaxBackoffSteps = 100
	MaxBackoffDelay = 24 * time.Hour
)

// CeilingError is an option above its ceiling.
type CeilingError struct {
	Option  string // the JoinOptions field, such as "Concurrency"
	Value   int64
	Ceiling int64
	// Cost says what one unit costs, the measurement the ceiling comes from.
	Cost string
}

func (e *CeilingError) Error() string {
	return fmt.Sprintf("%s %d is above cg's ceiling of %d (%s): use at most %d", e.Option, e.Value, e.Ceiling, e.Cost, e.Ceiling)
}

func (e *CeilingError) Unwrap() error { return ErrAboveCeiling }

// Costs of one unit, as the refusals and the docs say them.
const (
	CostConcurrency   = "each handler slot takes about 2.2 KB"
	CostMaxAckPending = "each message held unacked takes about 1 KB plus its payload, and the pull buffer holds at most 4096"
	CostBatchSize     = "a batch holds its messages, and four batches' worth are pulled ahead"
	CostMaxDeliver    = "a bound of more deliveries is no bound on a poison message"
	CostBackoffSteps  = "the schedule is kept in the instance; its last delay repeats"
)

// checkCeilings refuses options above their ceilings (withDefaults calls
// it first, so a default derived from them stays within too).
// MaxLayoutSlots bounds what one instance of a partition-layout group may
// hold across the group's partitions: each partition runtime has its own
// Concurrency handler slots and its own MaxAckPending window, so an
// instance that owns every partition holds N times the options. 16384
// slots is about 36 MB, 65536 messages held about 64 MB of 1 KB messages.
const (
	MaxLayoutSlots   = 16384
	MaxLayoutPending = 65536
)

// checkLayoutCeilings refuses options that, run once for each of a
// partition-layout group's n partitions, would go above the instance's
// ceilings.
func (o JoinOptions) checkLayoutCeilings(n int) error {
	if n < 1 {
		return nil
	}
	per := func(total int) int64 { return int64(max(1, total/n)) }
	cost := fmt.Sprintf("on the partition layout each of the group's %d partitions runs its own", n)
	if c := per(MaxLayoutSlots); o.Concurrency > 1 && int64(o.Concurrency) > c {
		return &CeilingError{Option: "Concurrency", Value: int64(o.Concurrency), Ceiling: c,
			Cost: cost + " handler slots, and an instance holds at most " + fmt.Sprint(MaxLayoutSlots)}
	}
	if c := per(MaxLayoutPending); int64(o.MaxAckPending) > c {
		return &CeilingError{Option: "MaxAckPending", Value: int64(o.MaxAckPending), Ceiling: c,
			Cost: cost + " window of unacked messages, and an instance holds at most " + fmt.Sprint(MaxLayoutPending)}
	}
	return nil
}

func (o JoinOptions) checkCeilings() error {
	above := func(opt string, v, c int64, cost string) error {
		if v > c {
			return &CeilingError{Option: opt, Value: v, Ceiling: c, Cost: cost}
		}
		return nil
	}
	if err := above("Concurrency", int64(o.Concurrency), MaxConcurrency, CostConcurrency); err != nil {
		return err
	}
	if err := above("MaxAckPending", int64(o.MaxAckPending), MaxAckPendingMax, CostMaxAckPending); err != nil {
		return err
	}
	if o.Batch != nil {
		if err := above("Batch.Size", int64(o.Batch.Size), MaxBatchSize, CostBatchSize); err != nil {
			return err
		}
		if err := checkBackoff("Batch.Backoff", o.Batch.Backoff); err != nil {
			return err
		}
	}
	if o.Retry != nil {
		if err := above("Retry.MaxDeliver", int64(o.Retry.MaxDeliver), MaxDeliverMax, CostMaxDeliver); err != nil {
			return err
		}
		if err := checkBackoff("Retry.Backoff", o.Retry.Backoff); err != nil {
			return err
		}
	}
	return nil
}

// checkBackoff refuses a backoff schedule above MaxBackoffSteps entries or
// with a delay above MaxBackoffDelay.
func checkBackoff(opt string, b []time.Duration) error {
	if len(b) > MaxBackoffSteps {
		return &CeilingError{Option: opt + " entries", Value: int64(len(b)), Ceiling: MaxBackoffSteps, Cost: CostBackoffSteps}
	}
	for _, d := range b {
		if d > MaxBackoffDelay {
			return fmt.Errorf("%w: %s delay %s is above cg's ceiling of %s (a longer wait is a park: use PoisonPark): use at most %s", ErrAboveCeiling, opt, d, MaxBackoffDelay, MaxBackoffDelay)
		}
	}
	return nil
}
