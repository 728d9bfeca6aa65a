package cg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// layoutStatic makes static group g over ORDERS (10 partitions) with the
// partition layout, and returns a maker of clients on their own
// connections, as separate processes would have.
func layoutStatic(t *testing.T, members ...string) (*cg.Client, jetstream.JetStream, func() *cg.Client, func() (*cg.Client, func())) {
	t.Helper()
	s, c, js := setup(t)
	if _, err := c.CreateStatic(ctxT(t), "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: members, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	fresh := func() *cg.Client {
		cl, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		return cl
	}
	killable := func() (*cg.Client, func()) {
		nc := natstest.Connect(t, s)
		cl, _ := cg.NewFromConn(nc, "")
		return cl, nc.Close
	}
	return c, js, fresh, killable
}

// pinsOf is the union of the instances' pins, failing on a partition two
// of them believe they hold.
func pinsOf(t *testing.T, ms ...*cg.Member) map[int]string {
	t.Helper()
	out := map[int]string{}
	for _, m := range ms {
		for p, pin := range m.Pins() {
			if other, dup := out[p]; dup && other == pin {
				t.Fatalf("partition %d: pin %s held by two instances", p, pin)
			}
			out[p] = pin
		}
	}
	return out
}

func streamConsumers(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for n := range s.ListConsumers(context.Background()).Info() {
		out = append(out, n.Name)
	}
	sort.Strings(out)
	return out
}

func partitionNames(group string, n int) []string {
	var out []string
	for p := range n {
		out = append(out, cg.PartitionConsumerName(group, p))
	}
	sort.Strings(out)
	return out
}

func TestLayoutStaticExactlyOnceInOrderAcrossInstances(t *testing.T) {
	c, js, fresh, _ := layoutStatic(t, "m1", "m2")
	ctx := ctxT(t)
	l := newLedger()
	byMember := map[string][]*cg.Member{}
	for _, inst := range []string{"m1a", "m1b", "m2a", "m2b"} {
		member := inst[:2]
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", member, l.handler(inst), cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		byMember[member] = append(byMember[member], m)
	}
	if got, want := streamConsumers(t, js, "ORDERS"), partitionNames("g", 10); !slices.Equal(got, want) {
		t.Fatalf("consumers on ORDERS: %v, want one per partition %v", got, want)
	}
	pub := startPublisher(t, js, 20, 400, time.Millisecond)
	<-pub.done
	n := pub.n
	natstest.Eventually(t, 30*time.Second, "every message handled", func() bool { return l.distinct() == n })
	l.mu.Lock()
	bad, dups := slices.Clone(l.bad), l.dups
	l.mu.Unlock()
	if len(bad) > 0 || dups > 0 {
		t.Fatalf("%d order violations %v, %d duplicates", len(bad), bad, dups)
	}
	for member, ms := range byMember {
		want := map[int]bool{}
		for _, p := range ms[0].Partitions() {
			want[p] = true
		}
		natstest.Eventually(t, 10*time.Second, member+"'s partitions all pinned", func() bool {
			pins := pinsOf(t, ms...)
			if len(pins) != len(want) {
				return false
			}
			for p := range pins {
				if !want[p] {
					t.Fatalf("%s holds the pin of partition %d, not its own", member, p)
				}
			}
			return true
		})
	}
	// Each partition consumer has both instances' pull requests waiting;
	// one of them may be between two pulls at any one reading (a loaded
	// machine showed 1), so read again until both are seen. The server
	// counts requests, not instances: a loaded instance's late pull may
	// wait beside its next until it expires (up to 41 seen, and a third
	// request on one consumer for 30 s at load 13-20), so more than two
	// requests (and a standby count above one) is still both instances.
	natstest.Eventually(t, 30*time.Second, "info shows every partition consumer pinned with both instances waiting", func() bool {
		gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		if gi.Layout != "partition" || len(gi.Members) != 2 {
			t.Fatalf("info: layout %q, %d members", gi.Layout, len(gi.Members))
		}
		for _, ms := range gi.Members {
			if len(ms.PartitionConsumers) != 5 {
				t.Fatalf("member %s: %d partition consumers: %+v", ms.Member, len(ms.PartitionConsumers), ms)
			}
			// Standbys is counted from waiting pull requests (above).
			if !ms.Pinned || ms.Standbys < 1 {
				return false
			}
			for _, pc := range ms.PartitionConsumers {
				if !pc.Exists || !pc.Pinned {
					t.Fatalf("partition %d: %+v", pc.Partition, pc)
				}
				if pc.Waiting < 2 {
					return false
				}
			}
		}
		return true
	})
}

