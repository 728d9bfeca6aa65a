package cg_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// relayoutRig is a group of two members, m1 and m2, over 10 partitions of
// ORDERS, with a ledger of what their instances handled.
type relayoutRig struct {
	t     *testing.T
	k     cg.Kind
	c     *cg.Client
	js    jetstream.JetStream
	fresh func() *cg.Client
	l     *ledger
	n     int // messages published
}

func newRelayoutRig(t *testing.T, k cg.Kind) *relayoutRig {
	t.Helper()
	r := &relayoutRig{t: t, k: k, l: newLedger()}
	if k == cg.KindStatic {
		s, c, js := setup(t)
		if _, err := c.CreateStatic(ctxT(t), "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1", "m2"}}); err != nil {
			t.Fatal(err)
		}
		r.c, r.js = c, js
		r.fresh = func() *cg.Client { cl, _ := cg.NewFromConn(natstest.Connect(t, s), ""); return cl }
	} else {
		c, js, fresh := elasticSetup(t, 10)
		if _, err := c.AddMembers(ctxT(t), "ORDERS", "g", []string{"m1", "m2"}); err != nil {
			t.Fatal(err)
		}
		r.c, r.js, r.fresh = c, js, fresh
	}
	return r
}

// publish preloads n messages over 40 keys, with per-key sequences.
func (r *relayoutRig) publish(n int) {
	r.t.Helper()
	p := startPublisher(r.t, r.js, 40, n, 0)
	<-p.done
	if p.n != n {
		r.t.Fatalf("published %d of %d", p.n, n)
	}
	r.n = n
}

// consume runs an instance of each member until the group has handled
// until distinct messages, then stops them.
func (r *relayoutRig) consume(until int) {
	r.t.Helper()
	ctx := ctxT(r.t)
	slow := func(h cg.Handler) cg.Handler {
		return func(ctx context.Context, m *cg.Msg) {
			time.Sleep(2 * time.Millisecond) // a handler's work, so that a stop lands mid-backlog
			h(ctx, m)
		}
	}
	var ms []*cg.Member
	for _, member := range []string{"m1", "m2"} {
		m, err := r.fresh().Join(ctx, r.k, "ORDERS", "g", member, slow(r.l.handler(member)), cg.JoinOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		r.t.Cleanup(m.Stop)
		ms = append(ms, m)
	}
	natstest.Eventually(r.t, 60*time.Second, fmt.Sprintf("%d messages handled", until), func() bool { return r.l.distinct() >= until })
	for _, m := range ms {
		m.Stop()
	}
}

// relayout waits for the stopped instances' pulls to expire, then moves
// the group.
func (r *relayoutRig) relayout(to cg.Layout) cg.RelayoutPlan {
	r.t.Helper()
	ctx := ctxT(r.t)
	natstest.Eventually(r.t, 20*time.Second, "no instance left on the group's consumers", func() bool {
		_, err := r.c.RelayoutPlan(ctx, r.k, "ORDERS", "g", to)
		if err != nil && !errors.Is(err, cg.ErrGroupRunning) {
			r.t.Fatal(err)
		}
		return err == nil
	})
	done, err := r.c.Relayout(ctx, r.k, "ORDERS", "g", to)
	if err != nil {
		r.t.Fatal(err)
	}
	if done.From == to || done.To != to || len(done.New) == 0 {
		r.t.Fatalf("relayout to %s: %+v", to, done)
	}
	r.checkLayout(to)
	return done
}

// checkLayout asserts the group is stored under l alone and has only l's
// consumers.
func (r *relayoutRig) checkLayout(l cg.Layout) {
	r.t.Helper()
	ctx := ctxT(r.t)
	cfg, err := r.c.Config(ctx, r.k, "ORDERS", "g")
	if err != nil || cg.LayoutOfConfig(cfg) != l {
		r.t.Fatalf("config after the move: %+v %v", cfg, err)
	}
	// The other layout's bucket no longer holds it: a reference member,
	// which reads only the member layout's bucket, finds no group.
	otherKV, err := r.js.KeyValue(ctx, r.k.LayoutBucket(otherOf(l)))
	if err == nil {
		if _, err := otherKV.Get(ctx, "ORDERS.g"); !errors.Is(err, jetstream.ErrKeyNotFound) {
			r.t.Fatalf("the %s layout's bucket still holds the group: %v", otherOf(l), err)
		}
	}
	names := relayoutConsumers(r.t, r.js, r.k.WorkStream("ORDERS", "g"))
	for _, n := range names {
		isPart := strings.HasPrefix(n, "g-p")
		if (l == cg.LayoutPartition) != isPart {
			r.t.Fatalf("consumers after the move to %s: %v", l, names)
		}
	}
}

func otherOf(l cg.Layout) cg.Layout {
	if l == cg.LayoutPartition {
		return cg.LayoutMember
	}
	return cg.LayoutPartition
}

func relayoutConsumers(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), stream)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for ci := range s.ListConsumers(context.Background()).Info() {
		if !strings.HasPrefix(ci.Config.Description, "cg reset count") {
			out = append(out, ci.Name)
		}
	}
	sort.Strings(out)
	return out
}

