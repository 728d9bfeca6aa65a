package cg

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Batches under a retry policy: a batch holding the poison message fails
// every attempt; cg splits it until the poison message fails alone, takes
// the policy's action on it, and every other message is handled once, in
// stream order.

// batchPoisonLog counts what a batch handler saw: per key the Seq values
// acked (in order), the stream sequences acked, and every call holding
// the poison message.
type batchPoisonLog struct {
	mu         sync.Mutex
	acked      map[string][]int
	ackedSeqs  []uint64
	poisonIn   []int // size of each call that held the poison message
	poisonSeq  uint64
	maxCallLen int
	events     []BatchEvent
}

func newBatchPoisonLog() *batchPoisonLog { return &batchPoisonLog{acked: map[string][]int{}} }

func (l *batchPoisonLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.ackedSeqs)
}

func (l *batchPoisonLog) calls() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.poisonIn)
}

// options: batches of size; the batch fails while fail() says so and it
// holds the poison message (the poison key's poisonSeq-th).
func (l *batchPoisonLog) options(size int, fail func() bool) *BatchOptions {
	pending := map[uint64][]*Msg{} // batch number -> the messages of its last call
	return &BatchOptions{
		Size: size, Wait: 20 * time.Millisecond,
		Handler: func(_ context.Context, b *Batch) error {
			bad := false
			for _, m := range b.Msgs {
				if m.Headers().Get("Key") == poisonKey && m.Headers().Get("Seq") == strconv.Itoa(poisonSeq) {
					bad = true
					md, _ := m.Metadata()
					l.mu.Lock()
					l.poisonSeq = md.Sequence.Stream
					l.poisonIn = append(l.poisonIn, len(b.Msgs))
					l.mu.Unlock()
				}
			}
			l.mu.Lock()
			pending[b.Number] = b.Msgs
			l.maxCallLen = max(l.maxCallLen, len(b.Msgs))
			l.mu.Unlock()
			if bad && fail() {
				return errors.New("cannot parse order")
			}
			return nil
		},
		OnBatch: func(e BatchEvent) {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.events = append(l.events, e)
			if !e.Acked {
				return
			}
			for _, m := range pending[e.Number] {
				md, _ := m.Metadata()
				seq, _ := strconv.Atoi(m.Headers().Get("Seq"))
				key := m.Headers().Get("Key")
				l.acked[key] = append(l.acked[key], seq)
				l.ackedSeqs = append(l.ackedSeqs, md.Sequence.Stream)
			}
		},
	}
}

// check: stream sequences acked strictly increasing (each once, in order),
// and every key's Seq values 1, 2, … skipping the poison message unless
// it was handled.
func (l *batchPoisonLog) check(t *testing.T, perKey int, poisonHandled bool) {
	t.Helper()
	l.ascending(t)
	(&poisonLog{acked: l.acked}).checkOrder(t, perKey, poisonHandled)
}

// ascending: each stream sequence acked once, in stream order.
func (l *batchPoisonLog) ascending(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	for i := 1; i < len(l.ackedSeqs); i++ {
		if l.ackedSeqs[i] <= l.ackedSeqs[i-1] {
			l.mu.Unlock()
			t.Fatalf("stream sequence %d acked after %d", l.ackedSeqs[i], l.ackedSeqs[i-1])
		}
	}
	l.mu.Unlock()
}

