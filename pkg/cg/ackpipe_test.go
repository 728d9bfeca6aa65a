package cg_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// asyncHandler is tracker.handler with DoubleAckAsync: a message counts as
// in flight, for the whole call and for its key, from the moment its
// handler starts until its ack's done callback has run, so maxPerKey above
// 1 means a key's next message was handled before its predecessor's ack
// was confirmed, and maxFlight above the concurrency means handler calls
// returned with replies outstanding. gate, when set, runs first in done.
func (tr *tracker) asyncHandler(who string, gate func(*cg.Msg)) cg.Handler {
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
		m.DoubleAckAsync(func(ackErr error) {
			if gate != nil {
				gate(m)
			}
			tr.mu.Lock()
			defer tr.mu.Unlock()
			tr.inFlight--
			tr.perKey[key]--
			tr.perPart[m.Partition()]--
			if ackErr != nil && !tr.recordAll {
				return
			}
			id := fmt.Sprintf("%s/%d", key, seq)
			tr.times[id]++
			tr.log = append(tr.log, id)
			switch {
			case tr.times[id] > 1:
				tr.dups++
			case ackErr != nil:
			case seq < tr.last[key]:
				tr.bad = append(tr.bad, fmt.Sprintf("%s: key %s seq %d after %d", who, key, seq, tr.last[key]))
			default:
				tr.last[key] = seq
			}
			tr.handled++
		})
	}
}

func (tr *tracker) flights() (inFlight, maxFlight, maxPerKey int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.inFlight, tr.maxFlight, tr.maxPerKey
}

// inPart is how many messages of partition p are in hand.
func (tr *tracker) inPart(p int) int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.perPart[p]
}

// gateOnce blocks the first done callback that runs until open is called:
// the replies of every later ack of the binding (they share its reply
// goroutine) queue behind it, so they are all outstanding at once.
type gateOnce struct {
	once   sync.Once
	opened sync.Once
	closed chan struct{}
	inGate atomic.Bool
	part   atomic.Int64 // the partition of the message held
}

func newGate() *gateOnce { return &gateOnce{closed: make(chan struct{})} }

func (g *gateOnce) wait(m *cg.Msg) {
	g.once.Do(func() {
		g.part.Store(int64(m.Partition()))
		g.inGate.Store(true)
		<-g.closed
	})
}

// open lets the held callback go on; a test's cleanup opens it too, so a
// failed test does not leave its member's stop waiting on it.
func (g *gateOnce) open() { g.opened.Do(func() { close(g.closed) }) }

// pipeGroup makes a static group g of one member m1 over 8 partitions of
// the given layout, with n messages over keys published.
func pipeGroup(t *testing.T, layout cg.Layout, keys []string, n int) (*server.Server, jetstream.JetStream, map[string]int) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	laneStream(t, js, 8)
	c := cg.New(js)
	if _, err := c.CreateStatic(ctxT(t), "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}, Layout: layout}); err != nil {
		t.Fatal(err)
	}
	seq := map[string]int{}
	publishKeyedFrom(t, js, keys, n, seq)
	return s, js, seq
}

func joinOn(t *testing.T, s *server.Server, h cg.Handler, opts cg.JoinOptions) (*cg.Member, *nats.Conn) {
	t.Helper()
	nc := natstest.Connect(t, s)
	c, err := cg.NewFromConn(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctxT(t), "ORDERS", "g", "m1", h, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	return m, nc
}

var layouts = []cg.Layout{cg.LayoutMember, cg.LayoutPartition}

// Pipelined double acks on both layouts: handler calls return with their
// replies outstanding (while one reply's callback is held, a partition has
// several times the concurrency in hand), yet no key has two messages in
// hand at once, per-key order holds, and every message is handled once.
func TestPipelinedAcksKeepKeysHeld(t *testing.T) {
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			const n, conc = 3000, 4
			s, _, _ := pipeGroup(t, layout, keyNames(256), n)
			tr := newTracker()
			g := newGate()
			joinOn(t, s, tr.asyncHandler("a", g.wait), cg.JoinOptions{Concurrency: conc, MaxAckPending: 64})
			t.Cleanup(g.open)
			// Every later reply of the held one's partition queues behind
			// it, so its keys are held one by one while lanes take others.
			natstest.Eventually(t, 30*time.Second, "replies outstanding beyond the concurrency", func() bool {
				return g.inGate.Load() && tr.inPart(int(g.part.Load())) >= 3*conc
			})
			g.open()
			natstest.Eventually(t, 60*time.Second, "all handled", func() bool { return tr.distinct() == n })
			tr.check(t, n, false)
			if _, _, maxPerKey := tr.flights(); maxPerKey != 1 {
				t.Errorf("a key had %d messages in hand at once, want 1", maxPerKey)
			}
		})
	}
}

