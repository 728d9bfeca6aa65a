package cg_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// deliveryLog records, per instance, each message handed to user code: its
// stream sequence, delivery count and key/seq, in the order handled.
type deliveryLog struct {
	mu   sync.Mutex
	seen map[string][]seen
}

type seen struct {
	seq       uint64
	delivered uint64
	key       string
	keySeq    int
}

func (l *deliveryLog) add(who string, m *cg.Msg) {
	md, err := m.Metadata()
	if err != nil {
		return
	}
	ks, _ := strconv.Atoi(m.Headers().Get("Seq"))
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen[who] = append(l.seen[who], seen{md.Sequence.Stream, md.NumDelivered, m.Headers().Get("Key"), ks})
}

func (l *deliveryLog) of(who string) []seen {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seen(nil), l.seen[who]...)
}

// A stopping instance that has messages prefetched (max ack pending above
// 1) hands each of them back once, after it stopped pulling: the next
// instance gets them at once (well before the ack wait), in order, on their
// second delivery, and nothing is lost. Before, the stopping instance kept
// its pull request open while it nak'ed, so the server redelivered what it
// handed back to it again, and the next instance saw a third delivery.
func TestStopHandsBackOnceInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts cg.JoinOptions
	}{
		{"serial", cg.JoinOptions{MaxAckPending: 20}},
		{"lanes", cg.JoinOptions{MaxAckPending: 20, Concurrency: 4}},
		{"batch", cg.JoinOptions{MaxAckPending: 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, js, fresh := laneSetup(t, "m1")
			ctx := ctxT(t)
			const n = 60
			publishKeyed(t, js, keyNames(6), n)
			log := &deliveryLog{seen: map[string][]seen{}}
			// started is closed once a has handled a few.
			started := make(chan struct{})
			var calls atomic.Int32
			noteA := func() {
				if calls.Add(1) == 3 {
					close(started)
				}
			}
			// A long ack wait: anything the next instance gets before it
			// was handed back, not redelivered by the server's timer.
			const ackWait = 30 * time.Second
			mk := func(who string, slow bool) (cg.Handler, *cg.BatchOptions) {
				one := func(m *cg.Msg) {
					log.add(who, m)
					if slow {
						time.Sleep(30 * time.Millisecond)
					}
				}
				if tc.name == "batch" {
					return nil, &cg.BatchOptions{Size: 2, Wait: 10 * time.Millisecond, Handler: func(_ context.Context, b *cg.Batch) error {
						for _, m := range b.Msgs {
							one(m)
						}
						if who == "a" {
							noteA()
						}
						return nil
					}}
				}
				return func(_ context.Context, m *cg.Msg) {
					one(m)
					_ = m.DoubleAck(context.Background())
					if who == "a" {
						noteA()
					}
				}, nil
			}
			opts := tc.opts
			opts.AckWait = ackWait
			opts.Batch = nil
			h, bo := mk("a", true)
			opts.Batch = bo
			a, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", h, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(a.Stop)
			<-started
			// The consumer has delivered more than a handled: those wait
			// in the instance (or on their way to it).
			natstest.Eventually(t, 10*time.Second, "messages prefetched", func() bool {
				cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
				return err == nil && cons.CachedInfo().NumAckPending > 5
			})
			a.Stop()
			stopped := time.Now()
			aSeen := log.of("a")
			handledByA := map[uint64]bool{}
			for _, s := range aSeen {
				handledByA[s.seq] = true
			}

			opts = tc.opts
			opts.AckWait = ackWait
			h, bo = mk("b", false)
			opts.Batch = bo
			b, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", h, opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(b.Stop)
			natstest.Eventually(t, 20*time.Second, "the rest handled by b", func() bool {
				return len(log.of("b")) >= n-len(aSeen)
			})
			if took := time.Since(stopped); took > ackWait/2 {
				t.Fatalf("b got the handed-back messages %s after a stopped: they waited for the ack wait", took)
			}
			bSeen := log.of("b")
			got := map[uint64]bool{}
			last := map[string]int{}
			second := 0
			for _, s := range bSeen {
				if handledByA[s.seq] {
					t.Errorf("stream sequence %d handled by a and again by b", s.seq)
				}
				if got[s.seq] {
					t.Errorf("stream sequence %d handled twice by b", s.seq)
				}
				got[s.seq] = true
				switch s.delivered {
				case 1:
				case 2:
					second++
				default:
					t.Errorf("stream sequence %d reached b on delivery %d: handed back more than once", s.seq, s.delivered)
				}
				if s.keySeq < last[s.key] {
					t.Errorf("key %s: seq %d after %d at b", s.key, s.keySeq, last[s.key])
				}
				last[s.key] = s.keySeq
			}
			if second == 0 {
				t.Errorf("no message reached b on its second delivery: nothing was prefetched and handed back (%s)", summary(bSeen))
			}
			if len(got)+len(aSeen) != n {
				t.Errorf("a handled %d, b %d distinct, want %d in all", len(aSeen), len(got), n)
			}
		})
	}
}

func summary(ss []seen) string {
	out := ""
	for i, s := range ss {
		if i == 12 {
			return out + "…"
		}
		out += fmt.Sprintf("%d/d%d ", s.seq, s.delivered)
	}
	return out
}
