package cg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// resetRec records what members handled: per member, the stream
// sequence, the key and the delivery (consumer) sequence of each message.
type resetRec struct {
	mu   sync.Mutex
	got  map[string][]handled
	slow time.Duration
	// nak is a stream sequence nak'ed on its first delivery (after a
	// reset too: the redelivery of a replayed message must be handled,
	// not taken for one of a message acked before the reset).
	nak uint64
}

type handled struct {
	seq, dseq uint64
	key       string
}

func (r *resetRec) handler(name string) cg.Handler {
	return func(_ context.Context, m *cg.Msg) {
		if r.slow > 0 {
			time.Sleep(r.slow) // a handler's work, not synchronisation
		}
		md, err := m.Metadata()
		if err != nil {
			return
		}
		if md.Sequence.Stream == r.nak && md.NumDelivered == 1 {
			_ = m.Nak()
			return
		}
		r.mu.Lock()
		r.got[name] = append(r.got[name], handled{md.Sequence.Stream, md.Sequence.Consumer, m.Subject()})
		r.mu.Unlock()
		_ = m.Ack()
	}
}

func (r *resetRec) total() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, hs := range r.got {
		n += len(hs)
	}
	return n
}

// snap is how many messages each member handled so far.
func (r *resetRec) snap() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for name, hs := range r.got {
		out[name] = len(hs)
	}
	return out
}

// resetSnap runs a reset, snapshotting what was handled at the moment the
// consumers were reset (they are paused then: all that was delivered
// before has been handled and acked).
func (r *resetRec) resetSnap(t *testing.T, f func() (cg.ResetResult, error)) (cg.ResetResult, map[string]int) {
	t.Helper()
	var since map[string]int
	cg.SetResetHook(func() { since = r.snap() })
	defer cg.SetResetHook(nil)
	res, err := f()
	if err != nil {
		t.Fatal(err)
	}
	for _, mp := range res.Members {
		if mp.Unacked != 0 {
			t.Fatalf("%s: %d unacked at the reset", mp.Member, mp.Unacked)
		}
	}
	return res, since
}

// afterReset is what members handled after snapshot since.
func (r *resetRec) afterReset(since map[string]int) []handled {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []handled
	for name, hs := range r.got {
		out = append(out, hs[since[name]:]...)
	}
	return out
}

// checkReplay asserts hs are exactly the sequences from..to once each,
// each key's in increasing order.
func checkReplay(t *testing.T, hs []handled, from, to uint64) {
	t.Helper()
	seen := map[uint64]int{}
	last := map[string]uint64{}
	order := 0
	for _, h := range hs {
		seen[h.seq]++
		if h.seq <= last[h.key] {
			order++
		}
		last[h.key] = h.seq
	}
	var missing, dup, extra int
	for s := from; s <= to; s++ {
		switch seen[s] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	for s := range seen {
		if s < from || s > to {
			extra++
		}
	}
	if missing+dup+extra+order != 0 || len(hs) != int(to-from+1) {
		t.Fatalf("replay of %d..%d: %d handled, %d missing, %d duplicated, %d outside, %d per-key order violations", from, to, len(hs), missing, dup, extra, order)
	}
}

func resetGroup(t *testing.T) (*cg.Client, jetstream.JetStream, context.Context) {
	t.Helper()
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"m1", "m2"}}); err != nil {
		t.Fatal(err)
	}
	return c, js, ctx
}

// publishN publishes n messages over 12 keys, returning each one's
// stream sequence's publish-acked time.
func publishN(t *testing.T, js jetstream.JetStream, n int) []time.Time {
	t.Helper()
	var at []time.Time
	for i := range n {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%12), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
		at = append(at, time.Now())
	}
	return at
}

