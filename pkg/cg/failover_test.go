package cg_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// pinnedBy waits until one of ms holds the server's pin and returns it.
func pinnedBy(t *testing.T, ms map[string]*cg.Member) string {
	t.Helper()
	var who string
	natstest.Eventually(t, 20*time.Second, "an instance pinned", func() bool {
		for n, m := range ms {
			if m.PinID() != "" {
				who = n
				return true
			}
		}
		return false
	})
	return who
}

// A standby that joined just before the pinned instance died takes over
// at once (its liveness check runs as soon as it stands by), not after the
// pinned TTL.
func TestJustJoinedStandbyTakesOverFast(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	ncA := natstest.Connect(t, s)
	ca, _ := cg.NewFromConn(ncA, "")
	a, err := ca.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("a"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	publish(t, js, []string{"k1", "k2"}, 4)
	natstest.Eventually(t, 20*time.Second, "4 handled by a", func() bool { return cnt.get("a") == 4 && a.PinID() != "" })
	cb, _ := cg.NewFromConn(natstest.Connect(t, s), "")
	b, err := cb.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("b"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	time.Sleep(60 * time.Millisecond) // the scenario: killed 60ms after the standby joined
	ncA.Close()
	killed := time.Now()
	publish(t, js, []string{"k1", "k2"}, 4)
	natstest.Eventually(t, 10*time.Second, "b handles the rest", func() bool { return cnt.get("b") >= 1 })
	took := time.Since(killed)
	t.Logf("standby took over %v after the kill", took.Round(time.Millisecond))
	if took > time.Second {
		t.Fatalf("the just-joined standby took %v to take over, want well under the pinned TTL (2s)", took)
	}
}

// A pinned instance cut off by a network black hole (socket open, nothing
// passing) is replaced within a second, and, once the black hole lifts,
// acks nothing it held under the pin it lost.
func TestBlackholedPinnedInstanceReplacedWithinASecond(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	var evA events
	bh := natstest.NewBlackhole(t, s.Addr().String())
	ncA, err := nats.Connect(bh.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	ca, _ := cg.NewFromConn(ncA, "")
	a, err := ca.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.boundedHandler("a"), cg.JoinOptions{OnEvent: evA.on})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	publish(t, js, []string{"k1", "k2"}, 4)
	natstest.Eventually(t, 20*time.Second, "4 handled by a", func() bool { return cnt.get("a") == 4 && a.PinID() != "" })
	cb, _ := cg.NewFromConn(natstest.Connect(t, s), "")
	b, err := cb.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.boundedHandler("b"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	natstest.Eventually(t, 5*time.Second, "b stands by", func() bool { return b.Consumer() != "" })
	time.Sleep(300 * time.Millisecond) // b has checked a's liveness
	bh.Hold()
	cut := time.Now()
	publish(t, js, []string{"k1", "k2"}, 4)
	natstest.Eventually(t, 5*time.Second, "b handling", func() bool { return cnt.get("b") >= 1 })
	took := time.Since(cut)
	t.Logf("standby handling %v after the black hole", took.Round(time.Millisecond))
	if took > time.Second {
		t.Fatalf("the standby took %v to take over from a black-holed instance, want under 1s", took)
	}
	natstest.Eventually(t, 10*time.Second, "b handles the new messages", func() bool { return cnt.get("b") >= 4 })
	natstest.Eventually(t, 5*time.Second, "a fenced itself", func() bool { return evA.has(cg.EventFenced, "") })
	bh.Release()
	publish(t, js, []string{"k1", "k2"}, 4)
	natstest.Eventually(t, 10*time.Second, "all 12 handled", func() bool { return cnt.distinct() == 12 })
	// Nothing reached a after the cut but what the link held under the pin
	// it fenced off from, which must be handed back, not handled.
	if cnt.get("a") != 4 {
		t.Fatalf("a handled %d messages after the black hole under its old pin", cnt.get("a")-4)
	}
}

// The fence threshold derives from the liveness interval: one too short to
// fence safely on is refused, with what to use.
func TestTooShortLivenessIntervalRefused(t *testing.T) {
	_, c, _ := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	_, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", newCounter().handler("a"), cg.JoinOptions{LivenessInterval: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "liveness check interval 10ms is too short: use 50ms or more") {
		t.Fatalf("join with a 10ms liveness interval: %v", err)
	}
}

// boundedHandler is counter.handler with acks that give up after 2s (a
// black-holed instance's ack gets no answer until the hole lifts).
func (c *counter) boundedHandler(name string) cg.Handler {
	return func(_ context.Context, m *cg.Msg) {
		md, _ := m.Metadata()
		c.mu.Lock()
		c.by[name]++
		if md != nil {
			c.seqs[md.Sequence.Stream]++
		}
		c.mu.Unlock()
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.DoubleAck(actx)
	}
}

// A consumer's new leader names no pin (the server does not replicate
// pins) and delivers nothing while a serial member's one-message window is
// full. A pinned instance that fenced itself while the leadership changed
// (cut off for a moment), and then finished the message in hand, settles it
// when the server names no pin: left unsettled, it held every key of the
// member until the ack wait ran out.
func TestFencedInstanceSettlesUnderNewConsumerLeader(t *testing.T) {
	cl := natstest.RunCluster(t, 3)
	nc, err := nats.Connect(cl.URLs(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, _ := jetstream.New(nc)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, Replicas: 3,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}

	opts := cg.JoinOptions{AckWait: 30 * time.Second}
	// The member consumer made first, so that a's server is not the one
	// leading it, which is shut down below.
	first, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(context.Context, *cg.Msg) {}, opts)
	if err != nil {
		t.Fatal(err)
	}
	first.Stop()
	leader := func() string {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		cons, err := js.Consumer(cctx, "ORDERS", "g-m1")
		if err != nil || cons.CachedInfo().Cluster == nil {
			return ""
		}
		return cons.CachedInfo().Cluster.Leader
	}
	var old string
	natstest.Eventually(t, 20*time.Second, "the consumer's leader", func() bool { old = leader(); return old != "" })
	lead, other := -1, -1
	for i, s := range cl.Servers {
		if s.Name() == old {
			lead = i
		} else if other < 0 {
			other = i
		}
	}
	if lead < 0 {
		t.Fatalf("consumer leader %q is none of the cluster's servers", old)
	}

	var evA events
	bh := natstest.NewBlackhole(t, cl.Servers[other].Addr().String())
	ncA, err := nats.Connect(bh.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncA.Close)
	ca, _ := cg.NewFromConn(ncA, "")
	var (
		mu      sync.Mutex
		handled = map[uint64]int{}
		ackErr  = map[uint64]error{}
	)
	inHand, release := make(chan uint64, 1), make(chan struct{})
	const heldSeq = 5
	a, err := ca.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, m *cg.Msg) {
		md, _ := m.Metadata()
		mu.Lock()
		handled[md.Sequence.Stream]++
		mu.Unlock()
		if md.Sequence.Stream == heldSeq {
			inHand <- heldSeq
			<-release
		}
		actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := m.DoubleAck(actx)
		mu.Lock()
		ackErr[md.Sequence.Stream] = err
		mu.Unlock()
	}, cg.JoinOptions{AckWait: opts.AckWait, OnEvent: evA.on})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	// Before the stop, which waits for the handler: a test that fails
	// early lets the held message go.
	var once sync.Once
	letGo := func() { once.Do(func() { close(release) }) }
	defer letGo()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(handled)
	}
	publish(t, js, []string{"k1", "k2"}, heldSeq)
	natstest.Eventually(t, 20*time.Second, "the message to hold in hand", func() bool { return len(inHand) == 1 })

	// Cut off long enough to fence (300ms); meanwhile the consumer's
	// leadership moves.
	bh.Hold()
	natstest.Eventually(t, 10*time.Second, "a fenced itself, unable to confirm its pin", func() bool {
		evA.mu.Lock()
		defer evA.mu.Unlock()
		for _, ev := range evA.all {
			if ev.Kind == cg.EventFenced && ev.Cause == cg.CausePinUnconfirmed {
				return true
			}
		}
		return false
	})
	// The node leading the consumer shuts down: the new leader knows no
	// pin.
	cl.Servers[lead].Shutdown()
	cl.Servers[lead].WaitForShutdown()
	natstest.Eventually(t, 30*time.Second, "a new consumer leader", func() bool {
		l := leader()
		return l != "" && l != old
	})
	bh.Release()
	letGo()
	publish(t, js, []string{"k1", "k2"}, 4)
	// The ack wait is 30s: within 15s means the held message was settled.
	natstest.Eventually(t, 15*time.Second, "every message handled", func() bool { return count() == heldSeq+4 })
	mu.Lock()
	defer mu.Unlock()
	if err := ackErr[heldSeq]; err != nil {
		t.Errorf("the message held in hand across the leader change was not settled: %v", err)
	}
	for seq, n := range handled {
		if n != 1 {
			t.Errorf("stream sequence %d handled %d times", seq, n)
		}
	}
}
