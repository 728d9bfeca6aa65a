package cg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// batchCall is one handler call as the test saw it.
type batchCall struct {
	who       string
	number    uint64
	attempt   int
	seqs      []uint64
	delivered []uint64
}

// batchRec records every batch call and every acked batch, per instance.
type batchRec struct {
	mu    sync.Mutex
	calls []batchCall
	acked map[string][]uint64 // who -> stream sequences acked, in ack order
	times map[uint64]int      // stream sequence -> batches acked holding it
}

func newBatchRec() *batchRec {
	return &batchRec{acked: map[string][]uint64{}, times: map[uint64]int{}}
}

// options makes batch options for instance who: the handler records the
// call, then fail decides whether it fails (nil: never).
func (r *batchRec) options(who string, size int, work func(ctx context.Context, b *cg.Batch) error) *cg.BatchOptions {
	return &cg.BatchOptions{
		Size: size, Wait: 50 * time.Millisecond, Backoff: []time.Duration{20 * time.Millisecond},
		Handler: func(ctx context.Context, b *cg.Batch) error {
			c := batchCall{who: who, number: b.Number, attempt: b.Attempt}
			for _, m := range b.Msgs {
				md, err := m.Metadata()
				if err != nil {
					return err
				}
				c.seqs = append(c.seqs, md.Sequence.Stream)
				c.delivered = append(c.delivered, md.NumDelivered)
			}
			r.mu.Lock()
			r.calls = append(r.calls, c)
			r.mu.Unlock()
			if work != nil {
				return work(ctx, b)
			}
			return nil
		},
		OnBatch: func(e cg.BatchEvent) {
			if !e.Acked {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			for _, c := range slices.Backward(r.calls) {
				if c.who == who && c.number == e.Number {
					r.acked[who] = append(r.acked[who], c.seqs...)
					for _, s := range c.seqs {
						r.times[s]++
					}
					break
				}
			}
		},
	}
}

func (r *batchRec) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.times)
}

// increasing reports where seqs is not strictly increasing.
func increasing(seqs []uint64) error {
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			return fmt.Errorf("sequence %d after %d (position %d)", seqs[i], seqs[i-1], i)
		}
	}
	return nil
}

// No later batch reaches the handler before an earlier one succeeded, and a
// retry is the same batch in the same order; static and elastic.
func TestBatchRetryKeepsOrder(t *testing.T) {
	for _, kind := range []cg.Kind{cg.KindStatic, cg.KindElastic} {
		t.Run(string(kind), func(t *testing.T) {
			ctx := ctxT(t)
			var c *cg.Client
			var js jetstream.JetStream
			var publish func(n int)
			if kind == cg.KindStatic {
				c, js, _ = laneSetup(t, "m1")
				publish = func(n int) { publishKeyed(t, js, keyNames(16), n) }
			} else {
				c, js, _ = elasticSetup(t, 4)
				if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
					t.Fatal(err)
				}
				publish = func(n int) {
					for i := range n {
						if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%d", i%16), nil); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			r := newBatchRec()
			failed := map[uint64]bool{}
			bo := r.options("a", 20, func(_ context.Context, b *cg.Batch) error {
				if b.Number%3 == 0 && b.Attempt == 1 {
					failed[b.Number] = true // the handler's calls are serial
					return errors.New("sink down")
				}
				return nil
			})
			m, err := c.Join(ctx, kind, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: bo})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Stop)
			const n = 300
			publish(n)
			natstest.Eventually(t, 30*time.Second, "all acked", func() bool { return r.distinct() == n })
			m.Stop()
			r.mu.Lock()
			defer r.mu.Unlock()
			if err := increasing(r.acked["a"]); err != nil {
				t.Errorf("acked batches out of stream order: %v", err)
			}
			if len(r.acked["a"]) != n {
				t.Errorf("acked %d messages, want %d exactly once", len(r.acked["a"]), n)
			}
			// Calls: every failed first attempt is followed at once by the
			// same batch, same sequences, attempt 2; numbers go up by one.
			retries := 0
			for i, call := range r.calls {
				if len(call.seqs) > 20 {
					t.Errorf("batch %d has %d messages, above 20", call.number, len(call.seqs))
				}
				if i == 0 {
					continue
				}
				prev := r.calls[i-1]
				if prev.attempt == 1 && failed[prev.number] {
					retries++
					if call.number != prev.number || call.attempt != 2 || !slices.Equal(call.seqs, prev.seqs) {
						t.Errorf("after failed batch %d %v came batch %d attempt %d %v, want the same batch again", prev.number, prev.seqs, call.number, call.attempt, call.seqs)
					}
				} else if call.number != prev.number+1 || call.attempt != 1 {
					t.Errorf("batch %d attempt %d followed batch %d attempt %d", call.number, call.attempt, prev.number, prev.attempt)
				}
			}
			if retries == 0 {
				t.Error("no batch was retried: the test did not exercise a failure")
			}
		})
	}
}

