package cg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// obsRec is an observer that counts what the hooks were told.
type obsRec struct {
	mu      sync.Mutex
	results map[cg.MessageResult]int
	seqs    map[uint64]int // stream sequence → done calls
	batched int            // done calls with a batch number
	pinned  map[int]bool
	pinLog  []cg.PinChange
	joined  *cg.Member
	stopped int
	cause   cg.EventCause
	badCtx  int // done hooks that did not get the start hook's context
}

type obsCtxKey struct{}

func newObsRec() *obsRec {
	return &obsRec{results: map[cg.MessageResult]int{}, seqs: map[uint64]int{}, pinned: map[int]bool{}}
}

func (r *obsRec) OnMessageStart(ctx context.Context, info *cg.MessageInfo) context.Context {
	return context.WithValue(ctx, obsCtxKey{}, info.StreamSeq)
}

func (r *obsRec) OnMessageDone(ctx context.Context, info *cg.MessageInfo, res cg.MessageResult, took time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq, _ := ctx.Value(obsCtxKey{}).(uint64); seq != info.StreamSeq || took < 0 {
		r.badCtx++
	}
	r.results[res]++
	r.seqs[info.StreamSeq]++
	if info.Batch > 0 {
		r.batched++
	}
}

func (r *obsRec) OnJoin(m *cg.Member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.joined = m
}

func (r *obsRec) OnPin(c cg.PinChange) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pinLog = append(r.pinLog, c)
	for _, p := range c.Partitions {
		r.pinned[p] = c.Pinned
	}
}

func (r *obsRec) OnStop(_ *cg.Member, cause cg.EventCause, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped++
	r.cause = cause
}

func (r *obsRec) count(res cg.MessageResult) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.results[res]
}

func (r *obsRec) pinnedParts() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ps []int
	for p, on := range r.pinned {
		if on {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The hooks see every handled message once with its result, the handler
// gets the context the start hook made, the pinned instance is told it
// holds the pin of the member's partitions and the standby is told
// nothing, and the stop lets go of the pin. Serial, lanes and batches.
func TestObserverHooks(t *testing.T) {
	const n = 120
	for _, tc := range []struct {
		name string
		opts func(*cg.JoinOptions, func(ctx context.Context, m *cg.Msg))
	}{
		{"serial", func(o *cg.JoinOptions, h func(context.Context, *cg.Msg)) {}},
		{"lanes", func(o *cg.JoinOptions, h func(context.Context, *cg.Msg)) { o.Concurrency = 4 }},
		{"batch", func(o *cg.JoinOptions, h func(context.Context, *cg.Msg)) {
			o.Batch = &cg.BatchOptions{Size: 10, Wait: 20 * time.Millisecond, Handler: func(ctx context.Context, b *cg.Batch) error { return nil }}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, js, fresh := laneSetup(t, "m1")
			var mu sync.Mutex
			wrongCtx := 0
			h := func(ctx context.Context, m *cg.Msg) {
				md, _ := m.Metadata()
				if seq, _ := ctx.Value(obsCtxKey{}).(uint64); seq != md.Sequence.Stream {
					mu.Lock()
					wrongCtx++
					mu.Unlock()
				}
				_ = m.Ack()
			}
			join := func(cl *cg.Client, r *obsRec) *cg.Member {
				o := cg.JoinOptions{Observers: []cg.Observer{r}}
				tc.opts(&o, h)
				var hh cg.Handler = h
				if o.Batch != nil {
					hh = nil
				}
				m, err := cl.JoinStatic(context.Background(), "ORDERS", "g", "m1", hh, o)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			r1 := newObsRec()
			m1 := join(c, r1)
			publishKeyed(t, js, []string{"a", "b", "c", "d", "e", "f"}, 1)
			waitUntil(t, "the first instance pinned", func() bool { return len(r1.pinnedParts()) > 0 })
			r2 := newObsRec()
			m2 := join(fresh(), r2)
			publishKeyed(t, js, []string{"a", "b", "c", "d", "e", "f"}, n-1)
			waitUntil(t, fmt.Sprintf("%d acked", n), func() bool { return r1.count(cg.ResultAcked) == n })
			if got := r1.pinnedParts(); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
				t.Errorf("pinned instance holds the pin of %v, want 0-7", got)
			}
			if got := r2.pinnedParts(); len(got) != 0 || r2.count(cg.ResultAcked) != 0 {
				t.Errorf("standby: pinned %v, %d acked; want none", got, r2.count(cg.ResultAcked))
			}
			r1.mu.Lock()
			if r1.badCtx != 0 || r1.joined != m1 || len(r1.seqs) != n {
				t.Errorf("done hooks without the start context: %d; joined %v; %d distinct messages (want %d)", r1.badCtx, r1.joined == m1, len(r1.seqs), n)
			}
			if tc.name == "batch" && r1.batched != n {
				t.Errorf("%d done calls carry a batch number, want %d", r1.batched, n)
			}
			r1.mu.Unlock()
			mu.Lock()
			if wrongCtx != 0 && tc.name != "batch" {
				t.Errorf("%d handler calls did not get the start hook's context", wrongCtx)
			}
			mu.Unlock()
			if d := m1.QueueDepth(); d != 0 {
				t.Errorf("queue depth %d after everything was handled, want 0", d)
			}
			m1.Stop()
			r1.mu.Lock()
			if r1.stopped != 1 || r1.cause != cg.CauseStopRequested {
				t.Errorf("stop hooks: %d calls, cause %q", r1.stopped, r1.cause)
			}
			r1.mu.Unlock()
			if got := r1.pinnedParts(); len(got) != 0 {
				t.Errorf("stopped instance still holds the pin of %v", got)
			}
			m2.Stop()
		})
	}
}

// Under a retry policy a message that always fails is counted failed for
// each delivery but the last, which is dead-lettered.
func TestObserverPoisonResults(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	publishKeyed(t, js, []string{"a", "b", "c"}, 30)
	r := newObsRec()
	h := func(ctx context.Context, m *cg.Msg) {
		if m.Subject() == "orders.b.e2" && m.Headers().Get("Seq") == "2" {
			m.Fail(errors.New("boom"))
			return
		}
		_ = m.Ack()
	}
	m, err := c.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, cg.JoinOptions{
		Observers: []cg.Observer{r}, AckWait: time.Second,
		Retry: &cg.RetryPolicy{MaxDeliver: 3, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	waitUntil(t, "29 acked and one dead-lettered", func() bool {
		return r.count(cg.ResultAcked) == 29 && r.count(cg.ResultDeadLettered) == 1
	})
	if f := r.count(cg.ResultFailed); f != 2 {
		t.Errorf("%d failed results, want 2 (deliveries 1 and 2 of the poison message)", f)
	}
}

// With no observer the runtime does not build message infos: a nil
// Observers list and one with values implementing no hook cost the same.
func TestObserverWithoutHooks(t *testing.T) {
	c, js, _ := laneSetup(t, "m1")
	publishKeyed(t, js, []string{"a"}, 5)
	var mu sync.Mutex
	got := 0
	m, err := c.JoinStatic(context.Background(), "ORDERS", "g", "m1", func(ctx context.Context, m *cg.Msg) {
		mu.Lock()
		got++
		mu.Unlock()
		_ = m.Ack()
	}, cg.JoinOptions{Observers: []cg.Observer{struct{}{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	waitUntil(t, "5 handled", func() bool { mu.Lock(); defer mu.Unlock(); return got == 5 })
}
