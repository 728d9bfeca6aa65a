package cg_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// laneStream is a stream whose partitions hash only the second token of
// orders.<key>.<event>: orders.k1.created and orders.k1.paid are one key.
func laneStream(t testing.TB, js jetstream.JetStream, n int) {
	t.Helper()
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*.*",
			Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}", n)},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func laneSetup(t *testing.T, members ...string) (*cg.Client, jetstream.JetStream, func() *cg.Client) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	laneStream(t, js, 8)
	c := cg.New(js)
	if _, err := c.CreateStatic(context.Background(), "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: members}); err != nil {
		t.Fatal(err)
	}
	fresh := func() *cg.Client {
		c, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		return c
	}
	return c, js, fresh
}

// publishKeyed publishes n messages over keys, each with a Key and a
// per-key Seq header, on subjects whose last token varies within a key.
func publishKeyed(t testing.TB, js jetstream.JetStream, keys []string, n int) {
	t.Helper()
	publishKeyedFrom(t, js, keys, n, map[string]int{})
}

// publishKeyedFrom is publishKeyed carrying on the per-key sequences in seq.
func publishKeyedFrom(t testing.TB, js jetstream.JetStream, keys []string, n int, seq map[string]int) {
	t.Helper()
	for i := 0; i < n; i++ {
		key := keys[i%len(keys)]
		seq[key]++
		msg := nats.NewMsg(fmt.Sprintf("orders.%s.e%d", key, seq[key]%3))
		msg.Header.Set("Key", key)
		msg.Header.Set("Seq", strconv.Itoa(seq[key]))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			// Below the client's cap of outstanding async publishes.
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("publish did not complete")
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publish did not complete")
	}
}

func keyNames(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("k%03d", i)
	}
	return ks
}

// tracker checks per-key order and counts concurrency: calls in flight at
// once overall, and per key (which must never exceed 1 under OrderKey).
type tracker struct {
	mu         sync.Mutex
	last       map[string]int
	times      map[string]int // key/seq -> times handled and acked
	bad        []string
	dups       int
	handled    int
	inFlight   int
	maxFlight  int
	perKey     map[string]int
	maxPerKey  int
	perPart    map[int]int
	maxPerPart int
	log        []string // key/seq in the order handled
	// recordAll counts a message handled even when its ack failed: a
	// connection closed under it may have let the ack through.
	recordAll bool
}

func newTracker() *tracker {
	return &tracker{last: map[string]int{}, times: map[string]int{}, perKey: map[string]int{}, perPart: map[int]int{}}
}

// handler records each message, sleeps d, and acks unless decide says
// otherwise (decide returns false: it settled the message itself).
func (tr *tracker) handler(who string, d time.Duration, decide func(m *cg.Msg, key string, seq int) bool) cg.Handler {
	return func(_ context.Context, m *cg.Msg) {
		key := m.Headers().Get("Key")
		seq, _ := strconv.Atoi(m.Headers().Get("Seq"))
		tr.mu.Lock()
		tr.inFlight++
		tr.maxFlight = max(tr.maxFlight, tr.inFlight)
		tr.perKey[key]++
		tr.maxPerKey = max(tr.maxPerKey, tr.perKey[key])
		tr.perPart[m.Partition()]++
		tr.maxPerPart = max(tr.maxPerPart, tr.perPart[m.Partition()])
		tr.mu.Unlock()
		if d > 0 {
			time.Sleep(d)
		}
		ok := decide == nil || decide(m, key, seq)
		var ackErr error
		if ok {
			ackErr = m.DoubleAck(context.Background())
		}
		tr.mu.Lock()
		tr.inFlight--
		tr.perKey[key]--
		tr.perPart[m.Partition()]--
		if ok && (ackErr == nil || tr.recordAll) {
			id := fmt.Sprintf("%s/%d", key, seq)
			tr.times[id]++
			tr.log = append(tr.log, id)
			switch {
			case tr.times[id] > 1:
				tr.dups++
			case ackErr != nil:
				// Handled, its ack failed (a closed connection): not
				// settled, so not in the settled order checked below.
			case seq < tr.last[key]:
				tr.bad = append(tr.bad, fmt.Sprintf("%s: key %s seq %d after %d", who, key, seq, tr.last[key]))
			default:
				tr.last[key] = seq
			}
			tr.handled++
		}
		tr.mu.Unlock()
	}
}

