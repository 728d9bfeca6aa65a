package cg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// dynFixture is an elastic group of one layout whose members run with
// dynamic membership, each instance on its own connection.
type dynFixture struct {
	t     *testing.T
	c     *cg.Client
	js    jetstream.JetStream
	s     interface{ ClientURL() string }
	l     *ledger
	emu   sync.Mutex
	evs   []cg.Event
	conns map[*cg.Member]*nats.Conn
}

func dynSetup(t *testing.T, n int, layout cg.Layout) *dynFixture {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: n, Layout: layout,
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	return &dynFixture{t: t, c: c, js: js, s: s, l: newLedger(), conns: map[*cg.Member]*nats.Conn{}}
}

func (f *dynFixture) join(name, member string, timeout time.Duration) (*cg.Member, error) {
	nc, err := nats.Connect(f.s.ClientURL())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	c, _ := cg.NewFromConn(nc, "")
	m, err := c.JoinElastic(ctxT(f.t), "ORDERS", "g", member, f.l.handler(name), cg.JoinOptions{Dynamic: true, SessionTimeout: timeout,
		OnEvent: func(e cg.Event) {
			if e.Kind == cg.EventMemberAdded || e.Kind == cg.EventMemberDropped {
				f.emu.Lock()
				f.evs = append(f.evs, e)
				f.emu.Unlock()
			}
		}})
	if err == nil {
		f.t.Cleanup(m.Stop)
		f.emu.Lock()
		f.conns[m] = nc
		f.emu.Unlock()
	}
	return m, err
}

func (f *dynFixture) mustJoin(name, member string, timeout time.Duration) *cg.Member {
	f.t.Helper()
	m, err := f.join(name, member, timeout)
	if err != nil {
		f.t.Fatal(err)
	}
	return m
}

// kill cuts an instance off as a kill -9 would: its connection closes, no
// clean stop runs.
func (f *dynFixture) kill(m *cg.Member) {
	f.emu.Lock()
	nc := f.conns[m]
	f.emu.Unlock()
	nc.Close()
}

func (f *dynFixture) members() []string {
	cfg, err := f.c.ElasticConfig(context.Background(), "ORDERS", "g")
	if err != nil {
		f.t.Fatal(err)
	}
	names := cfg.MemberNames()
	slices.Sort(names)
	return names
}

func (f *dynFixture) waitMembers(what string, want ...string) {
	f.t.Helper()
	slices.Sort(want)
	natstest.Eventually(f.t, 30*time.Second, what+fmt.Sprintf(": members %v", want), func() bool {
		return slices.Equal(f.members(), want)
	})
}

func (f *dynFixture) drops(peer string) int {
	f.emu.Lock()
	defer f.emu.Unlock()
	n := 0
	for _, e := range f.evs {
		if e.Kind == cg.EventMemberDropped && e.Peer == peer {
			n++
		}
	}
	return n
}

// membershipLog counts, from a watch of the group's entry started now, the
// writes that took each member out of the group.
type membershipLog struct {
	mu      sync.Mutex
	removed map[string]int
}

func watchMembership(t *testing.T, js jetstream.JetStream, bucket string) *membershipLog {
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := kv.Watch(ctx, "ORDERS.g")
	if err != nil {
		t.Fatal(err)
	}
	ml := &membershipLog{removed: map[string]int{}}
	go func() {
		var prev []string
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			var cfg cg.ElasticConfig
			if err := json.Unmarshal(e.Value(), &cfg); err != nil {
				continue
			}
			now := cfg.MemberNames()
			ml.mu.Lock()
			for _, m := range prev {
				if !slices.Contains(now, m) {
					ml.removed[m]++
				}
			}
			ml.mu.Unlock()
			prev = now
		}
	}()
	return ml
}

func (ml *membershipLog) removals(m string) int {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.removed[m]
}