func TestBatchPoisonDeadLetterSplitsTheBatch(t *testing.T) {
	env := poisonSetup(t, poisonTotal)
	log := newBatchPoisonLog()
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", nil, JoinOptions{
		Batch: log.options(10, func() bool { return true }),
		Retry: &RetryPolicy{MaxDeliver: 3, Backoff: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond}, DeadLetter: "dlq.orders"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "every other message acked, the poison one dead-lettered", func() bool {
		return log.total() == poisonTotal-1 && dlqCount(env.js) == 1
	})
	log.check(t, poisonTotal/poisonKeys, false)
	dl := dlqMessages(t, env.js)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters", len(dl))
	}
	h := dl[0].Headers()
	if h.Get("Key") != poisonKey || h.Get("Seq") != strconv.Itoa(poisonSeq) || h.Get(HeaderDLReason) != DLReasonMaxDeliver ||
		h.Get(HeaderDLError) != "cannot parse order" || h.Get(HeaderDLSequence) != strconv.FormatUint(log.poisonSeq, 10) {
		t.Fatalf("dead letter headers %v", h)
	}
	// Three calls of the whole batch, then halves down to the message
	// alone: 10 -> 5 -> 2 or 3 -> 1 or 2 -> 1. A loaded server may hand
	// the member fewer than 10 at once, so the batch holding the poison
	// message can be smaller (6 -> 3 -> 1); each half is at most half
	// its parent, rounded up.
	log.mu.Lock()
	in := append([]int(nil), log.poisonIn...)
	log.mu.Unlock()
	if !halvedToOne(in, 3, 10) {
		t.Fatalf("calls holding the poison message, by size: %v", in)
	}
	var poisonEv *BatchEvent
	for i, e := range log.events {
		if e.Poison != 0 {
			if poisonEv != nil {
				t.Fatalf("two poison batch events: %+v, %+v", *poisonEv, e)
			}
			poisonEv = &log.events[i]
		}
	}
	if poisonEv == nil || poisonEv.Poison != PoisonDeadLetter || poisonEv.Size != 1 || poisonEv.FirstSeq != log.poisonSeq || !poisonEv.Final || poisonEv.Acked {
		t.Fatalf("poison batch event %+v", poisonEv)
	}
	// Settled for good: no call holds it again.
	n := log.calls()
	m.Stop()
	if log.calls() != n {
		t.Fatalf("the dead-lettered message was handed over again")
	}
	if m.Err() != nil {
		t.Fatalf("stopped with %v", m.Err())
	}
}

func TestBatchPoisonParkHoldsUntilReleased(t *testing.T) {
	env := poisonSetup(t, poisonTotal)
	log := newBatchPoisonLog()
	var mu sync.Mutex
	failing := true
	fail := func() bool { mu.Lock(); defer mu.Unlock(); return failing }
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", nil, JoinOptions{
		Batch: log.options(10, fail),
		Retry: &RetryPolicy{MaxDeliver: 2, OnPoison: PoisonPark},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	var parked ParkedMessage
	natstest.Eventually(t, 60*time.Second, "the poison message parked", func() bool {
		rep, err := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		mp, _ := rep.Member("m1")
		if len(mp.Parked) == 1 {
			parked = mp.Parked[0]
			return true
		}
		return false
	})
	if parked.Subject != "orders.k07.e1" || parked.Error != "cannot parse order" || parked.Reason != DLReasonMaxDeliver {
		t.Fatalf("parked %+v", parked)
	}
	// A batch member is one ordering domain: everything ahead of the
	// parked message is acked, nothing behind it.
	before := int(parked.Sequence) - 1
	natstest.Eventually(t, 30*time.Second, "everything ahead of it acked", func() bool { return log.total() == before })
	calls := log.calls()
	time.Sleep(DefaultAckWait + time.Second) // a stretch of time to observe nothing in, not synchronisation
	if n := log.total(); n != before {
		t.Fatalf("%d acked while parked at %d, want %d", n, parked.Sequence, before)
	}
	if log.calls() != calls {
		t.Fatalf("the parked message was handed over again while parked")
	}
	// Released while still failing: one more call, alone, then parked again.
	if _, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "the released message retried once", func() bool { return log.calls() == calls+1 })
	natstest.Eventually(t, 30*time.Second, "parked again", func() bool {
		rep, _ := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		mp, _ := rep.Member("m1")
		return len(mp.Parked) == 1 && mp.Parked[0].Release == ""
	})
	log.mu.Lock()
	last := log.poisonIn[len(log.poisonIn)-1]
	log.mu.Unlock()
	if n := log.total(); n != before || last != 1 {
		t.Fatalf("after a failed retry: %d acked (want %d), the retry's call held %d message(s) (want 1)", n, before, last)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	if _, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, "all handled after the release", func() bool { return log.total() == poisonTotal })
	log.check(t, poisonTotal/poisonKeys, true)
	if log.calls() != calls+2 {
		t.Fatalf("released message handed over %d more times, want 2 (one per release)", log.calls()-calls)
	}
	natstest.Eventually(t, 30*time.Second, "the park cleared", func() bool {
		rep, _ := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		_, p := rep.Totals()
		return p == 0
	})
}