func (tr *tracker) distinct() int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.times)
}

func (tr *tracker) check(t *testing.T, want int, dupsOK bool) {
	t.Helper()
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.bad) > 0 {
		t.Errorf("%d per-key order violations, first: %v", len(tr.bad), tr.bad[:min(5, len(tr.bad))])
	}
	if len(tr.times) != want {
		t.Errorf("handled %d distinct messages, want %d", len(tr.times), want)
	}
	if !dupsOK && tr.dups > 0 {
		t.Errorf("%d messages handled twice with no failure", tr.dups)
	}
}

func TestLanesKeepPerKeyOrder(t *testing.T) {
	for _, conc := range []int{8, 32} {
		t.Run(strconv.Itoa(conc), func(t *testing.T) {
			c, js, _ := laneSetup(t, "m1")
			ctx := ctxT(t)
			const n = 1500
			publishKeyed(t, js, keyNames(100), n)
			tr := newTracker()
			// Uneven handler times, so that lanes finish out of step.
			h := tr.handler("m1", 0, func(_ *cg.Msg, _ string, seq int) bool {
				time.Sleep(time.Duration(seq%4) * time.Millisecond)
				return true
			})
			m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			natstest.Eventually(t, 60*time.Second, "all handled", func() bool { return tr.distinct() == n })
			tr.check(t, n, false)
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.maxPerKey != 1 {
				t.Errorf("a key had %d calls in flight at once", tr.maxPerKey)
			}
			if tr.maxFlight < 4 {
				t.Errorf("at most %d calls in flight with concurrency %d", tr.maxFlight, conc)
			}
		})
	}
}

// 8 keys and a 20ms handler: 8 lanes run them side by side.
func TestLanesRunKeysInParallel(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	publishKeyed(t, js, keyNames(8), 80)
	tr := newTracker()
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", tr.handler("m1", 20*time.Millisecond, nil), cg.JoinOptions{Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 30*time.Second, "all handled", func() bool { return tr.distinct() == 80 })
	tr.check(t, 80, false)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.maxFlight < 4 {
		t.Errorf("8 keys on 8 lanes: at most %d calls in flight, want 4 or more", tr.maxFlight)
	}
	if tr.maxPerKey != 1 {
		t.Errorf("a key had %d calls in flight at once", tr.maxPerKey)
	}
}

// A nak'd message holds its key: the key's later messages wait for its
// redelivery, other keys go on meanwhile.
func TestLanesNakHoldsKey(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	publishKeyed(t, js, []string{"a", "b"}, 40) // a/1..20, b/1..20, interleaved
	tr := newTracker()
	var once sync.Once
	heldAt := make(chan struct{})
	h := tr.handler("m1", 0, func(m *cg.Msg, key string, seq int) bool {
		if key == "a" && seq == 1 {
			md, _ := m.Metadata()
			if md.NumDelivered == 1 {
				once.Do(func() { close(heldAt) })
				// A delayed nak: the redelivery comes in 400ms.
				_ = m.NakWithDelay(400 * time.Millisecond)
				return false
			}
		}
		return true
	})
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{Concurrency: 8, AckWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	<-heldAt
	natstest.Eventually(t, 30*time.Second, "all handled", func() bool { return tr.distinct() == 40 })
	tr.check(t, 40, false)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	pos := map[string]int{}
	for i, id := range tr.log {
		pos[id] = i
	}
	if pos["a/1"] > pos["a/2"] {
		t.Errorf("a/2 handled before the redelivery of a/1: %v", tr.log)
	}
	if pos["b/20"] > pos["a/1"] {
		t.Errorf("key b waited for key a's redelivery: b/20 at %d, a/1 at %d", pos["b/20"], pos["a/1"])
	}
}

func TestLanesMaxAckPendingRules(t *testing.T) {
	c, js, _ := laneSetup(t, "m1", "m2")
	ctx := ctxT(t)
	noop := func(_ context.Context, m *cg.Msg) { _ = m.Ack() }

	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", noop, cg.JoinOptions{Concurrency: 8})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, "ORDERS", cg.StaticConsumerName("g", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.CachedInfo().Config.MaxAckPending; got != 32 {
		t.Errorf("concurrency 8, no max ack pending: consumer has %d, want 32", got)
	}
	m.Stop()

	_, err = c.JoinStatic(ctx, "ORDERS", "g", "m2", noop, cg.JoinOptions{Concurrency: 8, MaxAckPending: 4})
	if err == nil || !strings.Contains(err.Error(), "max ack pending 4 is below concurrency 8") {
		t.Fatalf("max ack pending below concurrency: %v", err)
	}
	if _, err := js.Consumer(ctx, "ORDERS", cg.StaticConsumerName("g", "m2")); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Fatalf("a refused join left a consumer behind: %v", err)
	}
	if _, err := c.JoinStatic(ctx, "ORDERS", "g", "m2", noop, cg.JoinOptions{Concurrency: -1}); err == nil {
		t.Fatal("negative concurrency accepted")
	}
	if _, err := c.JoinStatic(ctx, "ORDERS", "g", "m2", noop, cg.JoinOptions{Order: "random"}); err == nil {
		t.Fatal("unknown order accepted")
	}

	// A serial instance made m2's consumer (max ack pending 1): a
	// concurrent one refuses it rather than run serially.
	serial, err := c.JoinStatic(ctx, "ORDERS", "g", "m2", noop, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer serial.Stop()
	_, err = c.JoinStatic(ctx, "ORDERS", "g", "m2", noop, cg.JoinOptions{Concurrency: 4})
	if !errors.Is(err, cg.ErrConsumerConflict) || !strings.Contains(err.Error(), "max ack pending") {
		t.Fatalf("existing consumer with max ack pending 1, concurrency 4: %v", err)
	}
	// Explicit and enough: joins.
	ok, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", noop, cg.JoinOptions{Concurrency: 8, MaxAckPending: 8})
	if err != nil {
		t.Fatalf("existing consumer with max ack pending 32, concurrency 8: %v", err)
	}
	ok.Stop()
}