// finish checks every message was handled at least once, per-key in
// order, and that what was handled twice is within what the plans said
// may be.
func (r *relayoutRig) finish(plans ...cg.RelayoutPlan) {
	r.t.Helper()
	r.consume(r.n)
	r.l.mu.Lock()
	defer r.l.mu.Unlock()
	if len(r.l.bad) > 0 {
		r.t.Fatalf("order violations: %v", r.l.bad)
	}
	var again uint64
	for _, p := range plans {
		for _, n := range p.New {
			again += n.Again
		}
		for _, o := range p.Old {
			again += uint64(max(o.AckPending, 0))
		}
	}
	r.t.Logf("%d messages, %d handled twice, %d said to be possibly handled again", r.n, r.l.dups, again)
	if uint64(r.l.dups) > again {
		r.t.Fatalf("%d messages handled twice, but the plans said at most %d", r.l.dups, again)
	}
}

// A group moved there and back while stopped: every message is handled,
// none is lost, the rest in per-key order, and what is handled twice is
// what the plans counted.
func TestRelayoutBothWaysKeepsPosition(t *testing.T) {
	for _, k := range cg.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			r := newRelayoutRig(t, k)
			r.publish(600)
			r.consume(150)
			p1 := r.relayout(cg.LayoutPartition)
			if len(p1.New) != 10 || len(p1.Old) != 2 {
				t.Fatalf("member->partition plan: %d new, %d old: %+v", len(p1.New), len(p1.Old), p1)
			}
			if k == cg.KindStatic {
				for _, n := range p1.New {
					if !n.Create || n.Start < 2 {
						t.Fatalf("partition consumer not made after its owner's floor: %+v", n)
					}
				}
			}
			r.consume(350)
			p2 := r.relayout(cg.LayoutMember)
			if len(p2.New) != 2 {
				t.Fatalf("partition->member plan: %+v", p2)
			}
			r.finish(p1, p2)
		})
	}
}

// relayoutState is what a refused relayout must leave as it was: the
// consumers (with their positions and settings) and every stored group
// and saved position.
func relayoutState(t *testing.T, js jetstream.JetStream, k cg.Kind) string {
	t.Helper()
	ctx := context.Background()
	var b strings.Builder
	s, err := js.Stream(ctx, k.WorkStream("ORDERS", "g"))
	if err != nil {
		t.Fatal(err)
	}
	var cis []string
	for ci := range s.ListConsumers(ctx).Info() {
		if ci.Config.Description == "cg reset count" {
			continue
		}
		cis = append(cis, fmt.Sprintf("%s floor=%d start=%d filters=%v%s md=%v", ci.Name, ci.AckFloor.Stream, ci.Config.OptStartSeq, ci.Config.FilterSubjects, ci.Config.FilterSubject, ci.Config.Metadata))
	}
	sort.Strings(cis)
	b.WriteString(strings.Join(cis, "\n"))
	for _, bucket := range []string{k.Bucket(), k.LayoutBucket(cg.LayoutPartition), cg.PositionsBucket} {
		// A bucket is shared by every group of its layout: only the
		// group's entries count (a failed relayout may leave the new
		// layout's bucket made, and empty, as a create would).
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			continue
		}
		keys, _ := kv.Keys(ctx)
		slices.Sort(keys)
		for _, key := range keys {
			e, err := kv.Get(ctx, key)
			if err == nil {
				v := string(e.Value())
				if bucket == cg.PositionsBucket {
					v = v[:strings.Index(v, ",")] // the floor, not the time saved
				}
				fmt.Fprintf(&b, "\n%s %s=%s", bucket, key, v)
			}
		}
	}
	return b.String()
}