// publishOrders publishes n messages over keys k000…, with the Key and
// per-key Seq headers the ledger reads, carrying on the sequences in seq.
func publishOrders(t *testing.T, js jetstream.JetStream, keys, n int, seq map[string]int) int {
	t.Helper()
	for i := range n {
		key := fmt.Sprintf("k%03d", i%keys)
		seq[key]++
		msg := nats.NewMsg("orders." + key)
		msg.Header.Set("Key", key)
		msg.Header.Set("Seq", strconv.Itoa(seq[key]))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publish did not complete")
	}
	return n
}

func layoutBucket(l cg.Layout) string { return cg.KindElastic.LayoutBucket(l) }

func forLayouts(t *testing.T, f func(t *testing.T, l cg.Layout)) {
	for _, l := range []cg.Layout{cg.LayoutMember, cg.LayoutPartition} {
		t.Run(string(l), func(t *testing.T) { f(t, l) })
	}
}

// Members that join and leave by starting and stopping, under traffic:
// nothing lost, per-key order kept, and a stop of one of two instances of
// a member leaves the member in the group.
func TestDynamicJoinLeaveUnderTraffic(t *testing.T) {
	forLayouts(t, func(t *testing.T, layout cg.Layout) {
		f := dynSetup(t, 6, layout)
		handled := func(who ...string) int {
			f.l.mu.Lock()
			defer f.l.mu.Unlock()
			n := 0
			for _, w := range who {
				n += f.l.byWho[w]
			}
			return n
		}
		pub := startPublisher(t, f.js, 24, 3000, time.Millisecond)
		a := f.mustJoin("a", "a", 0)
		f.waitMembers("a joined", "a")
		natstest.Eventually(t, 20*time.Second, "a handles", func() bool { return handled("a") > 20 })
		a2 := f.mustJoin("a2", "a", 0) // a second instance of a
		b := f.mustJoin("b", "b", 0)
		f.waitMembers("b joined", "a", "b")
		natstest.Eventually(t, 20*time.Second, "b handles", func() bool { return handled("b") > 20 })
		c := f.mustJoin("c", "c", 0)
		f.waitMembers("c joined", "a", "b", "c")
		natstest.Eventually(t, 20*time.Second, "c handles", func() bool { return handled("c") > 20 })

		// One of a's two instances stops: a stays.
		a.Stop()
		before := handled("a", "a2", "b", "c")
		natstest.Eventually(t, 20*time.Second, "traffic goes on after a's first instance stopped", func() bool {
			return handled("a", "a2", "b", "c") > before+60
		})
		if got := f.members(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("after one of a's two instances stopped: members %v, want a b c", got)
		}
		// The last instance of b, then of a, stops: each is dropped, and
		// its partitions are served by those left.
		b.Stop()
		f.waitMembers("b's clean stop drops it", "a", "c")
		a2.Stop()
		f.waitMembers("a's last instance's clean stop drops it", "c")
		n := pub.finish()
		natstest.Eventually(t, 60*time.Second, fmt.Sprintf("all %d handled", n), func() bool { return f.l.distinct() == n })
		c.Stop()
		f.waitMembers("c's clean stop drops it, the group is empty")
		f.l.mu.Lock()
		defer f.l.mu.Unlock()
		if len(f.l.bad) > 0 {
			t.Fatalf("per-key order broken: %v", f.l.bad)
		}
		// Only the message in flight of each handoff may come twice: six
		// membership changes, each moving work off at most three members.
		if f.l.dups > 18 {
			t.Fatalf("%d duplicates, more than the messages in flight at each handoff", f.l.dups)
		}
		if f.drops("b") != 1 || f.drops("a") != 1 || f.drops("c") != 1 {
			t.Fatalf("member_dropped events: b %d, a %d, c %d; want one each", f.drops("b"), f.drops("a"), f.drops("c"))
		}
		t.Logf("%d messages, %d duplicates, by %v", n, f.l.dups, f.l.byWho)
	})
}