// order=partition: one call per partition at once; order=none: one key's
// messages at once.
func TestLanesOrderPartitionAndNone(t *testing.T) {
	t.Run("partition", func(t *testing.T) {
		c, js, _ := laneSetup(t, "m1")
		ctx := ctxT(t)
		publishKeyed(t, js, keyNames(64), 320)
		tr := newTracker()
		m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", tr.handler("m1", 5*time.Millisecond, nil), cg.JoinOptions{Concurrency: 16, Order: cg.OrderPartition})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		natstest.Eventually(t, 30*time.Second, "all handled", func() bool { return tr.distinct() == 320 })
		tr.check(t, 320, false)
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.maxPerPart != 1 {
			t.Errorf("a partition had %d calls in flight at once", tr.maxPerPart)
		}
		if tr.maxFlight < 3 {
			t.Errorf("8 partitions: at most %d calls in flight", tr.maxFlight)
		}
	})
	t.Run("none", func(t *testing.T) {
		c, js, _ := laneSetup(t, "m1")
		ctx := ctxT(t)
		publishKeyed(t, js, []string{"hot"}, 64)
		tr := newTracker()
		m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", tr.handler("m1", 20*time.Millisecond, nil), cg.JoinOptions{Concurrency: 8, Order: cg.OrderNone})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		natstest.Eventually(t, 30*time.Second, "all handled", func() bool { tr.mu.Lock(); defer tr.mu.Unlock(); return len(tr.times) == 64 })
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if tr.maxPerKey < 4 {
			t.Errorf("order none: at most %d calls of one key at once", tr.maxPerKey)
		}
		if tr.dups > 0 {
			t.Errorf("%d handled twice", tr.dups)
		}
	})
}

// A graceful stop under concurrency: the standby gets what was queued,
// nothing is lost or handled twice, per-key order holds across.
func TestLanesGracefulStopToStandby(t *testing.T) {
	_, js, fresh := laneSetup(t, "m1")
	ctx := ctxT(t)
	const n = 1200
	publishKeyed(t, js, keyNames(40), n)
	tr := newTracker()
	ms := map[string]*cg.Member{}
	for _, name := range []string{"a", "b"} {
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", tr.handler(name, 2*time.Millisecond, nil), cg.JoinOptions{Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		ms[name] = m
		t.Cleanup(m.Stop)
	}
	natstest.Eventually(t, 20*time.Second, "some handled", func() bool { return tr.distinct() > 200 })
	first := pinnedBy(t, ms)
	ms[first].Stop()
	natstest.Eventually(t, 60*time.Second, "all handled", func() bool { return tr.distinct() == n })
	tr.check(t, n, false)
}

