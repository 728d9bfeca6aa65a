package interop_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
)

// A reference member pointed at a partition-layout group fails loudly at
// its start and consumes nothing: the group is stored where the reference
// never looks, and nothing of the member layout is created for it. (A
// member-layout group stored beside it keeps the reference's buckets in
// place, so the refusal is the missing key, not a missing bucket.)
func TestReferenceRefusesPartitionLayoutGroups(t *testing.T) {
	e := newEnv(t)
	e.staticStream(4)
	ctx := ctxT(t, 30*time.Second)
	c := cg.New(e.js)
	if _, err := c.CreateStatic(ctx, streamName, groupName, cg.StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2"}, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, streamName, "other", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.*"}}); err != nil {
		t.Fatal(err)
	}
	byFirst := []cg.PartitioningFilter{{Filter: "plain.*", PartitioningWildcards: []int{1}}}
	if _, err := c.CreateElastic(ctx, "PLAIN", groupName, cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: byFirst, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "PLAIN", "other", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: byFirst}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMembers(ctx, "PLAIN", groupName, []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		for _, subj := range []string{"orders.k", "plain.k"} {
			if _, err := e.js.Publish(ctx, subj+string(rune('a'+i)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	var handled atomic.Int64
	h := func(m jetstream.Msg) { handled.Add(1); _ = m.Ack() }
	if cc, err := pcgroups.StaticConsume(ctx, e.conn(), streamName, groupName, "m1", h, refConsumerConfig()); err == nil {
		cc.Stop()
		t.Fatal("the reference joined a partition-layout static group")
	} else {
		t.Logf("reference static member: %v", err)
	}
	if cc, err := pcgroups.ElasticConsume(ctx, e.conn(), "PLAIN", groupName, "m1", h, refConsumerConfig()); err == nil {
		cc.Stop()
		t.Fatal("the reference joined a partition-layout elastic group")
	} else {
		t.Logf("reference elastic member: %v", err)
	}
	if _, err := pcgroups.GetStaticConsumerGroupConfig(ctx, e.js, streamName, groupName); err == nil {
		t.Fatal("the reference reads a partition-layout static group's configuration")
	}
	if _, err := pcgroups.GetElasticConsumerGroupConfig(ctx, e.js, "PLAIN", groupName); err == nil {
		t.Fatal("the reference reads a partition-layout elastic group's configuration")
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("the reference handled %d messages of a partition-layout group", n)
	}
	if names := e.consumerNames(streamName); slices.Contains(names, "g-m1") {
		t.Fatalf("the reference made a member consumer on %s: %v", streamName, names)
	}
	if names := e.consumerNames(cg.WorkStreamName("PLAIN", groupName)); slices.Contains(names, "m1") {
		t.Fatalf("the reference made a member consumer on the work stream: %v", names)
	}
}

// A group the reference made and consumed, moved by cg to the partition
// layout: cg's members go on from where the reference's stopped (nothing
// lost, per-key order kept, at most the plan's count handled twice), and a
// reference member pointed at it afterwards fails at its start.
func TestReferenceGroupRelayoutToPartition(t *testing.T) {
	e := newEnv(t)
	e.staticStream(4)
	ctx := ctxT(t, 60*time.Second)
	if _, err := pcgroups.CreateStatic(ctx, e.js, streamName, groupName, 4, nil, []string{"m1", "m2"}, nil); err != nil {
		t.Fatal(err)
	}
	p := newPublisher(t, e.js, keysCovering(4, 16, nil))
	p.publish(200)
	r := newRecorder()
	a, b := refStatic(t, e.js, "m1", "ref-m1", r), refStatic(t, e.js, "m2", "ref-m2", r)
	eventually(t, 20*time.Second, "the reference handled some", func() bool { return r.unique() >= 60 })
	a.stop()
	b.stop()
	c := cg.New(e.js)
	eventually(t, 30*time.Second, "the reference's instances gone from the consumers", func() bool {
		_, err := c.RelayoutPlan(ctx, cg.KindStatic, streamName, groupName, cg.LayoutPartition)
		return err == nil
	})
	plan, err := c.Relayout(ctx, cg.KindStatic, streamName, groupName, cg.LayoutPartition)
	if err != nil {
		t.Fatal(err)
	}
	if names := e.consumerNames(streamName); slices.Contains(names, "g-m1") || slices.Contains(names, "g-m2") || !slices.Contains(names, "g-p0") {
		t.Fatalf("consumers after the move: %v", names)
	}
	if cc, err := pcgroups.StaticConsume(ctx, e.conn(), streamName, groupName, "m1", r.ref("m1", "ref-late"), refConsumerConfig()); err == nil {
		cc.Stop()
		t.Fatal("the reference joined the group after its move to the partition layout")
	}
	for _, m := range []string{"m1", "m2"} {
		mem, err := c.JoinStatic(ctx, streamName, groupName, m, r.cg(m, "cg-"+m), cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(mem.Stop)
	}
	r.waitHandled(t, p, 30*time.Second)
	var again uint64
	for _, n := range plan.New {
		again += n.Again
	}
	r.check(t, p, int(again))
}
