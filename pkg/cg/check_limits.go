package cg

import (
	"fmt"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// limitFindings reports a stored group (made by the reference, which has
// no ceiling) that cg will not start, and members whose consumer the
// server cannot hold.
func limitFindings(t checkTarget, cfg health.GroupConfig) []health.Finding {
	var out []health.Finding
	recreate := "delete the group and create it again"
	if n := cfg.PartitionCount(); n > MaxPartitions {
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodePartitionCeiling,
			Message: fmt.Sprintf("the group has %d partitions, above cg's ceiling of %d: cg refuses to start its members, since the server takes minutes to create a consumer with that many filter subjects and stalls JetStream meanwhile", n, MaxPartitions),
			Hint:    recreate + fmt.Sprintf(" with at most %d partitions", MaxPartitions),
			Remedy:  t.recreate("", fmt.Sprintf(" with at most %d partitions", MaxPartitions))})
	}
	l := newLayout(cfg)
	for _, m := range cfg.MemberNames() {
		name := m
		if t.kind == KindStatic {
			name = StaticConsumerName(t.group, m)
		}
		if p := ConsumerNameProblem(name); p != "" {
			without := " without that member name"
			if t.kind == KindStatic && ConsumerNameProblem(t.group) != "" {
				without = " under a group name without '.', '*', '>' or white space (the group's name is in every member's consumer name)"
			}
			out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeMemberUnusable, Member: m, Partitions: l.parts[m],
				Message: fmt.Sprintf("member %q can never run: %s, so its partitions %s are consumed by no one", m, p, partition.Ranges(l.parts[m])),
				Hint:    recreate + without, Remedy: t.recreate("", without)})
			continue
		}
		if cfg.PartitionCount() <= MaxPartitions {
			if f := len(l.memberFilters(cfg, m)); f > MaxPartitions {
				out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodePartitionCeiling, Member: m, Consumer: name,
					Message: fmt.Sprintf("member %s would need a consumer with %d filter subjects, above cg's ceiling of %d: cg refuses to start it", m, f, MaxPartitions),
					Hint:    recreate + " with fewer partitions or filters", Remedy: t.recreate("", " with fewer partitions or filters")})
			}
		}
	}
	return out
}

// wholeSubjectMessage and wholeSubjectHint word a group that hashes whole
// subjects ({{partition(N)}} without token indexes) on a server without
// that form. nats-server 2.11 refuses the form outright, so re-running the
// same create cannot help there: the hint says what does.
func wholeSubjectMessage(v Version) string {
	return fmt.Sprintf("nats-server %s refuses {{partition(N)}} without token indexes (whole-subject hashing needs %d.%d or later), which this group uses: its transform cannot exist on this server, so nothing is partitioned for it",
		v, MinWholeSubjectPartition.Major, MinWholeSubjectPartition.Minor)
}

func wholeSubjectHint(v Version) string {
	return fmt.Sprintf("upgrade the server to %d.%d or later; on %d.%d, delete the group and create it again naming the wildcards to hash (elastic: a filter 'orders.*:1'; static: a stream transform {{partition(N,1)}}), since the same create fails on this server",
		MinWholeSubjectPartition.Major, MinWholeSubjectPartition.Minor, v.Major, v.Minor)
}