// The pinned instance's connection dies under concurrency with many
// messages queued in it, and the consumer has room for new ones: the
// standby must not handle those new ones before the dead instance's
// unacked messages of the same keys (which the server would redeliver only
// after the ack wait). A message the dead instance handled but could not
// ack may be handled again.
func TestLanesFailoverKill(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	laneStream(t, js, 8)
	c := cg.New(js)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	keys, seq := keyNames(16), map[string]int{}
	publishKeyedFrom(t, js, keys, 1000, seq)
	tr := newTracker()
	tr.recordAll = true
	ms := map[string]*cg.Member{}
	conns := map[string]*nats.Conn{}
	for _, name := range []string{"a", "b"} {
		nc := natstest.Connect(t, s)
		mc, _ := cg.NewFromConn(nc, "")
		m, err := mc.JoinStatic(ctx, "ORDERS", "g", "m1", tr.handler(name, 3*time.Millisecond, nil),
			cg.JoinOptions{Concurrency: 8, MaxAckPending: 2000, AckWait: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ms[name], conns[name] = m, nc
		t.Cleanup(m.Stop)
	}
	natstest.Eventually(t, 20*time.Second, "some handled", func() bool { return tr.distinct() > 100 })
	conns[pinnedBy(t, ms)].Close()
	publishKeyedFrom(t, js, keys, 300, seq)
	natstest.Eventually(t, 30*time.Second, "all handled", func() bool { return tr.distinct() == 1300 })
	tr.check(t, 1300, true)
}

// An elastic member added while messages flow takes partitions from a
// concurrent one: per-key order holds throughout.
func TestLanesElasticRebalance(t *testing.T) {
	c, js, fresh := elasticSetup(t, 6)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	join := func(member string) {
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", member, l.handler(member), cg.JoinOptions{Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	join("m1")
	pub := startPublisher(t, js, 24, 3000, 500*time.Microsecond)
	natstest.Eventually(t, 20*time.Second, "m1 handles", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.byWho["m1"] > 100 })
	join("m2")
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m2"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, "m2 handles", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return l.byWho["m2"] > 50 })
	sent := pub.finish()
	natstest.Eventually(t, 60*time.Second, "all handled", func() bool { return l.distinct() == sent })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Errorf("%d per-key order violations across the rebalance, first: %v", len(l.bad), l.bad[:min(5, len(l.bad))])
	}
}

// Messages waiting in a lane longer than the ack wait are kept alive: none
// is redelivered behind the member's back.
func TestLanesKeepQueuedAlive(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	publishKeyed(t, js, []string{"a", "b"}, 24) // 12 per key, 100ms each: 1.2s per key
	tr := newTracker()
	var mu sync.Mutex
	redelivered := 0
	h := tr.handler("m1", 100*time.Millisecond, func(m *cg.Msg, _ string, _ int) bool {
		if md, _ := m.Metadata(); md.NumDelivered > 1 {
			mu.Lock()
			redelivered++
			mu.Unlock()
		}
		return true
	})
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{Concurrency: 2, MaxAckPending: 24, AckWait: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 30*time.Second, "all handled", func() bool { return tr.distinct() == 24 })
	tr.check(t, 24, false)
	mu.Lock()
	defer mu.Unlock()
	if redelivered > 0 {
		t.Errorf("%d queued messages were redelivered while they waited", redelivered)
	}
}

// An elastic member consumer made by a serial instance (max ack pending
// 1) is refused by a concurrent one, at join.
func TestLanesElasticRefusesSerialConsumer(t *testing.T) {
	c, js, fresh := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	noop := func(_ context.Context, m *cg.Msg) { _ = m.Ack() }
	serial, err := fresh().JoinElastic(ctx, "ORDERS", "g", "m1", noop, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer serial.Stop()
	natstest.Eventually(t, 10*time.Second, "member consumer made", func() bool {
		_, err := js.Consumer(ctx, "ORDERS-g", "m1")
		return err == nil
	})
	_, err = fresh().JoinElastic(ctx, "ORDERS", "g", "m1", noop, cg.JoinOptions{Concurrency: 4})
	if !errors.Is(err, cg.ErrConsumerConflict) || !strings.Contains(err.Error(), "max ack pending") {
		t.Fatalf("concurrent join of a serial elastic consumer: %v", err)
	}
}
