package cg

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// CodeLayoutMemberConsumer (critical): a consumer with the name and shape
// of a reference-style member consumer (<group>-<member> on a static
// group's stream, <member> on an elastic group's work stream, pinned in
// PCG) exists beside a partition-layout group: whoever pulls it reads the
// group's messages beside cg's partition consumers, so a partition can
// have two active workers.
const CodeLayoutMemberConsumer = "layout-member-consumer"

// CodeLayoutConsumerNotOwned (critical): a consumer with a partition's
// consumer name that cg did not make for that partition of the group; the
// partition's owner cannot bind it.
const CodeLayoutConsumerNotOwned = "layout-consumer-not-owned"

// checkLayout is the consumers part of the check of a partition-layout
// group: its partitions' consumers on cstream, one each, and nothing of
// the member layout beside them.
func (r *checkRun) checkLayout(t checkTarget, cfg health.GroupConfig, cstream string, cons map[string]*jetstream.ConsumerInfo, memberConsumer func(string) string) []health.Finding {
	var out []health.Finding
	k := t.kind
	for _, m := range cfg.MemberNames() {
		name := memberConsumer(m)
		ci := cons[name]
		if ci == nil || !slices.Contains(ci.Config.PriorityGroups, PriorityGroup) {
			continue
		}
		f := health.Finding{Severity: health.SeverityCritical, Code: CodeLayoutMemberConsumer, Member: m, Consumer: name,
			Message: fmt.Sprintf("consumer %s on %s is a member-layout consumer of member %s, but %s group %s uses the partition layout: whatever pulls from it (a reference-library member, an older cg) reads the group's partitions beside cg's partition consumers, so a key can be handled twice and out of order", name, cstream, m, t.kind, t.group),
			Hint:    fmt.Sprintf("stop what pulls from it and delete it: nats consumer rm %s %s", cstream, name)}
		if ci.NumWaiting > 0 {
			f.Message += fmt.Sprintf("; %s pulling from it now", plural(uint64(ci.NumWaiting), "instance is", "instances are"))
		}
		out = append(out, f)
	}
	owners := cfg.Assignment().Owner
	live := map[string]bool{}
	var unowned []int
	unserved := map[string][]int{}
	pending := map[string]uint64{}
	for p := range cfg.PartitionCount() {
		owner := ""
		if p < len(owners) {
			owner = owners[p]
		}
		name := PartitionConsumerName(t.group, p)
		ci := cons[name]
		if ci != nil {
			if ok, why := PartitionConsumerOwned(ci.Config, k, t.stream, t.group, p); !ok {
				out = append(out, health.Finding{Severity: health.SeverityCritical, Code: CodeLayoutConsumerNotOwned, Consumer: name, Partitions: []int{p},
					Message: fmt.Sprintf("consumer %s on %s has the name of partition %d's consumer but %s: the partition's owner cannot read it", name, cstream, p, why),
					Hint:    fmt.Sprintf("remove it if nothing uses it (nats consumer rm %s %s), or rename the group", cstream, name)})
				continue
			}
		}
		if owner == "" {
			unowned = append(unowned, p)
			continue
		}
		if ci != nil && ci.NumWaiting > 0 {
			live[owner] = true
			continue
		}
		if ci != nil && ci.NumPending+uint64(max(ci.NumAckPending, 0)) > 0 {
			unserved[owner] = append(unserved[owner], p)
			pending[owner] += ci.NumPending + uint64(max(ci.NumAckPending, 0))
		}
	}
	if len(unowned) > 0 {
		sev := health.SeverityCritical
		if k == KindElastic {
			sev = health.SeverityWarning
		}
		out = append(out, health.Finding{Severity: sev, Code: health.CodePartitionUnowned, Partitions: unowned,
			Message: fmt.Sprintf("partitions %s have no owner: nothing reads them", partition.Ranges(unowned)),
			Hint:    "give the group members for every partition"})
	}
	for _, m := range cfg.MemberNames() {
		switch {
		case len(unserved[m]) > 0:
			out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodePartitionUnserved, Member: m, Partitions: unserved[m], Pending: pending[m],
				Message: fmt.Sprintf("no instance of member %s pulls partitions %s, and %s messages wait there", m, partition.Ranges(unserved[m]), strconv.FormatUint(pending[m], 10)),
				Hint:    "start the member (an instance pulls every partition it owns)"})
		case !live[m] && len(cfg.Assignment().MemberPartitions(m)) > 0:
			out = append(out, health.Finding{Severity: health.SeverityWarning, Code: health.CodeMemberNoInstance, Member: m,
				Message: fmt.Sprintf("member %s has no live instance (nothing waits for it yet)", m),
				Hint:    "start the member"})
		}
	}
	return out
}

// isPartitionConsumerOf reports whether name is one of the n partition
// consumer names of group.
func isPartitionConsumerOf(name, group string, n int) bool {
	rest, ok := strings.CutPrefix(name, group+"-p")
	if !ok {
		return false
	}
	p, err := strconv.Atoi(rest)
	return err == nil && p >= 0 && p < n && strconv.Itoa(p) == rest
}

// CodeMultiFilterSlow (warning): a member-layout member consumer reads
// several partitions, each through its own filter, over a stream holding
// many subjects with a backlog: the server walks the subjects for every
// fetch of such a consumer, so the member drains at a small fraction of a
// single-filter consumer's rate (docs/performance.md). The partition
// layout reads each partition through a single-filter consumer.
const CodeMultiFilterSlow = "multi-filter-slow"

// The thresholds of CodeMultiFilterSlow: below them the walk is cheap.
const (
	slowPathSubjects = 1000
	slowPathPending  = 1000
)

// slowPathFindings warns of member consumers on the slow path.
func slowPathFindings(t checkTarget, si *jetstream.StreamInfo, cons map[string]*jetstream.ConsumerInfo, memberConsumer func(string) string, members []string) []health.Finding {
	if si == nil || si.State.NumSubjects < slowPathSubjects {
		return nil
	}
	var out []health.Finding
	for _, m := range members {
		ci := cons[memberConsumer(m)]
		if ci == nil || len(consumerFilters(ci.Config)) < 2 || ci.NumPending < slowPathPending {
			continue
		}
		r := t.remedy(health.RemedyPartitionLayout)
		out = append(out, health.Finding{Severity: health.SeverityWarning, Code: CodeMultiFilterSlow, Member: m, Consumer: ci.Name, Pending: ci.NumPending,
			Message: fmt.Sprintf("member %s's consumer %s reads %d partitions through %d filters with %d messages pending over a stream of %d subjects: the server walks the subjects on every fetch of a multi-filter consumer, so the member drains far slower than a single-filter consumer", m, ci.Name, len(consumerFilters(ci.Config)), len(consumerFilters(ci.Config)), ci.NumPending, si.State.NumSubjects),
			Hint:    "recreate the group with the partition layout (one single-filter consumer per partition)", Remedy: r})
	}
	return out
}