// A member whose only instance is killed is dropped by the others once its
// session timeout passed with no sign of it, by exactly one write; its
// partitions are then served by the others; started again, it adds itself
// again.
func TestDynamicKilledMemberIsReapedAndComesBack(t *testing.T) {
	forLayouts(t, func(t *testing.T, layout cg.Layout) {
		f := dynSetup(t, 6, layout)
		const timeout = 2 * time.Second
		f.mustJoin("a", "a", timeout)
		f.mustJoin("b", "b", timeout)
		victim := f.mustJoin("c", "c", timeout)
		f.waitMembers("all joined", "a", "b", "c")
		ml := watchMembership(t, f.js, layoutBucket(layout))
		killed := time.Now()
		f.kill(victim)
		f.waitMembers("c reaped", "a", "b")
		took := time.Since(killed)
		if took < timeout-time.Second { // its last refresh may have come a starved refresh (up to about 1s) before the kill
			t.Fatalf("c dropped %v after the kill, before its session timeout %v", took, timeout)
		}
		// The survivors serve every partition, c's included.
		seq := map[string]int{}
		n := publishOrders(t, f.js, 24, 200, seq)
		natstest.Eventually(t, 30*time.Second, fmt.Sprintf("all %d handled by a and b", n), func() bool { return f.l.distinct() == n })
		natstest.Eventually(t, 10*time.Second, "the drop seen in the watch", func() bool { return ml.removals("c") == 1 })
		if got := f.drops("c"); got != 1 {
			t.Fatalf("%d member_dropped events for c, want exactly 1", got)
		}
		// Give a second reaper every chance to drop it again.
		deadline := time.Now().Add(2 * timeout)
		for time.Now().Before(deadline) {
			if ml.removals("c") > 1 {
				t.Fatalf("c removed %d times", ml.removals("c"))
			}
			time.Sleep(50 * time.Millisecond) // observation interval, not synchronisation
		}
		// c comes back.
		f.mustJoin("c2", "c", timeout)
		f.waitMembers("c back", "a", "b", "c")
		before := f.l.distinct()
		n = publishOrders(t, f.js, 24, 200, seq)
		natstest.Eventually(t, 30*time.Second, "traffic handled with c back", func() bool { return f.l.distinct() == before+n })
		natstest.Eventually(t, 20*time.Second, "c handles again", func() bool {
			f.l.mu.Lock()
			defer f.l.mu.Unlock()
			return f.l.byWho["c2"] > 0
		})
		f.l.mu.Lock()
		defer f.l.mu.Unlock()
		if len(f.l.bad) > 0 {
			t.Fatalf("per-key order broken: %v", f.l.bad)
		}
		t.Logf("kill -> drop %v (session timeout %v)", took, timeout)
	})
}

