package interop_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
)

// The on-server contract lets the two implementations differ on mapped groups with
// filters: the reference writes <p>.> whatever the filters, cg applies
// them. For elastic groups cg writes <p>.> too (the work stream holds only
// subjects a partitioning filter matched, so it selects the same
// messages) and mixed instances of one member share one consumer. For
// static groups the filters matter, so cg keeps them: a reference instance
// cannot join cg's consumer (the reference refuses any other config), and
// cg refuses — without touching it — a consumer live reference instances
// pull from with other filters. These tests pin that down.
func TestMappedFiltersMixedInstances(t *testing.T) {
	t.Parallel()
	t.Run("static", func(t *testing.T) {
		t.Parallel()
		for _, cgFirst := range []bool{true, false} {
			e := newEnv(t)
			e.staticStream(4)
			cfg := cg.StaticConfig{MaxMembers: 4, Filters: []string{"orders.*"}, MemberMappings: []partition.MemberMapping{{Member: "m1", Partitions: []int{0, 1, 2, 3}}}}
			if _, err := cg.New(e.js).CreateStatic(ctxT(t, 5*time.Second), streamName, groupName, cfg); err != nil {
				t.Fatal(err)
			}
			ref, _ := pcgroups.GetStaticConsumerGroupConfig(ctxT(t, 5*time.Second), e.js, streamName, groupName)
			t.Logf("m1's consumer filters: cg %v, reference %v", cfg.MemberFilters("m1"), refStaticFilters(ref, "m1"))
			rec := newRecorder()
			consumer := cg.StaticConsumerName(groupName, "m1")
			if cgFirst {
				cgStatic(t, e.conn(), "m1", "cg-1", rec)
				orig := e.consumerInfo(streamName, consumer)
				if _, err := pcgroups.StaticConsume(ctxT(t, 5*time.Second), e.conn(), streamName, groupName, "m1", rec.ref("m1", "ref-1"), refConsumerConfig()); err == nil {
					t.Errorf("cg first: the reference joined a consumer whose filters are not its <p>.> form")
				}
				assertSameConsumer(t, orig, e.consumerInfo(streamName, consumer), "cg first, reference refused")
			} else {
				refStatic(t, e.conn(), "m1", "ref-1", rec)
				orig := e.consumerInfo(streamName, consumer)
				eventually(t, 10*time.Second, "the reference instance pulling", func() bool {
					ci := e.consumerInfo(streamName, consumer)
					return ci != nil && ci.NumWaiting > 0
				})
				_, err := cg.New(e.conn()).JoinStatic(ctxT(t, 10*time.Second), streamName, groupName, "m1", rec.cg("m1", "cg-1"), cg.JoinOptions{})
				if !errors.Is(err, cg.ErrConsumerConflict) {
					t.Errorf("reference first: cg joined a consumer live reference instances use with other filters: %v", err)
				}
				assertSameConsumer(t, orig, e.consumerInfo(streamName, consumer), "reference first, cg refused")
			}
		}
	})
	t.Run("elastic", func(t *testing.T) {
		t.Parallel()
		for _, cgFirst := range []bool{true, false} {
			e := newEnv(t)
			e.plainStream()
			ctx := ctxT(t, 10*time.Second)
			c := cg.New(e.js)
			if _, err := c.CreateElastic(ctx, streamName, groupName, cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter(t)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.SetMappings(ctx, streamName, groupName, []partition.MemberMapping{{Member: "m1", Partitions: []int{0, 1, 2, 3}}}); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			churn := e.countConsumerChurn(workStream(), "m1")
			first, second := e.refStarter(rec), e.cgStarter(rec)
			if cgFirst {
				first, second = second, first
			}
			first(t, "m1", "1")
			eventually(t, 10*time.Second, "m1's consumer", func() bool { return e.consumerInfo(workStream(), "m1") != nil })
			ci := e.consumerInfo(workStream(), "m1")
			second(t, "m1", "1")
			p := newPublisher(t, e.js, keysCovering(4, 8, nil))
			p.publish(40)
			rec.waitHandled(t, p, 20*time.Second)
			watchFrom := time.Now()
			eventually(t, 15*time.Second, "m1's consumer steady", func() bool {
				if cr, del := churn(); cr != 1 || del != 0 {
					t.Errorf("cg first %v: m1's consumer (first made with filters %v) was created %d times and deleted %d times within %v of the second instance joining",
						cgFirst, ci.Config.FilterSubjects, cr, del, time.Since(watchFrom).Round(time.Millisecond))
					return true
				}
				return time.Since(watchFrom) > steadyWindow
			})
			if now := e.consumerInfo(workStream(), "m1"); now != nil && !slices.Equal(now.Config.FilterSubjects, ci.Config.FilterSubjects) {
				t.Logf("m1's consumer filters went from %v to %v", ci.Config.FilterSubjects, now.Config.FilterSubjects)
			}
			e.waitElasticQuiet(rec, p)
			rec.check(t, p, maxElasticDup)
		}
	})
}
