package cg_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

func elasticSetup(t *testing.T, n int) (*cg.Client, jetstream.JetStream, func() *cg.Client) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: n,
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	// Each instance gets its own connection, as separate processes would.
	fresh := func() *cg.Client {
		nc := natstest.Connect(t, s)
		c, _ := cg.NewFromConn(nc, "")
		return c
	}
	return c, js, fresh
}

// ledger records who handled which key/seq, and when.
type ledger struct {
	mu      sync.Mutex
	seen    map[string]map[int]int // key -> key-seq -> times
	last    map[string]int         // key -> highest key-seq handled
	bad     []string
	dups    int
	byWho   map[string]int
	firstAt map[string]time.Time
	lastAt  map[string]time.Time
	parts   map[int]string // partition -> last handler
}

func newLedger() *ledger {
	return &ledger{seen: map[string]map[int]int{}, last: map[string]int{}, byWho: map[string]int{},
		firstAt: map[string]time.Time{}, lastAt: map[string]time.Time{}, parts: map[int]string{}}
}

func (l *ledger) handler(who string) cg.Handler {
	return func(_ context.Context, m *cg.Msg) {
		key := m.Headers().Get("Key")
		seq, _ := strconv.Atoi(m.Headers().Get("Seq"))
		l.mu.Lock()
		if l.seen[key] == nil {
			l.seen[key] = map[int]int{}
		}
		l.seen[key][seq]++
		switch {
		case l.seen[key][seq] > 1:
			l.dups++
		case seq < l.last[key]:
			l.bad = append(l.bad, fmt.Sprintf("%s: key %s seq %d after %d", who, key, seq, l.last[key]))
		default:
			l.last[key] = seq
		}
		l.byWho[who]++
		now := time.Now()
		if _, ok := l.firstAt[who]; !ok {
			l.firstAt[who] = now
		}
		l.lastAt[who] = now
		l.parts[m.Partition()] = who
		l.mu.Unlock()
		_ = m.DoubleAck(context.Background())
	}
}

func (l *ledger) distinct() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		n += len(s)
	}
	return n
}

// keyedPublisher publishes keyed messages with per-key sequence headers
// until stopped or max is reached.
type keyedPublisher struct {
	stop chan struct{}
	done chan struct{}
	n    int
}

func startPublisher(t *testing.T, js jetstream.JetStream, keys, max int, every time.Duration) *keyedPublisher {
	p := &keyedPublisher{stop: make(chan struct{}), done: make(chan struct{})}
	seq := map[string]int{}
	go func() {
		defer close(p.done)
		for i := 0; i < max; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(every):
			}
			key := fmt.Sprintf("k%02d", i%keys)
			seq[key]++
			msg := nats.NewMsg("orders." + key)
			msg.Header.Set("Key", key)
			msg.Header.Set("Seq", strconv.Itoa(seq[key]))
			if _, err := js.PublishMsg(context.Background(), msg); err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			p.n++
		}
	}()
	return p
}

func (p *keyedPublisher) finish() int {
	close(p.stop)
	<-p.done
	return p.n
}

func TestElasticAddDropWhileTrafficFlows(t *testing.T) {
	c, js, fresh := elasticSetup(t, 6)
	ctx := ctxT(t)
	l := newLedger()
	events := map[string][]cg.Event{}
	var emu sync.Mutex
	start := func(name, member string) *cg.Member {
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", member, l.handler(name), cg.JoinOptions{OnEvent: func(e cg.Event) {
			emu.Lock()
			events[name] = append(events[name], e)
			emu.Unlock()
		}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		return m
	}
	// Members run before they are added: they wait and say why.
	start("m1", "m1")
	start("m1b", "m1") // a standby of m1
	start("m2", "m2")
	start("m3", "m3")
	natstest.Eventually(t, 10*time.Second, "m2 waiting as a non-member", func() bool {
		emu.Lock()
		defer emu.Unlock()
		for _, e := range events["m2"] {
			if e.Kind == cg.EventWaiting && e.Reason == "not a member of the group; waiting to be added" {
				return true
			}
		}
		return false
	})
	pub := startPublisher(t, js, 24, 20000, time.Millisecond)
	handledBy := func(who string) int { l.mu.Lock(); defer l.mu.Unlock(); return l.byWho[who] }

	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m1 handles", func() bool { return handledBy("m1")+handledBy("m1b") > 20 })

	addAt := time.Now()
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m2", "m3"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m2 and m3 handle", func() bool { return handledBy("m2") > 30 && handledBy("m3") > 30 })
	l.mu.Lock()
	addLatency := l.firstAt["m2"].Sub(addAt)
	l.mu.Unlock()

	dropAt := time.Now()
	mc, err := c.DropMembers(ctx, "ORDERS", "g", []string{"m2"})
	if err != nil {
		t.Fatal(err)
	}
	orphans := map[int]bool{}
	for _, mv := range mc.Moves {
		orphans[mv.Partition] = true
	}
	// Drop: every orphaned partition served by a survivor.
	natstest.Eventually(t, 10*time.Second, "orphaned partitions served", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		for p := range orphans {
			if w := l.parts[p]; w == "m2" || w == "" {
				return false
			}
		}
		return true
	})
	dropLatency := time.Since(dropAt)
	survivors := handledBy("m1") + handledBy("m1b") + handledBy("m3")
	natstest.Eventually(t, 10*time.Second, "survivors carry on", func() bool {
		return handledBy("m1")+handledBy("m1b")+handledBy("m3") > survivors+60
	})
	m2Before := handledBy("m2")
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m2"}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 10*time.Second, "m2 back", func() bool { return handledBy("m2") > m2Before+30 })

	n := pub.finish()
	natstest.Eventually(t, 30*time.Second, fmt.Sprintf("all %d handled", n), func() bool { return l.distinct() == n })
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.bad) > 0 {
		t.Fatalf("per-key order broken: %v", l.bad)
	}
	// At most the message in flight of each handoff may be seen twice:
	// 4 membership changes, each moving work off at most 3 members.
	if l.dups > 12 {
		t.Fatalf("%d duplicates, more than the messages in flight at each handoff", l.dups)
	}
	t.Logf("%d messages, %d duplicates, by %v; add->first message at new member %v; drop->orphans served %v", n, l.dups, l.byWho, addLatency, dropLatency)
}