func joinBoth(t *testing.T, c *cg.Client, ctx context.Context, r *resetRec, opts cg.JoinOptions) []*cg.Member {
	t.Helper()
	var ms []*cg.Member
	for _, name := range []string{"m1", "m2"} {
		m, err := c.JoinStatic(ctx, "ORDERS", "g", name, r.handler(name), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		ms = append(ms, m)
	}
	return ms
}

type consState struct {
	delivered, floor, pending uint64
	ackPending                int
}

func states(t *testing.T, js jetstream.JetStream) map[string]consState {
	t.Helper()
	out := map[string]consState{}
	for _, name := range []string{"g-m1", "g-m2"} {
		cons, err := js.Consumer(context.Background(), "ORDERS", name)
		if err != nil {
			t.Fatal(err)
		}
		ci := cons.CachedInfo()
		out[name] = consState{ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending}
	}
	return out
}

// settledStates waits for the consumers to count what was published (a
// consumer's pending count can trail a publish's ack on a loaded machine:
// CI once read m1's pending as 0 that a moment later was 3) and to hold
// no unacked messages, then returns their states.
func settledStates(t *testing.T, js jetstream.JetStream, pending uint64) map[string]consState {
	t.Helper()
	var st map[string]consState
	natstest.Eventually(t, 10*time.Second, fmt.Sprintf("consumers settled at %d pending", pending), func() bool {
		st = states(t, js)
		var p uint64
		for _, s := range st {
			if s.ackPending != 0 {
				return false
			}
			p += s.pending
		}
		return p == pending
	})
	return st
}

// Members stopped: a reset to a sequence, then to a time; the members
// handle exactly the messages from there on, in per-key order, and the
// plan counted them.
func TestResetStoppedToSeqAndTime(t *testing.T) {
	c, js, ctx := resetGroup(t)
	at := publishN(t, js, 200)
	r := &resetRec{got: map[string][]handled{}}
	ms := joinBoth(t, c, ctx, r, cg.JoinOptions{})
	natstest.Eventually(t, 30*time.Second, "200 handled", func() bool { return r.total() == 200 })
	for _, m := range ms {
		m.Stop()
	}

	res, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Seq: 101})
	if err != nil {
		t.Fatal(err)
	}
	var again uint64
	for _, mp := range res.Members {
		again += mp.Again
		if mp.To != 101 || !mp.ConsumerExists {
			t.Fatalf("plan %+v", mp)
		}
	}
	if again != 100 || res.Seq != 101 {
		t.Fatalf("plan: %d to handle again from %d, want 100 from 101", again, res.Seq)
	}
	for name, st := range states(t, js) {
		if st.floor != 100 || st.pending == 0 || st.ackPending != 0 {
			t.Fatalf("%s after reset: %+v", name, st)
		}
	}
	r.mu.Lock()
	r.got = map[string][]handled{}
	r.mu.Unlock()
	ms = joinBoth(t, c, ctx, r, cg.JoinOptions{})
	natstest.Eventually(t, 30*time.Second, "100 handled again", func() bool { return r.total() == 100 })
	for _, m := range ms {
		m.Stop()
	}
	r.mu.Lock()
	var all []handled
	for _, hs := range r.got {
		all = append(all, hs...)
	}
	r.mu.Unlock()
	checkReplay(t, all, 101, 200)

	// To a time between messages 150 and 151 (sequences are 1-based).
	res, err = c.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Time: at[149].Add(time.Microsecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Seq != 151 {
		t.Fatalf("time resolved to %d, want 151", res.Seq)
	}
	r.mu.Lock()
	r.got = map[string][]handled{}
	r.mu.Unlock()
	joinBoth(t, c, ctx, r, cg.JoinOptions{})
	natstest.Eventually(t, 30*time.Second, "50 handled again", func() bool { return r.total() == 50 })
	r.mu.Lock()
	all = nil
	for _, hs := range r.got {
		all = append(all, hs...)
	}
	r.mu.Unlock()
	checkReplay(t, all, 151, 200)
}

// Members running, busy with a backlog: the reset pauses them, lets what
// they hold settle, resets and resumes; after it each handles exactly the
// messages from the target on, in per-key order, and then new ones.
func TestResetRunning(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency%d", conc), func(t *testing.T) {
			c, js, ctx := resetGroup(t)
			at := publishN(t, js, 300)
			r := &resetRec{got: map[string][]handled{}, slow: time.Millisecond, nak: 45}
			joinBoth(t, c, ctx, r, cg.JoinOptions{Concurrency: conc})
			natstest.Eventually(t, 30*time.Second, "100 handled", func() bool { return r.total() >= 100 })
			// Half way through the backlog, back to a time (message 41).
			pins := func() string {
				gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "g")
				if err != nil {
					t.Fatal(err)
				}
				return gi.Members[0].PinID + " " + gi.Members[1].PinID
			}
			pinned := pins()
			start := time.Now()
			res, since := r.resetSnap(t, func() (cg.ResetResult, error) {
				return c.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Time: at[39].Add(time.Microsecond)})
			})
			t.Logf("reset of 2 running members took %s; pins before %s, after %s", time.Since(start).Round(time.Millisecond), pinned, pins())
			if res.Seq != 41 || len(res.Paused) != 2 {
				t.Fatalf("reset: seq %d paused %v", res.Seq, res.Paused)
			}
			publishN(t, js, 20) // 301..320
			natstest.Eventually(t, 40*time.Second, "replay of 41..320", func() bool { return len(r.afterReset(since)) >= 280 })
			checkReplay(t, r.afterReset(since), 41, 320)
			// And to a sequence, still running.
			_, since = r.resetSnap(t, func() (cg.ResetResult, error) {
				return c.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Seq: 300})
			})
			natstest.Eventually(t, 40*time.Second, "replay of 300..320", func() bool { return len(r.afterReset(since)) >= 21 })
			checkReplay(t, r.afterReset(since), 300, 320)
		})
	}
}