// Members an operator added are never reaped, whether they never ran
// dynamically, run dynamically, or joined dynamically and were then added
// by the operator.
func TestDynamicOperatorMembersNeverReaped(t *testing.T) {
	f := dynSetup(t, 8, cg.LayoutMember)
	ctx := ctxT(t)
	const timeout = 2 * time.Second
	if _, err := f.c.AddMembers(ctx, "ORDERS", "g", []string{"op", "op2"}, cg.Minimal()); err != nil {
		t.Fatal(err)
	}
	f.mustJoin("a", "a", timeout)
	opDyn := f.mustJoin("op", "op", timeout) // an operator's member running --dynamic
	claimed := f.mustJoin("x", "x", timeout)
	f.waitMembers("a and x joined", "a", "op", "op2", "x")
	if _, err := f.c.AddMembers(ctx, "ORDERS", "g", []string{"x"}, cg.Minimal()); err != nil {
		t.Fatal(err)
	}
	f.kill(opDyn)
	f.kill(claimed)
	// Well past the session timeout: op2 never ran, op and x are gone.
	deadline := time.Now().Add(3 * timeout)
	for time.Now().Before(deadline) {
		if got := f.members(); !slices.Equal(got, []string{"a", "op", "op2", "x"}) {
			t.Fatalf("operator members reaped: members %v", got)
		}
		time.Sleep(100 * time.Millisecond) // observation interval
	}
	if n := f.drops("op") + f.drops("op2") + f.drops("x"); n != 0 {
		t.Fatalf("%d member_dropped events for operator members", n)
	}
	// Info tells the dynamic member from the operator's, and shows when
	// the running one was last seen (the killed ones' records were tidied
	// away once their session timeout passed).
	gi, err := f.c.Info(ctx, cg.KindElastic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range gi.Members {
		dynamic, seen := ms.Member == "a", ms.Member == "a"
		if ms.Dynamic != dynamic || ms.LastSeen.IsZero() == seen {
			t.Errorf("info: %s dynamic %v last seen %v; want dynamic %v, seen %v", ms.Member, ms.Dynamic, ms.LastSeen, dynamic, seen)
		}
	}
	for _, ms := range gi.Members {
		if ms.Member == "a" && time.Since(ms.LastSeen) > 10*time.Second {
			t.Errorf("a, running, last seen %v ago", time.Since(ms.LastSeen))
		}
	}
	// A dynamic one beside them is reaped as usual.
	f.mustJoin("d", "d", timeout)
	dm := f.members()
	if !slices.Contains(dm, "d") {
		t.Fatalf("d not added: %v", dm)
	}
}

// Twenty dynamic members starting at once converge: all twenty in the
// group, every partition owned by one member, each served by one member.
// So do they after a rolling restart of all twenty under traffic, with
// nothing lost and per-key order kept.
func TestDynamicStormConverges(t *testing.T) {
	forLayouts(t, func(t *testing.T, layout cg.Layout) {
		const n = 20
		f := dynSetup(t, n, layout)
		ms := make([]*cg.Member, n)
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ms[i], errs[i] = f.join(fmt.Sprintf("w%02d", i), fmt.Sprintf("w%02d", i), 0)
			}()
		}
		wg.Wait()
		lastStart := time.Now()
		want := make([]string, n)
		for i, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
			want[i] = fmt.Sprintf("w%02d", i)
		}
		f.waitMembers("20 joined at once", want...)
		gaps := watchRefreshGaps(t, f.js)
		natstest.Eventually(t, 60*time.Second, "every partition running on exactly one member", func() bool { return ownedOnce(ms, n) })
		converged := time.Since(lastStart)
		total := publishOrders(t, f.js, 200, 600, map[string]int{})
		natstest.Eventually(t, 90*time.Second, fmt.Sprintf("all %d handled", total), func() bool { return f.l.distinct() == total })
		f.l.mu.Lock()
		if f.l.dups > 0 || len(f.l.bad) > 0 {
			f.l.mu.Unlock()
			t.Fatalf("after convergence: %d duplicates, order %v", f.l.dups, f.l.bad)
		}
		if len(f.l.parts) != n {
			f.l.mu.Unlock()
			t.Fatalf("%d partitions served, want %d", len(f.l.parts), n)
		}
		dups := f.l.dups
		f.l.mu.Unlock()

		// Then a rolling restart of all twenty under traffic, the way a
		// StatefulSet updates its pods: each in turn stops cleanly (its
		// last instance drops it) and starts again (it adds itself).
		pub := startPublisher(t, f.js, 24, 20000, 2*time.Millisecond)
		rollStart := time.Now()
		var stopTook, joinTook []time.Duration
		for i := range n {
			name := fmt.Sprintf("w%02d", i)
			at := time.Now()
			ms[i].Stop()
			stopTook = append(stopTook, time.Since(at))
			at = time.Now()
			ms[i] = f.mustJoin(name+"-restarted", name, 0)
			joinTook = append(joinTook, time.Since(at))
		}
		slices.Sort(stopTook)
		slices.Sort(joinTook)
		lastStart = time.Now()
		f.waitMembers("20 back after a rolling restart", want...)
		natstest.Eventually(t, 60*time.Second, "every partition running on exactly one member after the rolling restart", func() bool { return ownedOnce(ms, n) })
		rolled := time.Since(lastStart)
		sent := pub.finish()
		natstest.Eventually(t, 90*time.Second, fmt.Sprintf("all %d handled", total+sent), func() bool { return f.l.distinct() == total+sent })
		f.l.mu.Lock()
		bad, rolledDups := slices.Clone(f.l.bad), f.l.dups-dups
		f.l.mu.Unlock()
		if len(bad) > 0 {
			t.Fatalf("per-key order broken across the rolling restart: %v", bad)
		}
		t.Logf("20 members started at once: every partition owned once %v after the last start; longest gap between two liveness writes of one instance %v (refresh every 500ms); "+
			"rolling restart of all 20 (stop, start again) in %v under traffic (a stop took %v median, %v at most; a start %v median, %v at most): every partition owned once %v after the last start, %d messages, %d handled twice",
			converged, gaps(), lastStart.Sub(rollStart).Round(time.Millisecond), stopTook[n/2].Round(time.Millisecond), stopTook[n-1].Round(time.Millisecond),
			joinTook[n/2].Round(time.Millisecond), joinTook[n-1].Round(time.Millisecond), rolled, sent, rolledDups)
	})
}

