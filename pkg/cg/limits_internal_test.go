package cg

import (
	"context"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// infoAllocs counts the allocations of the configuration-derived part of
// an info on n partitions (layout, member states, per-partition lag of an
// empty stream, which needs no request): allocation counts do not depend
// on how loaded the machine is, so linearity can be asserted on them.
func infoAllocs(n int, withConsumers bool) float64 {
	cfg := ElasticConfig{MaxMembers: n, Members: []string{"a", "b", "c", "d"},
		PartitioningFilters: []PartitioningFilter{{Filter: "o.*", PartitioningWildcards: []int{1}}}}
	si := &jetstream.StreamInfo{Config: jetstream.StreamConfig{AllowDirect: true}}
	cis := map[string]*jetstream.ConsumerInfo{}
	if withConsumers {
		for _, m := range cfg.MemberNames() {
			// Caught up, and filtering every one of its partitions.
			cis[m] = &jetstream.ConsumerInfo{Config: jetstream.ConsumerConfig{FilterSubjects: cfg.MemberFilters(m)}}
		}
	}
	c := &Client{}
	return testing.AllocsPerRun(2, func() {
		gi := health.GroupInfo{Kind: "elastic"}
		fillConfig(&gi, cfg)
		l := newLayout(cfg)
		for _, m := range cfg.MemberNames() {
			gi.Members = append(gi.Members, memberStatus(m, l.parts[m], l.memberFilters(cfg, m), m, cis[m]))
		}
		c.fillLag(context.Background(), &gi, lagInput{stream: "w", si: si, cis: cis}, lagScope{all: true})
		if len(gi.PartitionLag) != n {
			panic("partition lag missing")
		}
	})
}

// Info's own work grows linearly with the partitions: 16 times the
// partitions may cost at most 40 times the allocations (quadratic work,
// as before, made it about 250 times).
func TestInfoWorkLinearInPartitions(t *testing.T) {
	for _, withConsumers := range []bool{false, true} {
		small, big := infoAllocs(1000, withConsumers), infoAllocs(16000, withConsumers)
		t.Logf("consumers %v: %0.f allocations at 1000 partitions, %0.f at 16000 (x%.1f)", withConsumers, small, big, big/small)
		if big > 40*small {
			t.Errorf("consumers %v: allocations grow x%.1f for x16 partitions: not linear", withConsumers, big/small)
		}
	}
}