// A dry run (the plan) changes nothing: consumer state before == after.
func TestResetPlanChangesNothing(t *testing.T) {
	c, js, ctx := resetGroup(t)
	publishN(t, js, 60)
	r := &resetRec{got: map[string][]handled{}}
	ms := joinBoth(t, c, ctx, r, cg.JoinOptions{})
	natstest.Eventually(t, 30*time.Second, "60 handled", func() bool { return r.total() == 60 })
	for _, m := range ms {
		m.Stop()
	}
	publishN(t, js, 10)
	before := settledStates(t, js, 10)
	plan, err := c.ResetPlan(ctx, cg.KindStatic, "ORDERS", "g", []string{"m1"}, cg.ResetTarget{Start: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Members) != 1 || plan.Members[0].Member != "m1" || plan.Members[0].To != 1 || plan.Members[0].Again == 0 {
		t.Fatalf("plan %+v", plan)
	}
	if after := states(t, js); !equalStates(before, after) {
		t.Fatalf("the plan changed consumers: %+v -> %+v", before, after)
	}
	// Skipping to the end counts what is skipped.
	plan, err = c.ResetPlan(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{End: true})
	if err != nil {
		t.Fatal(err)
	}
	var skipped uint64
	for _, mp := range plan.Members {
		skipped += mp.Skipped
	}
	if skipped != 10 || plan.Seq != 71 {
		t.Fatalf("to end: %d skipped, seq %d; want 10, 71", skipped, plan.Seq)
	}
	// By a duration: an hour back is the first message, a nanosecond
	// back is after the last.
	for ago, want := range map[time.Duration]uint64{time.Hour: 1, time.Nanosecond: 71} {
		plan, err = c.ResetPlan(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Ago: ago})
		if err != nil || plan.Seq != want {
			t.Fatalf("by %s: seq %d, %v; want %d", ago, plan.Seq, err, want)
		}
	}
	if after := states(t, js); !equalStates(before, after) {
		t.Fatalf("the plan changed consumers: %+v -> %+v", before, after)
	}
}

func equalStates(a, b map[string]consState) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Bad input is an error naming what is wrong, and changes nothing.
func TestResetBadInput(t *testing.T) {
	c, js, ctx := resetGroup(t)
	publishN(t, js, 30)
	r := &resetRec{got: map[string][]handled{}}
	ms := joinBoth(t, c, ctx, r, cg.JoinOptions{})
	natstest.Eventually(t, 30*time.Second, "30 handled", func() bool { return r.total() == 30 })
	for _, m := range ms {
		m.Stop()
	}
	before := settledStates(t, js, 0)
	cases := []struct {
		name    string
		members []string
		t       cg.ResetTarget
		want    error
	}{
		{"future", nil, cg.ResetTarget{Time: time.Now().Add(time.Hour)}, cg.ErrResetTarget},
		{"past end", nil, cg.ResetTarget{Seq: 32}, cg.ErrResetTarget},
		{"unknown member", []string{"m1", "m9"}, cg.ResetTarget{Start: true}, cg.ErrMemberNotFound},
		{"two targets", nil, cg.ResetTarget{Start: true, Seq: 3}, cg.ErrResetTarget},
		{"none", nil, cg.ResetTarget{}, cg.ErrResetTarget},
		{"negative duration", nil, cg.ResetTarget{Ago: -time.Second}, cg.ErrResetTarget},
	}
	for _, tc := range cases {
		_, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "g", tc.members, tc.t)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.name, err, tc.want)
		}
		if after := states(t, js); !equalStates(before, after) {
			t.Fatalf("%s changed consumers: %+v -> %+v", tc.name, before, after)
		}
	}
	// The last message plus one is the end: allowed, nothing replayed.
	plan, err := c.ResetPlan(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Seq: 31})
	if err != nil || plan.Seq != 31 {
		t.Fatalf("seq 31: %v %+v", err, plan)
	}
	for _, mp := range plan.Members {
		if mp.Again != 0 || mp.Skipped != 0 {
			t.Fatalf("seq 31 plan %+v", mp)
		}
	}
	// A consumer with the member's name that cg did not make is never
	// touched.
	if _, err := c.CreateStatic(ctx, "ORDERS", "h", cg.StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "h-x", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "h", nil, cg.ResetTarget{Start: true}); !errors.Is(err, cg.ErrNotOwned) {
		t.Fatalf("foreign consumer: %v", err)
	}
	cons, err := js.Consumer(ctx, "ORDERS", "h-x")
	if err != nil {
		t.Fatal(err)
	}
	if ci := cons.CachedInfo(); ci.Paused || ci.NumPending != 30 || ci.Delivered.Stream != 0 {
		t.Fatalf("foreign consumer touched: %+v", ci)
	}
	// A work-queue stream keeps nothing acked: refused.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "WQ", Subjects: []string{"wq.*"}, Retention: jetstream.WorkQueuePolicy,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "wq.*", Destination: "{{partition(2,1)}}.wq.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "WQ", "w", cg.StaticConfig{MaxMembers: 2, Filters: []string{">"}, Members: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ResetPlan(ctx, cg.KindStatic, "WQ", "w", nil, cg.ResetTarget{Start: true}); !errors.Is(err, cg.ErrResetUnsupported) {
		t.Fatalf("work-queue stream: %v", err)
	}
	if _, err := c.Reset(ctx, cg.KindElastic, "ORDERS", "g", nil, cg.ResetTarget{Start: true}); !errors.Is(err, cg.ErrGroupNotFound) {
		t.Fatalf("elastic of a static group: %v", err)
	}
}