func TestBatchPoisonStopNamesTheMessage(t *testing.T) {
	env := poisonSetup(t, 200)
	log := newBatchPoisonLog()
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", nil, JoinOptions{
		Batch: log.options(8, func() bool { return true }),
		Retry: &RetryPolicy{MaxDeliver: 2, OnPoison: PoisonStop},
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(60 * time.Second):
		m.Stop()
		t.Fatal("member did not stop on the poison message")
	}
	var pe *PoisonError
	if err := m.Err(); !errors.As(err, &pe) || pe.Subject != "orders.k07.e1" || pe.Reason != DLReasonMaxDeliver {
		t.Fatalf("stopped with %v, want a *PoisonError naming orders.k07.e1", err)
	}
	if m.StopCause() != CausePoison {
		t.Fatalf("stop cause %q", m.StopCause())
	}
	if n := log.total(); n != int(pe.Sequence)-1 {
		t.Fatalf("%d acked, want the %d ahead of the poison message", n, pe.Sequence-1)
	}
	log.ascending(t)
	ci, err := env.c.consumerInfo(context.Background(), "ORDERS", StaticConsumerName("g", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if ci.AckFloor.Stream >= pe.Sequence {
		t.Fatalf("ack floor %d passed the poison message %d", ci.AckFloor.Stream, pe.Sequence)
	}
}

// The dead-letter stream is removed after the member started: the poison
// message found by the halving is held (everything behind it waiting) and
// only its publish is retried, never the handler; the member's next
// instance, started while the dead letter is still owed, publishes it
// without handing it over either.
func TestBatchPoisonDeadLetterOwedNotHandledAgain(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newBatchPoisonLog()
	events := newPoisonLog()
	ready := make(chan struct{})
	pol := &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DeadLetter: "dlq.orders"}
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", nil, JoinOptions{
		Batch: log.options(10, blockFirst(ready)), Retry: pol, OnEvent: events.onEvent,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := fallbackCtx(t)
	if err := env.js.DeleteStream(ctx, "DLQ"); err != nil {
		t.Fatal(err)
	}
	close(ready)
	natstest.Eventually(t, 30*time.Second, "two failed dead-letter publishes", func() bool {
		return events.warnings("dead letter of message") >= 2
	})
	calls := log.calls()
	log.mu.Lock()
	pseq := log.poisonSeq
	log.mu.Unlock()
	natstest.Eventually(t, 30*time.Second, "everything ahead of it acked", func() bool { return log.total() == int(pseq)-1 })
	m.Stop()
	if log.calls() != calls || log.total() != int(pseq)-1 {
		t.Fatalf("while its dead letter was owed: %d more calls held it, %d acked (want 0 more, %d)", log.calls()-calls, log.total(), pseq-1)
	}
	// The stream comes back and the next instance starts (it refuses a
	// dead-letter subject nothing captures): the owed record says the
	// handler is done with the message.
	if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	m2, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", nil, JoinOptions{
		Batch: log.options(10, func() bool { return true }), Retry: pol,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	natstest.Eventually(t, 60*time.Second, "dead-lettered, all the rest handled", func() bool {
		return dlqCount(env.js) == 1 && log.total() == 219
	})
	if log.calls() != calls {
		t.Fatalf("the owed message was handed over %d more times, want 0", log.calls()-calls)
	}
	log.check(t, 11, false)
}

// halvedToOne tells whether sizes, the sizes of the calls that held the
// poison message, are whole-batch calls of one size n (1 to most), then
// halves down to the message alone: each at most half its parent,
// rounded up, and the last of size 1.
func halvedToOne(sizes []int, whole, most int) bool {
	if len(sizes) < whole {
		return false
	}
	n := sizes[0]
	if n < 1 || n > most {
		return false
	}
	for _, s := range sizes[:whole] {
		if s != n {
			return false
		}
	}
	prev := n
	for _, s := range sizes[whole:] {
		if s < 1 || s > (prev+1)/2 {
			return false
		}
		prev = s
	}
	return prev == 1
}