func TestElasticConcurrentAddsAllLand(t *testing.T) {
	c, _, _ := elasticSetup(t, 32)
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{fmt.Sprintf("w%02d", i)}); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	cfg, err := c.ElasticConfig(ctx, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Members) != 20 {
		t.Fatalf("%d members after 20 concurrent adds: %v", len(cfg.Members), cfg.Members)
	}
}

// Adding members that are all there already writes nothing: a new
// revision would wake every running member for no change.
func TestElasticAddOfMembersAlreadyThereWritesNothing(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	first, err := c.AddMembers(ctx, "ORDERS", "g", []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := c.AddMembers(ctx, "ORDERS", "g", []string{"b", "a"})
	if err != nil {
		t.Fatal(err)
	}
	if len(mc.Changed) != 0 || strings.Join(mc.Unchanged, " ") != "b a" || len(mc.Moves) != 0 ||
		mc.Revision != first.Revision || strings.Join(mc.Config.Members, " ") != "a b" {
		t.Fatalf("no-op add: %+v (first add at revision %d)", mc, first.Revision)
	}
	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "ORDERS.g")
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() != first.Revision {
		t.Fatalf("no-op add wrote revision %d after %d", e.Revision(), first.Revision)
	}
	// A mix still adds the new one.
	mc, err = c.AddMembers(ctx, "ORDERS", "g", []string{"a", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(mc.Changed, " ") != "c" || mc.Revision <= first.Revision || len(mc.Moves) == 0 {
		t.Fatalf("add of a new member: %+v", mc)
	}
}

func TestElasticBadConfigKeepsLastGoodAndShapeChangeStops(t *testing.T) {
	c, js, fresh := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	var emu sync.Mutex
	var warnings []string
	l := newLedger()
	m, err := fresh().JoinElastic(ctx, "ORDERS", "g", "m1", l.handler("m1"), cg.JoinOptions{OnEvent: func(e cg.Event) {
		// Only the configuration warnings: under load a pull may warn too.
		if e.Kind == cg.EventWarning && strings.Contains(e.Reason, "unusable configuration") {
			emu.Lock()
			warnings = append(warnings, e.Reason)
			emu.Unlock()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	kv, _ := js.KeyValue(ctx, cg.ElasticBucket)
	// One bad value at a time: a watch promises the latest value of a key,
	// not every revision (the bucket keeps one per key), so values written
	// back to back may be skipped by a watcher that is behind.
	for _, bad := range []struct{ value, says string }{
		{`{not json`, "not valid JSON"},
		{`{"max_members":0}`, "max_members 0"},
		{`{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[7]}]}`, "wildcard index 7"},
		// Filters no consumer could be made with (server errors 10052 and
		// 10138): invalid too, not a shape change that stops the member.
		{`{"max_members":4,"partitioning_filters":[{"filter":"ord ers.*","partitioning_wildcards":[1]}],"members":["m1"]}`, "must not contain white space"},
		{`{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]},{"filter":"orders.>","partitioning_wildcards":[]}],"members":["m1"]}`, "overlap"},
	} {
		if _, err := kv.Put(ctx, "ORDERS.g", []byte(bad.value)); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 10*time.Second, "a warning saying "+bad.says, func() bool {
			emu.Lock()
			defer emu.Unlock()
			return slices.ContainsFunc(warnings, func(w string) bool { return strings.Contains(w, bad.says) })
		})
	}
	// Still consuming with the last good configuration.
	pub := startPublisher(t, js, 4, 20, time.Millisecond)
	n := pub.finish()
	natstest.Eventually(t, 10*time.Second, "traffic handled on the last good config", func() bool { return l.distinct() == n })
	// A changed partition count stops members with an error.
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{"max_members":8,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}],"members":["m1"]}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("member kept running after the partition count changed")
	}
	if !errors.Is(m.Err(), cg.ErrConfigChanged) {
		t.Fatalf("want ErrConfigChanged, got %v", m.Err())
	}
	emu.Lock()
	defer emu.Unlock()
	for _, w := range warnings {
		if !strings.Contains(w, "ORDERS.g") {
			t.Errorf("warning does not name the key: %s", w)
		}
	}
}