// A batch whose handler takes longer than the ack wait is kept alive: no
// message of it (or queued behind it) is redelivered meanwhile.
func TestBatchOutlivesAckWait(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	r := newBatchRec()
	bo := r.options("a", 5, func(ctx context.Context, b *cg.Batch) error {
		if b.Number == 1 {
			select {
			case <-time.After(2500 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: bo, AckWait: time.Second, MaxAckPending: 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	publishKeyed(t, js, keyNames(4), 12)
	natstest.Eventually(t, 30*time.Second, "all acked", func() bool { return r.distinct() == 12 })
	m.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, call := range r.calls {
		if call.attempt != 1 {
			t.Errorf("batch %d retried (attempt %d)", call.number, call.attempt)
		}
		for i, d := range call.delivered {
			if d != 1 {
				t.Errorf("stream sequence %d of batch %d was delivered %d times: redelivered while the batch was worked", call.seqs[i], call.number, d)
			}
		}
	}
	for s, n := range r.times {
		if n != 1 {
			t.Errorf("stream sequence %d acked in %d batches", s, n)
		}
	}
}

// A backlog fills batches: 1000 messages at N=50 give batches of about 50.
func TestBatchFillsFromBacklog(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	publishKeyed(t, js, keyNames(32), 1000)
	r := newBatchRec()
	bo := r.options("a", 50, nil)
	bo.Wait = time.Second // an upper bound: a backlog fills a batch long before
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: bo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	natstest.Eventually(t, 30*time.Second, "all acked", func() bool { return r.distinct() == 1000 })
	m.Stop()
	r.mu.Lock()
	defer r.mu.Unlock()
	biggest := 0
	for _, call := range r.calls {
		biggest = max(biggest, len(call.seqs))
	}
	avg := 1000.0 / float64(len(r.calls))
	t.Logf("%d batches, average %.1f, biggest %d", len(r.calls), avg, biggest)
	if avg < 40 || biggest > 50 {
		t.Errorf("%d batches for 1000 messages (average %.1f, biggest %d): want about 50 each, none above 50", len(r.calls), avg, biggest)
	}
	if err := increasing(r.acked["a"]); err != nil || len(r.acked["a"]) != 1000 {
		t.Errorf("acked %d messages, order: %v", len(r.acked["a"]), err)
	}
}

// The pinned instance dies mid-batch (its connection closed while the
// handler holds the batch): the standby gets that whole batch again, in
// order, and everything after it; nothing is lost and at most that one
// batch is seen twice.
func TestBatchPinLossMidBatch(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	laneStream(t, js, 8)
	ctx := ctxT(t)
	if _, err := cg.New(js).CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	const n, size = 100, 10
	publishKeyed(t, js, keyNames(8), n)
	r := newBatchRec()
	held := make(chan []uint64, 1)
	unblock := make(chan struct{})
	join := func(who string, work func(context.Context, *cg.Batch) error) (*cg.Member, *nats.Conn) {
		nc := natstest.Connect(t, s)
		mc, _ := cg.NewFromConn(nc, "")
		m, err := mc.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: r.options(who, size, work), AckWait: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m, nc
	}
	_, nca := join("a", func(ctx context.Context, b *cg.Batch) error {
		if b.Number == 3 {
			var seqs []uint64
			for _, m := range b.Msgs {
				md, _ := m.Metadata()
				seqs = append(seqs, md.Sequence.Stream)
			}
			held <- seqs
			select { // the external write "happened"; the process dies before the acks
			case <-unblock:
			case <-ctx.Done():
			}
			return errors.New("dead")
		}
		return nil
	})
	var inHand []uint64
	select {
	case inHand = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("instance a never reached batch 3")
	}
	join("b", nil)
	nca.Close()
	natstest.Eventually(t, 30*time.Second, "all acked", func() bool { return r.distinct() == n })
	close(unblock)
	r.mu.Lock()
	defer r.mu.Unlock()
	var firstB *batchCall
	for i := range r.calls {
		if r.calls[i].who == "b" {
			firstB = &r.calls[i]
			break
		}
	}
	if firstB == nil || !slices.Equal(firstB.seqs, inHand) {
		t.Errorf("standby's first batch %v, want the batch in hand at the crash %v", firstB, inHand)
	}
	if err := increasing(r.acked["b"]); err != nil {
		t.Errorf("standby acked out of order: %v", err)
	}
	all := append(slices.Clone(r.acked["a"]), r.acked["b"]...)
	if err := increasing(all); err != nil {
		t.Errorf("a then b acked out of order: %v", err)
	}
	dups := 0
	for _, k := range r.times {
		dups += k - 1
	}
	if len(r.times) != n || dups > size {
		t.Errorf("%d distinct acked of %d, %d duplicates (at most one batch, %d, allowed)", len(r.times), n, dups, size)
	}
}

// Bad batch options are refused before anything is joined: no consumer.
func TestBatchOptionsRefused(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	h := func(context.Context, *cg.Batch) error { return nil }
	for _, tc := range []struct {
		name string
		msgH cg.Handler
		opts cg.JoinOptions
	}{
		{"size 0", nil, cg.JoinOptions{Batch: &cg.BatchOptions{Handler: h}}},
		{"negative wait", nil, cg.JoinOptions{Batch: &cg.BatchOptions{Size: 5, Wait: -time.Second, Handler: h}}},
		{"no batch handler", nil, cg.JoinOptions{Batch: &cg.BatchOptions{Size: 5}}},
		{"both handlers", func(context.Context, *cg.Msg) {}, cg.JoinOptions{Batch: &cg.BatchOptions{Size: 5, Handler: h}}},
		{"max ack pending below size", nil, cg.JoinOptions{MaxAckPending: 4, Batch: &cg.BatchOptions{Size: 5, Handler: h}}},
		{"with concurrency", nil, cg.JoinOptions{Concurrency: 4, Batch: &cg.BatchOptions{Size: 5, Handler: h}}},
	} {
		_, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", tc.msgH, tc.opts)
		if !errors.Is(err, cg.ErrInvalidBatch) {
			t.Errorf("%s: got %v, want ErrInvalidBatch", tc.name, err)
		}
	}
	if _, err := js.Consumer(ctx, "ORDERS", cg.StaticConsumerName("g", "m1")); !errors.Is(err, jetstream.ErrConsumerNotFound) {
		t.Errorf("a consumer was created by a refused join: %v", err)
	}
}

// After MaxAttempts the instance stops with ErrBatchFailed and hands the
// batch, unacked and in order, to the standby.
func TestBatchGivesUpToStandby(t *testing.T) {
	c, js, fresh := laneSetup(t, "m1")
	ctx := ctxT(t)
	publishKeyed(t, js, keyNames(4), 30)
	r := newBatchRec()
	boA := r.options("a", 10, func(context.Context, *cg.Batch) error { return errors.New("sink down") })
	boA.MaxAttempts = 3
	a, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: boA})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	natstest.Eventually(t, 30*time.Second, "a's first call", func() bool { r.mu.Lock(); defer r.mu.Unlock(); return len(r.calls) > 0 })
	b, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: r.options("b", 10, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	select {
	case <-a.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("a did not give up")
	}
	if !errors.Is(a.Err(), cg.ErrBatchFailed) || a.StopCause() != cg.CauseBatchFailed {
		t.Fatalf("a stopped with %v (%s), want ErrBatchFailed", a.Err(), a.StopCause())
	}
	natstest.Eventually(t, 30*time.Second, "b acked all", func() bool { return r.distinct() == 30 })
	r.mu.Lock()
	defer r.mu.Unlock()
	var aSeqs []uint64
	attempts := 0
	for _, call := range r.calls {
		if call.who == "a" {
			attempts++
			if aSeqs == nil {
				aSeqs = call.seqs
			} else if !slices.Equal(aSeqs, call.seqs) {
				t.Errorf("a's attempt %d had %v, want %v", call.attempt, call.seqs, aSeqs)
			}
		}
	}
	if attempts != 3 {
		t.Errorf("a made %d calls, want 3 (MaxAttempts)", attempts)
	}
	if len(r.acked["b"]) != 30 || !slices.Equal(r.acked["b"][:len(aSeqs)], aSeqs) {
		t.Errorf("b acked %v, want a's failed batch %v first and 30 in all", r.acked["b"], aSeqs)
	}
	if err := increasing(r.acked["b"]); err != nil {
		t.Errorf("b acked out of order: %v", err)
	}
}

// A graceful stop mid-batch (handler honours ctx) hands the batch back
// unacked, then what was queued behind it, in order: the standby's first
// batch is the abandoned one and it acks everything in stream order.
func TestBatchStopHandsBackInOrder(t *testing.T) {
	c, js, fresh := laneSetup(t, "m1")
	ctx := ctxT(t)
	const n, size = 90, 10
	publishKeyed(t, js, keyNames(8), n)
	r := newBatchRec()
	held := make(chan []uint64, 1)
	a, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{MaxAckPending: 3 * size, Batch: r.options("a", size, func(ctx context.Context, b *cg.Batch) error {
		if b.Number == 2 {
			var seqs []uint64
			for _, m := range b.Msgs {
				md, _ := m.Metadata()
				seqs = append(seqs, md.Sequence.Stream)
			}
			held <- seqs
			<-ctx.Done() // the stop cancels the call
			return ctx.Err()
		}
		return nil
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	var inHand []uint64
	select {
	case inHand = <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("instance a never reached batch 2")
	}
	b, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{MaxAckPending: 3 * size, Batch: r.options("b", size, nil)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	a.Stop()
	natstest.Eventually(t, 30*time.Second, "all acked", func() bool { return r.distinct() == n })
	r.mu.Lock()
	defer r.mu.Unlock()
	var firstB []uint64
	for _, call := range r.calls {
		if call.who == "b" {
			firstB = call.seqs
			break
		}
	}
	if !slices.Equal(firstB, inHand) {
		t.Errorf("standby's first batch %v, want the abandoned one %v", firstB, inHand)
	}
	all := append(slices.Clone(r.acked["a"]), r.acked["b"]...)
	if err := increasing(all); err != nil || len(all) != n {
		t.Errorf("acked %d of %d (a then b), order: %v", len(all), n, err)
	}
}

// An existing member consumer whose max ack pending is below the batch
// size is refused, not run with batches that never fill.
func TestBatchRefusesSmallConsumer(t *testing.T) {
	c, _, _ := laneSetup(t, "m1")
	ctx := ctxT(t)
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) { _ = msg.Ack() }, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Stop() // the static consumer (max ack pending 1) stays
	r := newBatchRec()
	_, err = c.JoinStatic(ctx, "ORDERS", "g", "m1", nil, cg.JoinOptions{Batch: r.options("a", 10, nil)})
	if !errors.Is(err, cg.ErrConsumerConflict) || !strings.Contains(err.Error(), "batches of 10") {
		t.Fatalf("got %v, want ErrConsumerConflict naming the batch size", err)
	}
}

// Elastic batch members rebalancing under traffic keep per-key order and
// lose nothing: the batch stage hands back through the rebalance too.
func TestBatchElasticRebalance(t *testing.T) {
	c, js, fresh := elasticSetup(t, 6)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	join := func(member string) {
		h := l.handler(member) // its per-message DoubleAck is refused (ErrBatchAck) and ignored
		bo := &cg.BatchOptions{Size: 20, Wait: 20 * time.Millisecond, Handler: func(ctx context.Context, b *cg.Batch) error {
			for _, m := range b.Msgs {
				h(ctx, m)
			}
			return nil
		}}
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", member, nil, cg.JoinOptions{Batch: bo})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	join("m1")
	pub := startPublisher(t, js, 24, 2000, 500*time.Microsecond)
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
	t.Logf("%d sent, %d duplicates, m1 %d, m2 %d", sent, l.dups, l.byWho["m1"], l.byWho["m2"])
}