// A member with no consumer yet only has its saved position moved, and
// starts there; a consumer made that way (to start at a sequence, as one
// made again after inactivity is) cannot be reset below its start: with
// no instance running it is remade at the target, with one running the
// reset is refused and nothing changes.
func TestResetNoConsumerAndRemade(t *testing.T) {
	c, js, ctx := resetGroup(t)
	publishN(t, js, 40)
	res, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "g", []string{"m1"}, cg.ResetTarget{Seq: 21})
	if err != nil {
		t.Fatal(err)
	}
	if mp := res.Members[0]; mp.ConsumerExists || mp.From != 1 || mp.To != 21 || mp.Skipped == 0 || len(res.Paused) != 0 {
		t.Fatalf("plan without a consumer: %+v", res)
	}
	r := &resetRec{got: map[string][]handled{}}
	all := func() []handled { r.mu.Lock(); defer r.mu.Unlock(); return slices.Clone(r.got["m1"]) }
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", r.handler("m1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "m1 handled from 21", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && cons.CachedInfo().NumPending == 0 && cons.CachedInfo().NumAckPending == 0 && len(all()) > 0
	})
	first := all()
	for _, h := range first {
		if h.seq < 21 {
			t.Fatalf("m1 handled %d, before the target 21", h.seq)
		}
	}
	// Running: refused, nothing changed.
	cons, _ := js.Consumer(ctx, "ORDERS", "g-m1")
	before := cons.CachedInfo()
	if _, err := c.Reset(ctx, cg.KindStatic, "ORDERS", "g", []string{"m1"}, cg.ResetTarget{Seq: 5}); !errors.Is(err, cg.ErrResetUnsupported) {
		t.Fatalf("running member below its consumer's start: %v", err)
	}
	cons, _ = js.Consumer(ctx, "ORDERS", "g-m1")
	if after := cons.CachedInfo(); after.AckFloor.Stream != before.AckFloor.Stream || after.Delivered.Stream != before.Delivered.Stream || after.NumPending != before.NumPending || !after.Created.Equal(before.Created) || after.Paused {
		t.Fatalf("refused reset changed the consumer: %+v -> %+v", before, after)
	}
	m.Stop()
	natstest.Eventually(t, 30*time.Second, "m1's instance gone", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && cons.CachedInfo().NumWaiting == 0
	})
	res, err = c.Reset(ctx, cg.KindStatic, "ORDERS", "g", []string{"m1"}, cg.ResetTarget{Seq: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Members[0].Recreate {
		t.Fatalf("want the consumer remade: %+v", res.Members[0])
	}
	r.mu.Lock()
	r.got = map[string][]handled{}
	r.mu.Unlock()
	if _, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", r.handler("m1"), cg.JoinOptions{}); err != nil {
		t.Fatal(err)
	}
	// m1's messages from 5 on: those from 21 it handled before, and
	// earlier ones of its partitions, once each, in order.
	natstest.Eventually(t, 30*time.Second, "m1 handled from 5", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && cons.CachedInfo().NumPending == 0 && cons.CachedInfo().NumAckPending == 0 && len(all()) > 0
	})
	var got []uint64
	for _, h := range all() {
		got = append(got, h.seq)
	}
	for _, h := range first {
		if !slices.Contains(got, h.seq) {
			t.Fatalf("m1 after the remade consumer handled %v, not %d", got, h.seq)
		}
	}
	if got[0] < 5 || !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) || len(got) <= len(first) {
		t.Fatalf("m1 after the remade consumer handled %v (before: %d from 21)", got, len(first))
	}
	cons, _ = js.Consumer(ctx, "ORDERS", "g-m1")
	if cfg := cons.CachedInfo().Config; cfg.OptStartSeq != 5 {
		t.Fatalf("remade consumer starts at %d, want 5", cfg.OptStartSeq)
	}
}