// Closing the connection of the instance pinned on some partitions fails
// those partitions over to the other instance within a second, losing
// nothing and keeping per-key order.
func TestLayoutStaticFailoverOfSomePartitions(t *testing.T) {
	_, js, _, killable := layoutStatic(t, "m1")
	ctx := ctxT(t)
	l := newLedger()
	ca, killA := killable()
	a, err := ca.JoinStatic(ctx, "ORDERS", "g", "m1", l.handler("a"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	// Pins are seen on the first message under them: traffic on every
	// partition (40 keys cover the 10).
	pub := startPublisher(t, js, 40, 100000, 2*time.Millisecond)
	natstest.Eventually(t, 10*time.Second, "a pinned on every partition", func() bool { return len(a.Pins()) == 10 })
	cb, _ := killable()
	b, err := cb.JoinStatic(ctx, "ORDERS", "g", "m1", l.handler("b"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	natstest.Eventually(t, 10*time.Second, "traffic handled by a", func() bool { return l.distinct() > 50 })
	killA()
	killed := time.Now()
	natstest.Eventually(t, 10*time.Second, "b pinned on every partition", func() bool { return len(b.Pins()) == 10 })
	took := time.Since(killed)
	t.Logf("all 10 partitions failed over %v after the kill", took.Round(time.Millisecond))
	if took > time.Second {
		t.Fatalf("failover of the killed instance's partitions took %v, want under 1s", took)
	}
	time.Sleep(100 * time.Millisecond) // traffic after the failover, on purpose
	n := pub.finish()
	natstest.Eventually(t, 30*time.Second, "every message handled", func() bool { return l.distinct() == n })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("order violations: %v", l.bad)
	}
	t.Logf("%d messages, %d seen twice around the failover", n, l.dups)
}

// A step-down unpins every partition consumer of the member: each gets a
// new pin.
func TestLayoutStepDownUnpinsEveryPartition(t *testing.T) {
	c, js, fresh, _ := layoutStatic(t, "m1", "m2")
	ctx := ctxT(t)
	l := newLedger()
	a, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", l.handler("a"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", l.handler("b"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	pub := startPublisher(t, js, 40, 100000, 2*time.Millisecond)
	defer pub.finish()
	var before map[int]string
	natstest.Eventually(t, 10*time.Second, "m1's 5 partitions pinned", func() bool {
		before = pinsOf(t, a, b)
		return len(before) == 5
	})
	res, err := c.StepDown(ctx, cg.KindStatic, "ORDERS", "g", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Consumers) != 5 || res.NothingPinned {
		t.Fatalf("step-down: %+v, want 5 partition consumers unpinned", res)
	}
	natstest.Eventually(t, 10*time.Second, "every partition pinned again under a new pin", func() bool {
		now := pinsOf(t, a, b)
		if len(now) != 5 {
			return false
		}
		for p, pin := range now {
			if before[p] == pin {
				return false
			}
		}
		return true
	})
	res, err = c.StepDown(ctx, cg.KindStatic, "ORDERS", "g", "m2")
	if err != nil || !res.NothingPinned {
		t.Fatalf("step-down of a member with no instance: %+v %v", res, err)
	}
}

func TestLayoutNameUniqueAcrossLayoutsAndStoredApart(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); !errors.Is(err, cg.ErrGroupExists) || !strings.Contains(err.Error(), "partition layout") {
		t.Fatalf("member-layout create over a partition-layout name: %v", err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "h", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "h", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}, Layout: cg.LayoutPartition}); !errors.Is(err, cg.ErrGroupExists) {
		t.Fatalf("partition-layout create over a member-layout name: %v", err)
	}
	// The reference's bucket holds only h, byte for byte as before.
	kv, _ := js.KeyValue(ctx, cg.StaticBucket)
	if _, err := kv.Get(ctx, "ORDERS.g"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("partition-layout group in the reference's bucket: %v", err)
	}
	if e, _ := kv.Get(ctx, "ORDERS.h"); string(e.Value()) != `{"max_members":10,"members":["m1"]}` {
		t.Fatalf("member-layout value %s", e.Value())
	}
	pkv, _ := js.KeyValue(ctx, cg.StaticPartitionBucket)
	if e, err := pkv.Get(ctx, "ORDERS.g"); err != nil || string(e.Value()) != `{"max_members":10,"members":["m1"],"layout":"partition"}` {
		t.Fatalf("partition-layout value: %v %v", e, err)
	}
	refs, err := c.ListGroups(ctx)
	if err != nil || len(refs) != 2 || refs[0].Layout != cg.LayoutPartition || refs[1].Layout != "" {
		t.Fatalf("list: %+v %v", refs, err)
	}
	// Readers find either layout in one place.
	cfg, err := c.Config(ctx, cg.KindStatic, "ORDERS", "g")
	if err != nil || cfg.(cg.StaticConfig).LayoutOf() != cg.LayoutPartition {
		t.Fatalf("config: %+v %v", cfg, err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "big", cg.StaticConfig{MaxMembers: cg.MaxLayoutPartitions + 1, Members: []string{"m1"}, Layout: cg.LayoutPartition}); !errors.Is(err, cg.ErrLayout) {
		t.Fatalf("above the ceiling: %v", err)
	}
	res, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Config(ctx, cg.KindStatic, "ORDERS", "g"); !errors.Is(err, cg.ErrGroupNotFound) {
		t.Fatalf("after delete: %v (%+v)", err, res)
	}
}

func layoutElastic(t *testing.T, n int) (*cg.Client, jetstream.JetStream, func() *cg.Client) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: n, Layout: cg.LayoutPartition,
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	fresh := func() *cg.Client {
		cl, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		return cl
	}
	return c, js, fresh
}

// Members added and dropped while traffic flows: every message is handled,
// and no key's later message overtakes an earlier one across the moves.
func TestLayoutElasticAddDropUnderTraffic(t *testing.T) {
	c, js, fresh := layoutElastic(t, 6)
	ctx := ctxT(t)
	l := newLedger()
	var mu sync.Mutex
	handedOver := 0
	start := func(name, member string) *cg.Member {
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", member, l.handler(name), cg.JoinOptions{OnEvent: func(e cg.Event) {
			if e.Kind == cg.EventPinLost && e.Cause == cg.CauseReleasedToRebalance {
				mu.Lock()
				handedOver++
				mu.Unlock()
			}
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m
	}
	m1a, m1b := start("m1a", "m1"), start("m1b", "m1")
	m2 := start("m2", "m2")
	m3 := start("m3", "m3")
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	pub := startPublisher(t, js, 24, 100000, time.Millisecond)
	natstest.Eventually(t, 10*time.Second, "m1 pinned on its 6 partitions", func() bool { return len(pinsOf(t, m1a, m1b)) == 6 })
	natstest.Eventually(t, 10*time.Second, "traffic flows", func() bool { return l.distinct() > 100 })
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m2", "m3"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m2 and m3 pinned on theirs", func() bool {
		return len(m2.Pins()) == 2 && len(m3.Pins()) == 2 && len(pinsOf(t, m1a, m1b)) == 2
	})
	before := l.distinct()
	natstest.Eventually(t, 10*time.Second, "traffic flows after the add", func() bool { return l.distinct() > before+100 })
	if _, err := c.DropMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m2 and m3 pinned on all", func() bool {
		return len(m2.Pins()) == 3 && len(m3.Pins()) == 3 && len(pinsOf(t, m1a, m1b)) == 0
	})
	before = l.distinct()
	natstest.Eventually(t, 10*time.Second, "traffic flows after the drop", func() bool { return l.distinct() > before+100 })
	n := pub.finish()
	natstest.Eventually(t, 30*time.Second, "every message handled", func() bool { return l.distinct() == n })
	l.mu.Lock()
	bad, dups := slices.Clone(l.bad), l.dups
	l.mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("%d order violations across the moves: %v", len(bad), bad[:min(len(bad), 5)])
	}
	mu.Lock()
	t.Logf("%d messages, %d seen twice, %d pins handed over", n, dups, handedOver)
	if handedOver == 0 {
		t.Fatal("no partition was handed over by its old owner")
	}
	mu.Unlock()
	if got, want := streamConsumers(t, js, "ORDERS-g"), partitionNames("g", 6); !slices.Equal(got, want) {
		t.Fatalf("consumers on the work stream: %v, want %v", got, want)
	}
	gi, err := c.Info(ctx, cg.KindElastic, "ORDERS", "g")
	if err != nil || gi.Layout != "partition" {
		t.Fatalf("info: %v %q", err, gi.Layout)
	}
	pinned := 0
	for _, ms := range gi.Members {
		for _, pc := range ms.PartitionConsumers {
			if pc.Owner != ms.Member || !pc.Exists {
				t.Fatalf("member %s: %+v", ms.Member, pc)
			}
			if pc.Pinned {
				pinned++
			}
		}
	}
	if pinned != 6 {
		t.Fatalf("%d of 6 partition consumers pinned: %+v", pinned, gi.Members)
	}
}