// ownedOnce tells whether the members run all n partitions, each on
// exactly one of them.
func ownedOnce(ms []*cg.Member, n int) bool {
	owned := map[int]int{}
	for _, m := range ms {
		for _, p := range m.Partitions() {
			owned[p]++
		}
	}
	if len(owned) != n {
		return false
	}
	for _, k := range owned {
		if k != 1 {
			return false
		}
	}
	return true
}

// watchRefreshGaps measures, from now on, the longest time between two
// writes of one instance's liveness record as a watcher sees them: what a
// session timeout must allow for.
func watchRefreshGaps(t *testing.T, js jetstream.JetStream) func() time.Duration {
	kv, err := js.KeyValue(context.Background(), cg.DynamicBucket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	w, err := kv.Watch(ctx, "ORDERS.g.*.*", jetstream.UpdatesOnly())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	last := map[string]time.Time{}
	var longest time.Duration
	go func() {
		for e := range w.Updates() {
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
			now := time.Now()
			mu.Lock()
			if at, ok := last[e.Key()]; ok {
				longest = max(longest, now.Sub(at))
			}
			last[e.Key()] = now
			mu.Unlock()
		}
	}()
	return func() time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return longest
	}
}

// Bad dynamic input is refused before anything is written.
func TestDynamicBadInputChangesNothing(t *testing.T) {
	f := dynSetup(t, 2, cg.LayoutMember)
	ctx := ctxT(t)
	if _, err := f.c.AddMembers(ctx, "ORDERS", "g", []string{"p", "q"}); err != nil {
		t.Fatal(err)
	}
	kv, _ := f.js.KeyValue(ctx, cg.ElasticBucket)
	before, _ := kv.Get(ctx, "ORDERS.g")
	h := func(context.Context, *cg.Msg) {}
	var ve *cg.ValidationError
	if _, err := f.c.JoinElastic(ctx, "ORDERS", "g", "m", h, cg.JoinOptions{Dynamic: true, SessionTimeout: time.Second}); !errors.As(err, &ve) {
		t.Fatalf("session timeout below the minimum: %v", err)
	}
	if _, err := f.c.JoinElastic(ctx, "ORDERS", "g", "m", h, cg.JoinOptions{Dynamic: true}); !errors.As(err, &ve) {
		t.Fatalf("join of a full group: %v", err)
	} else {
		t.Log(err)
	}
	if _, err := f.js.KeyValue(ctx, cg.DynamicBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("dynamic bucket made by refused joins: %v", err)
	}
	// Dynamic on a static group.
	if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "s.*", Destination: "{{partition(2,1)}}.s.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.CreateStatic(ctx, "S", "sg", cg.StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.JoinStatic(ctx, "S", "sg", "m1", h, cg.JoinOptions{Dynamic: true}); !errors.As(err, &ve) {
		t.Fatalf("dynamic on a static group: %v", err)
	} else {
		t.Log(err)
	}
	after, _ := kv.Get(ctx, "ORDERS.g")
	if after.Revision() != before.Revision() {
		t.Fatalf("group written by refused joins: revision %d -> %d", before.Revision(), after.Revision())
	}
}