// A pinned instance stopped while its acks' replies are outstanding waits
// for them before it hands back and lets go of its pins: no done callback
// of it runs after Stop returned, the standby loses nothing, and no key is
// overtaken or in two hands at once.
func TestPipelinedAcksStopWaitsForReplies(t *testing.T) {
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			const n = 1500
			s, _, _ := pipeGroup(t, layout, keyNames(40), n)
			tr := newTracker()
			g := newGate()
			var stopped atomic.Bool
			var late atomic.Int64
			var ctxs sync.Map // partition -> the handler context of a
			ha := tr.asyncHandler("a", func(m *cg.Msg) {
				g.wait(m)
				if stopped.Load() {
					late.Add(1)
				}
			})
			ma, _ := joinOn(t, s, func(ctx context.Context, m *cg.Msg) {
				ctxs.Store(m.Partition(), ctx)
				ha(ctx, m)
			}, cg.JoinOptions{Concurrency: 8})
			t.Cleanup(g.open)
			natstest.Eventually(t, 20*time.Second, "replies held", func() bool {
				return g.inGate.Load() && tr.inPart(int(g.part.Load())) >= 4
			})
			joinOn(t, s, tr.asyncHandler("b", nil), cg.JoinOptions{Concurrency: 8})
			stopDone := make(chan struct{})
			go func() {
				ma.Stop()
				stopped.Store(true)
				close(stopDone)
			}()
			// The stop is under way (every handler context of a is
			// cancelled) before the held replies are let through.
			natstest.Eventually(t, 20*time.Second, "a stopping", func() bool {
				all := true
				ctxs.Range(func(_, v any) bool {
					all = all && v.(context.Context).Err() != nil
					return all
				})
				return all
			})
			g.open()
			select {
			case <-stopDone:
			case <-time.After(30 * time.Second):
				t.Fatal("Stop did not return")
			}
			natstest.Eventually(t, 60*time.Second, "all handled", func() bool { return tr.distinct() == n })
			tr.check(t, n, false)
			if l := late.Load(); l != 0 {
				t.Errorf("%d done callbacks of a ran after its Stop returned", l)
			}
			if _, _, maxPerKey := tr.flights(); maxPerKey != 1 {
				t.Errorf("a key had %d messages in hand at once, want 1", maxPerKey)
			}
		})
	}
}

// The pinned instance's connection is closed while its acks' replies are
// outstanding: the replies never come, its acks end within the ack wait,
// and the standby takes over with nothing lost and no key overtaken among
// the messages whose acks were confirmed.
func TestPipelinedAcksFailoverKill(t *testing.T) {
	for _, layout := range layouts {
		t.Run(string(layout), func(t *testing.T) {
			keys := keyNames(16)
			s, js, seq := pipeGroup(t, layout, keys, 1000)
			tr := newTracker()
			tr.recordAll = true
			g := newGate()
			opts := cg.JoinOptions{Concurrency: 8, MaxAckPending: 200, AckWait: 2 * time.Second}
			_, conn := joinOn(t, s, tr.asyncHandler("a", g.wait), opts)
			t.Cleanup(g.open)
			natstest.Eventually(t, 20*time.Second, "replies held", func() bool {
				return g.inGate.Load() && tr.inPart(int(g.part.Load())) >= 2
			})
			joinOn(t, s, tr.asyncHandler("b", nil), opts)
			conn.Close()
			g.open()
			publishKeyedFrom(t, js, keys, 300, seq)
			natstest.Eventually(t, 45*time.Second, "all handled", func() bool { return tr.distinct() == 1300 })
			tr.check(t, 1300, true)
		})
	}
}