// A reference-style member consumer beside a partition-layout group is
// critical; the group's own partition consumers are fine.
func TestLayoutCheckMemberConsumerIsCritical(t *testing.T) {
	c, js, fresh, _ := layoutStatic(t, "m1", "m2")
	ctx := ctxT(t)
	for _, m := range []string{"m1", "m2"} {
		inst, err := fresh().JoinStatic(ctx, "ORDERS", "g", m, func(_ context.Context, msg *cg.Msg) { _ = msg.Ack() }, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(inst.Stop)
	}
	rep, err := c.Check(ctx, cg.CheckScope{Kind: "static", Stream: "ORDERS", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status() != health.SeverityOK {
		t.Fatalf("a healthy partition-layout group: %s %+v", rep.Status(), rep.Findings)
	}
	if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "g-m1", FilterSubjects: []string{"0.>", "1.>", "2.>", "3.>", "4.>"},
		AckPolicy: jetstream.AckExplicitPolicy, PriorityGroups: []string{cg.PriorityGroup}, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: time.Second}); err != nil {
		t.Fatal(err)
	}
	rep, err = c.Check(ctx, cg.CheckScope{Kind: "static", Stream: "ORDERS", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status() != health.SeverityCritical || !hasCode(rep, cg.CodeLayoutMemberConsumer) {
		t.Fatalf("member-layout consumer g-m1 beside the partition layout: %s %+v", rep.Status(), rep.Findings)
	}
}

// Lanes (concurrency per partition consumer) and ordered batches (of one
// partition each) on the partition layout: every message once, per-key
// order kept.
func TestLayoutLanesAndBatches(t *testing.T) {
	t.Run("lanes", func(t *testing.T) {
		_, js, fresh, _ := layoutStatic(t, "m1", "m2")
		ctx := ctxT(t)
		l := newLedger()
		for _, inst := range []string{"m1", "m2"} {
			m, err := fresh().JoinStatic(ctx, "ORDERS", "g", inst, l.handler(inst), cg.JoinOptions{Concurrency: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Stop)
		}
		pub := startPublisher(t, js, 30, 300, 0)
		<-pub.done
		natstest.Eventually(t, 30*time.Second, "every message handled", func() bool { return l.distinct() == pub.n })
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.bad) > 0 || l.dups > 0 {
			t.Fatalf("order violations %v, %d duplicates", l.bad, l.dups)
		}
		cons, err := js.Consumer(ctx, "ORDERS", "g-p0")
		if err != nil || cons.CachedInfo().Config.MaxAckPending != 16 {
			t.Fatalf("partition consumer made for concurrency 4: %v %+v", err, cons)
		}
	})
	t.Run("batches", func(t *testing.T) {
		_, js, fresh, _ := layoutStatic(t, "m1")
		ctx := ctxT(t)
		l := newLedger()
		var mu sync.Mutex
		mixed := 0
		h := l.handler("m1")
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: &cg.BatchOptions{Size: 10, Handler: func(ctx context.Context, b *cg.Batch) error {
			for _, msg := range b.Msgs {
				if msg.Partition() != b.Msgs[0].Partition() {
					mu.Lock()
					mixed++
					mu.Unlock()
				}
				h(ctx, msg) // records; its ack is refused inside a batch, the batch acks
			}
			return nil
		}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		pub := startPublisher(t, js, 30, 300, 0)
		<-pub.done
		natstest.Eventually(t, 30*time.Second, "every message handled", func() bool { return l.distinct() == pub.n })
		natstest.Eventually(t, 10*time.Second, "every message acked", func() bool {
			for p := range 10 {
				cons, err := js.Consumer(ctx, "ORDERS", cg.PartitionConsumerName("g", p))
				if err != nil || cons.CachedInfo().NumAckPending+int(cons.CachedInfo().NumPending) > 0 {
					return false
				}
			}
			return true
		})
		l.mu.Lock()
		defer l.mu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		if len(l.bad) > 0 || l.dups > 0 || mixed > 0 {
			t.Fatalf("order violations %v, %d duplicates, %d messages batched with another partition's", l.bad, l.dups, mixed)
		}
	})
}

// A poison message is dead-lettered by the runtime of its partition; the
// other messages of every partition are handled once.
func TestLayoutPoisonDeadLetter(t *testing.T) {
	_, js, fresh, _ := layoutStatic(t, "m1")
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	h := l.handler("m1")
	var mu sync.Mutex
	deadLettered := 0
	m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", func(ctx context.Context, msg *cg.Msg) {
		if msg.Subject() == "orders.k03" && msg.Headers().Get("Seq") == "2" {
			_ = msg.Nak() // always fails: poison after 2 deliveries
			return
		}
		h(ctx, msg)
	}, cg.JoinOptions{Retry: &cg.RetryPolicy{MaxDeliver: 2, DeadLetter: "dlq.orders"}, OnEvent: func(e cg.Event) {
		if e.Kind == cg.EventPoison && e.Cause == cg.CauseDeadLettered {
			mu.Lock()
			deadLettered++
			mu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	pub := startPublisher(t, js, 10, 100, 0)
	<-pub.done
	natstest.Eventually(t, 30*time.Second, "every other message handled, the poison one dead-lettered", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return l.distinct() == pub.n-1 && deadLettered == 1
	})
	dlq, _ := js.Stream(ctx, "DLQ")
	if info, err := dlq.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("dead letters stored: %+v %v", info, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 || l.dups > 0 {
		t.Fatalf("order violations %v, %d duplicates", l.bad, l.dups)
	}
}

// A reset moves each partition consumer of the group: one plan entry per
// partition, and the running member handles everything from the target
// again, in per-key order.
func TestLayoutResetPerPartition(t *testing.T) {
	c, js, fresh, _ := layoutStatic(t, "m1", "m2")
	ctx := ctxT(t)
	var mu sync.Mutex
	var seqs []uint64
	h := func(_ context.Context, msg *cg.Msg) {
		if md, err := msg.Metadata(); err == nil {
			mu.Lock()
			seqs = append(seqs, md.Sequence.Stream)
			mu.Unlock()
		}
		_ = msg.Ack()
	}
	for _, member := range []string{"m1", "m2"} {
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", member, h, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	publishN(t, js, 100)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seqs)
	}
	natstest.Eventually(t, 30*time.Second, "100 handled", func() bool { return count() == 100 })
	res, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Seq: 41})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Members) != 10 {
		t.Fatalf("reset plan: %d entries, want one per partition: %+v", len(res.Members), res.Members)
	}
	var again uint64
	for _, mp := range res.Members {
		if mp.Partition == nil || mp.Consumer != cg.PartitionConsumerName("g", *mp.Partition) {
			t.Fatalf("entry %+v", mp)
		}
		again += mp.Again
	}
	if again != 60 {
		t.Fatalf("plan counts %d handled again, want 60 (41..100)", again)
	}
	natstest.Eventually(t, 30*time.Second, "41..100 handled again", func() bool { return count() == 160 })
	mu.Lock()
	defer mu.Unlock()
	replayed := slices.Clone(seqs[100:])
	slices.Sort(replayed)
	for i, s := range replayed {
		if s != uint64(41+i) {
			t.Fatalf("replayed %v, want 41..100 once each", replayed)
		}
	}
}

// A member-layout member consumer with several partitions over a backlog
// spread on many subjects is on the slow path: check warns and names the
// partition layout; the same backlog on a partition-layout group does not.
func TestLayoutCheckWarnsOfTheSlowPath(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	for _, g := range []struct {
		name   string
		layout cg.Layout
	}{{"slow", cg.LayoutMember}, {"fast", cg.LayoutPartition}} {
		if _, err := c.CreateStatic(ctx, "ORDERS", g.name, cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}, Layout: g.layout}); err != nil {
			t.Fatal(err)
		}
	}
	keys := make([]string, 1500)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	for _, k := range keys {
		if _, err := js.PublishAsync("orders."+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	// An instance that handles nothing: each consumer is made, and its
	// backlog stays.
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	for _, g := range []string{"slow", "fast"} {
		m, err := c.JoinStatic(ctx, "ORDERS", g, "m1", func(ctx context.Context, _ *cg.Msg) {
			select {
			case <-block:
			case <-ctx.Done():
			}
		}, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	slow, err := c.Check(ctx, cg.CheckScope{Kind: "static", Stream: "ORDERS", Group: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCode(slow, cg.CodeMultiFilterSlow) {
		t.Fatalf("no slow-path warning: %+v", slow.Findings)
	}
	for _, f := range slow.Findings {
		if f.Code == cg.CodeMultiFilterSlow && (f.Remedy == nil || f.Remedy.Code != health.RemedyPartitionLayout) {
			t.Fatalf("slow-path finding without the layout remedy: %+v", f)
		}
	}
	fast, err := c.Check(ctx, cg.CheckScope{Kind: "static", Stream: "ORDERS", Group: "fast"})
	if err != nil {
		t.Fatal(err)
	}
	if hasCode(fast, cg.CodeMultiFilterSlow) {
		t.Fatalf("slow-path warning on a partition-layout group: %+v", fast.Findings)
	}
}

// A message parked by one partition's runtime is released through the
// member (release names no partition): it is handled once more, by the
// runtime holding it, and its key's later messages follow it in order.
func TestLayoutParkAndRelease(t *testing.T) {
	c, js, fresh, _ := layoutStatic(t, "m1")
	ctx := ctxT(t)
	l := newLedger()
	h := l.handler("m1")
	var failing sync.Map
	failing.Store("orders.k03/2", true)
	m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", func(ctx context.Context, msg *cg.Msg) {
		if _, bad := failing.Load(msg.Subject() + "/" + msg.Headers().Get("Seq")); bad {
			_ = msg.Nak()
			return
		}
		h(ctx, msg)
	}, cg.JoinOptions{Retry: &cg.RetryPolicy{MaxDeliver: 2, OnPoison: cg.PoisonPark}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	pub := startPublisher(t, js, 10, 100, 0)
	<-pub.done
	// k03's messages after the parked one wait behind it: 10 keys of 10.
	natstest.Eventually(t, 30*time.Second, "all but k03's 9 from seq 2 handled", func() bool { return l.distinct() == pub.n-9 })
	failing.Delete("orders.k03/2")
	if _, err := c.Release(ctx, cg.KindStatic, "ORDERS", "g", "m1", cg.ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "every message handled after the release", func() bool { return l.distinct() == pub.n })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 || l.dups > 0 {
		t.Fatalf("order violations %v, %d duplicates", l.bad, l.dups)
	}
}

// Each partition of a partition-layout group runs its own handler slots
// and its own window: an instance owning all 32 partitions at
// Concurrency 1024 would hold 32768 slots. Its join is refused, naming the
// per-partition ceiling (16384/32), and no partition consumer is made.
// Thirty-two partitions reach the same totals as 256 at a quarter of the
// per-partition values, without making 256 consumers: that alone took
// over a minute on a loaded CI machine.
func TestLayoutOptionsCeilingAcrossPartitions(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ordersStream(t, js, "WIDE", 32)
	c := cg.New(js)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "WIDE", "g", cg.StaticConfig{MaxMembers: 32, Members: []string{"m1"}, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *cg.Msg) {}
	for _, o := range []cg.JoinOptions{{Concurrency: 1024}, {MaxAckPending: 4096}} {
		m, err := c.JoinStatic(ctx, "WIDE", "g", "m1", noop, o)
		var ce *cg.CeilingError
		if !errors.As(err, &ce) || !errors.Is(err, cg.ErrAboveCeiling) || ce.Ceiling != cg.MaxLayoutSlots/32 && ce.Ceiling != cg.MaxLayoutPending/32 {
			if m != nil {
				m.Stop()
			}
			t.Fatalf("join %+v: %v", o, err)
		}
	}
	if got := streamConsumers(t, js, "WIDE"); len(got) != 0 {
		t.Fatalf("refused joins left consumers %v", got)
	}
	m, err := c.JoinStatic(ctx, "WIDE", "g", "m1", noop, cg.JoinOptions{Concurrency: cg.MaxLayoutSlots / 32})
	if err != nil {
		t.Fatalf("at the ceiling: %v", err)
	}
	m.Stop()
	_ = m.Wait()
}