// Refusals change nothing: a running instance, a consumer the group did
// not make under a name the new layout needs, an unreadable stored
// configuration, an unknown layout; a failure part-way undoes what was
// made.
func TestRelayoutRefusalsChangeNothing(t *testing.T) {
	r := newRelayoutRig(t, cg.KindStatic)
	ctx := ctxT(t)
	r.publish(100)
	r.consume(30)
	before := relayoutState(t, r.js, cg.KindStatic)
	refused := func(what string, want error, to cg.Layout) {
		t.Helper()
		_, perr := r.c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", to)
		_, err := r.c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", to)
		if !errors.Is(err, want) || !errors.Is(perr, want) || strings.Contains(err.Error(), "\n") {
			t.Fatalf("%s: plan %v, relayout %v, want %v on one line", what, perr, err, want)
		}
		if after := relayoutState(t, r.js, cg.KindStatic); after != before {
			t.Fatalf("%s changed the server:\nbefore\n%s\nafter\n%s", what, before, after)
		}
	}

	refused("an unknown layout", cg.ErrLayout, "sideways")
	refused("no layout", cg.ErrLayout, "")

	m, err := r.fresh().Join(ctx, cg.KindStatic, "ORDERS", "g", "m2", r.l.handler("m2"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m2 pulling", func() bool {
		ms, err := r.c.MemberInfo(ctx, cg.KindStatic, "ORDERS", "g", "m2")
		return err == nil && ms.Active
	})
	before = relayoutState(t, r.js, cg.KindStatic)
	_, err = r.c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
	if !errors.Is(err, cg.ErrGroupRunning) || !strings.Contains(err.Error(), "g-m2") || !strings.Contains(err.Error(), "member(s) m2") {
		t.Fatalf("relayout while m2 runs: %v", err)
	}
	m.Stop()
	natstest.Eventually(t, 20*time.Second, "m2's pulls expired", func() bool {
		_, err := r.c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
		return err == nil
	})
	before = relayoutState(t, r.js, cg.KindStatic)

	// A consumer of someone else's under partition 3's consumer name.
	if _, err := r.js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "g-p3", FilterSubject: "3.>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	before = relayoutState(t, r.js, cg.KindStatic)
	refused("a foreign consumer named g-p3", cg.ErrNotOwned, cg.LayoutPartition)
	if err := r.js.DeleteConsumer(ctx, "ORDERS", "g-p3"); err != nil {
		t.Fatal(err)
	}
	before = relayoutState(t, r.js, cg.KindStatic)

	// A failure at each step before the old configuration is removed
	// undoes what the relayout had made.
	for _, step := range []string{"positions", "consumers", "config", "old-config"} {
		cg.SetRelayoutStep(func(s string) error {
			if s == step {
				return errors.New("injected failure at " + s)
			}
			return nil
		}, false)
		_, err := r.c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
		cg.SetRelayoutStep(nil, false)
		if err == nil || !strings.Contains(err.Error(), "injected failure at "+step) || !strings.Contains(err.Error(), "as it was") {
			t.Fatalf("failure at %s: %v", step, err)
		}
		if after := relayoutState(t, r.js, cg.KindStatic); after != before {
			t.Fatalf("failure at %s left changes:\nbefore\n%s\nafter\n%s", step, before, after)
		}
	}

	// Stored under both layouts with different configurations: no
	// relayout left part-way, and which is meant cannot be told.
	pkv, err := r.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.StaticPartitionBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pkv.Put(ctx, "ORDERS.g", []byte(`{"max_members":10,"members":["m1"],"layout":"partition"}`)); err != nil {
		t.Fatal(err)
	}
	before = relayoutState(t, r.js, cg.KindStatic)
	refused("two different stored configurations", cg.ErrInvalidConfig, cg.LayoutPartition)
	refused("two different stored configurations", cg.ErrInvalidConfig, cg.LayoutMember)
	if err := pkv.Purge(ctx, "ORDERS.g"); err != nil {
		t.Fatal(err)
	}

	// A stored value cg cannot read.
	kv, err := r.js.KeyValue(ctx, cg.StaticBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.g", []byte("{not json")); err != nil {
		t.Fatal(err)
	}
	before = relayoutState(t, r.js, cg.KindStatic)
	refused("an unreadable configuration", cg.ErrInvalidConfig, cg.LayoutPartition)
}

// A relayout that dies part-way is finished by running it again: after
// the new configuration is written (both layouts' buckets hold the group;
// readers keep the member layout's) and after the old configuration is
// removed (the old consumers are left). Nothing is lost either way.
func TestRelayoutCrashThenRerunFinishes(t *testing.T) {
	for _, step := range []string{"old-config", "old-consumers"} {
		t.Run(step, func(t *testing.T) {
			r := newRelayoutRig(t, cg.KindStatic)
			ctx := ctxT(t)
			r.publish(300)
			r.consume(100)
			natstest.Eventually(t, 20*time.Second, "pulls expired", func() bool {
				_, err := r.c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
				return err == nil
			})
			cg.SetRelayoutStep(func(s string) error {
				if s == step {
					return errors.New("killed at " + s)
				}
				return nil
			}, true)
			crashed, err := r.c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
			cg.SetRelayoutStep(nil, false)
			if err == nil {
				t.Fatal("the injected crash did not stop the relayout")
			}
			names := relayoutConsumers(t, r.js, "ORDERS")
			if !slices.Contains(names, "g-m1") || !slices.Contains(names, "g-p0") {
				t.Fatalf("after the crash at %s: consumers %v, want both layouts'", step, names)
			}
			if step == "old-config" {
				cfg, err := r.c.Config(ctx, cg.KindStatic, "ORDERS", "g")
				if err != nil || cg.LayoutOfConfig(cfg) != cg.LayoutMember {
					t.Fatalf("readers after a crash with both entries: %+v %v, want the member layout's", cfg, err)
				}
			}
			plan, err := r.c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
			if err != nil {
				t.Fatal(err)
			}
			if plan.Nothing {
				t.Fatalf("re-run plan after a crash at %s: nothing to do %+v", step, plan)
			}
			done, err := r.c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
			if err != nil {
				t.Fatal(err)
			}
			r.checkLayout(cg.LayoutPartition)
			again, err := r.c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
			if err != nil || !again.Nothing {
				t.Fatalf("a third run: %+v %v, want nothing to do", again, err)
			}
			r.finish(crashed, done)
		})
	}
}

var floors = regexp.MustCompile(`floor=\d+ `)

// An elastic group: refused while an instance runs, changing nothing; a
// member dropped while its consumer is still on the work stream has that
// consumer removed too (the work stream would refuse a partition consumer
// beside it); nothing is lost.
func TestRelayoutElasticRunningAndDropped(t *testing.T) {
	r := newRelayoutRig(t, cg.KindElastic)
	ctx := ctxT(t)
	r.publish(200)
	r.consume(60)
	m, err := r.fresh().Join(ctx, cg.KindElastic, "ORDERS", "g", "m1", r.l.handler("m1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m1 pulling", func() bool {
		ms, err := r.c.MemberInfo(ctx, cg.KindElastic, "ORDERS", "g", "m1")
		return err == nil && ms.Active
	})
	m.Stop() // what it handled counts; the refusal is tried on a fresh instance below
	m, err = r.fresh().Join(ctx, cg.KindElastic, "ORDERS", "g", "m1", r.l.handler("m1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m1 pulling again", func() bool {
		ms, err := r.c.MemberInfo(ctx, cg.KindElastic, "ORDERS", "g", "m1")
		return err == nil && ms.Active
	})
	// m1 goes on handling: its consumer's floor moves, the rest must not.
	shape := func() string { return floors.ReplaceAllString(relayoutState(t, r.js, cg.KindElastic), "") }
	before := shape()
	if _, err := r.c.Relayout(ctx, cg.KindElastic, "ORDERS", "g", cg.LayoutPartition); !errors.Is(err, cg.ErrGroupRunning) || !strings.Contains(err.Error(), "member(s) m1") {
		t.Fatalf("relayout while m1 runs: %v", err)
	}
	after := shape()
	m.Stop()
	if after != before {
		t.Fatalf("a refused relayout changed the server:\nbefore\n%s\nafter\n%s", before, after)
	}
	if _, err := r.c.DropMembers(ctx, "ORDERS", "g", []string{"m2"}); err != nil {
		t.Fatal(err)
	}
	ws := cg.WorkStreamName("ORDERS", "g")
	if !slices.Contains(relayoutConsumers(t, r.js, ws), "m2") {
		t.Fatalf("m2's consumer gone before the relayout: %v", relayoutConsumers(t, r.js, ws))
	}
	p := r.relayout(cg.LayoutPartition)
	found := false
	for _, o := range p.Old {
		found = found || o.Consumer == "m2"
	}
	if !found {
		t.Fatalf("the dropped member's consumer is not in the plan: %+v", p.Old)
	}
	r.finish(p)
}

// A message parked on the member layout stays parked across a move to the
// partition layout: the poison report still lists it, its key's later
// messages still wait behind it, and a release through the member lets it
// and them be handled, in order.
func TestRelayoutKeepsParkedMessages(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	l := newLedger()
	h := l.handler("m1")
	failing := "orders.k03/2"
	var mu sync.Mutex
	join := func() *cg.Member {
		cl, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		m, err := cl.JoinStatic(ctx, "ORDERS", "g", "m1", func(ctx context.Context, msg *cg.Msg) {
			mu.Lock()
			bad := msg.Subject()+"/"+msg.Headers().Get("Seq") == failing
			mu.Unlock()
			if bad {
				_ = msg.Nak()
				return
			}
			h(ctx, msg)
		}, cg.JoinOptions{Concurrency: 4, Retry: &cg.RetryPolicy{MaxDeliver: 2, OnPoison: cg.PoisonPark}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m
	}
	m := join()
	pub := startPublisher(t, js, 10, 100, 0)
	<-pub.done
	// Concurrency: one consumer serves every partition, and a parked
	// message holds its slot; lanes keep only its key behind it.
	natstest.Eventually(t, 30*time.Second, "all but k03's 9 from seq 2 handled", func() bool { return l.distinct() == pub.n-9 })
	m.Stop()
	parked := func() int {
		rep, err := c.Poison(ctx, cg.KindStatic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mp := range rep.Members {
			n += len(mp.Parked)
		}
		return n
	}
	if parked() != 1 {
		t.Fatalf("parked before the move: %d, want 1", parked())
	}
	natstest.Eventually(t, 20*time.Second, "m1's pulls expired", func() bool {
		_, err := c.RelayoutPlan(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition)
		return err == nil
	})
	if _, err := c.Relayout(ctx, cg.KindStatic, "ORDERS", "g", cg.LayoutPartition); err != nil {
		t.Fatal(err)
	}
	if parked() != 1 {
		t.Fatalf("parked after the move: %d, want 1", parked())
	}
	join()
	// Held behind the parked one still: nothing of k03 from seq 2 on.
	p, _ := partition.PartitionOfSubject("orders.k03", "orders.*", 10, []int{1})
	natstest.Eventually(t, 10*time.Second, "the parked message held again on its partition's consumer", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", cg.PartitionConsumerName("g", p))
		return err == nil && cons.CachedInfo().NumAckPending >= 1
	})
	if n := l.distinct(); n != pub.n-9 {
		t.Fatalf("%d handled after the move, want %d (k03 held behind its parked message)", n, pub.n-9)
	}
	mu.Lock()
	failing = ""
	mu.Unlock()
	if _, err := c.Release(ctx, cg.KindStatic, "ORDERS", "g", "m1", cg.ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "every message handled after the release", func() bool { return l.distinct() == pub.n })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("order violations %v", l.bad)
	}
}
