package cg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ordersStream makes the seed's partition-stamped ORDERS stream.
func ordersStream(t *testing.T, js jetstream.JetStream, name string, n int) {
	t.Helper()
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name:     name,
		Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source:      "orders.*",
			Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}", n),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func setup(t *testing.T) (*server.Server, *cg.Client, jetstream.JetStream) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ordersStream(t, js, "ORDERS", 10)
	return s, cg.New(js), js
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestCreateStaticIdempotentAndDiffers(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	cfg := cg.StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"m1", "m2"}}
	res, err := c.CreateStatic(ctx, "ORDERS", "fulfillment", cfg)
	if err != nil || !res.Created {
		t.Fatalf("create: %v %+v", err, res)
	}
	res, err = c.CreateStatic(ctx, "ORDERS", "fulfillment", cfg)
	if err != nil || res.Created {
		t.Fatalf("identical re-create: %v %+v", err, res)
	}
	other := cfg
	other.Members = []string{"m1", "m3"}
	_, err = c.CreateStatic(ctx, "ORDERS", "fulfillment", other)
	if !errors.Is(err, cg.ErrGroupExists) {
		t.Fatalf("different create: want ErrGroupExists, got %v", err)
	}
	kv, _ := js.KeyValue(ctx, cg.StaticBucket)
	e, err := kv.Get(ctx, "ORDERS.fulfillment")
	if err != nil {
		t.Fatal(err)
	}
	// encoding/json escapes '>' as the reference's own json.Marshal does.
	if got, want := string(e.Value()), `{"max_members":10,"filters":["\u003e"],"members":["m1","m2"]}`; got != want {
		t.Fatalf("stored value %s, want %s", got, want)
	}
	groups, err := c.List(ctx, cg.KindStatic, "ORDERS")
	if err != nil || len(groups) != 1 || groups[0] != "fulfillment" {
		t.Fatalf("list: %v %v", groups, err)
	}
}

func TestCreateStaticRefusesBadStreams(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	c := cg.New(js)
	ctx := ctxT(t)
	ordersStream(t, js, "ORDERS", 8)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.*"}}); err != nil {
		t.Fatal(err)
	}
	cfg := cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}
	for _, tc := range []struct {
		stream string
		want   error
	}{
		{"ORDERS", cg.ErrStreamNotReady}, // partition(8) vs max-members 10
		{"PLAIN", cg.ErrStreamNotReady},
		{"MISSING", cg.ErrStreamNotFound},
	} {
		if _, err := c.CreateStatic(ctx, tc.stream, "g", cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: want %v, got %v", tc.stream, tc.want, err)
		}
	}
	// Nothing was created half-way.
	if _, err := js.KeyValue(ctx, cg.StaticBucket); !errors.Is(err, jetstream.ErrBucketNotFound) {
		t.Fatalf("bucket created by a refused create: %v", err)
	}
}

// counter records messages handled per instance.
type counter struct {
	mu   sync.Mutex
	by   map[string]int
	seqs map[uint64]int
}

func newCounter() *counter { return &counter{by: map[string]int{}, seqs: map[uint64]int{}} }

func (c *counter) handler(name string) cg.Handler {
	return func(_ context.Context, m *cg.Msg) {
		md, _ := m.Metadata()
		c.mu.Lock()
		c.by[name]++
		if md != nil {
			c.seqs[md.Sequence.Stream]++
		}
		c.mu.Unlock()
		_ = m.DoubleAck(context.Background())
	}
}

func (c *counter) get(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[name]
}

func (c *counter) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seqs)
}

func publish(t *testing.T, js jetstream.JetStream, keys []string, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		if _, err := js.Publish(context.Background(), "orders."+keys[i%len(keys)], []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestStaticMemberConsumesOwnPartitionsStripped(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1", "m2"}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string][]string{}
	wrong := 0
	h := func(name string) cg.Handler {
		return func(_ context.Context, m *cg.Msg) {
			mu.Lock()
			got[name] = append(got[name], m.Subject())
			p, _ := partition.PartitionOfSubject(m.Subject(), "orders.*", 10, []int{1})
			if p != m.Partition() {
				wrong++
			}
			mu.Unlock()
			_ = m.Ack()
		}
	}
	var events []cg.Event
	var emu sync.Mutex
	opts := cg.JoinOptions{OnEvent: func(e cg.Event) { emu.Lock(); events = append(events, e); emu.Unlock() }}
	m1, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h("m1"), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Stop()
	m2, err := c.JoinStatic(ctx, "ORDERS", "g", "m2", h("m2"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	keys := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	publish(t, js, keys, 80)
	natstest.Eventually(t, 20*time.Second, "80 messages handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got["m1"])+len(got["m2"]) == 80
	})
	mu.Lock()
	defer mu.Unlock()
	if wrong != 0 {
		t.Fatalf("%d messages reported the wrong partition", wrong)
	}
	for name, subs := range got {
		for _, s := range subs {
			p, _ := partition.PartitionOfSubject(s, "orders.*", 10, []int{1})
			owner := partition.BalancedAssignment([]string{"m1", "m2"}, 10).Owner[p]
			if owner != name {
				t.Fatalf("%s got %s of partition %d owned by %s", name, s, p, owner)
			}
		}
	}
	emu.Lock()
	kinds := map[cg.EventKind]bool{}
	for _, e := range events {
		kinds[e.Kind] = true
	}
	emu.Unlock()
	if !kinds[cg.EventJoined] || !kinds[cg.EventWaiting] || !kinds[cg.EventPinned] {
		t.Fatalf("events seen %v, want joined, waiting and pinned", kinds)
	}
}

func pinOf(t *testing.T, c *cg.Client, member string) string {
	ms, err := c.MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", member)
	if err != nil {
		t.Fatal(err)
	}
	return ms.PinID
}

// twoInstances starts two instances of m1 on their own connections.
func twoInstances(t *testing.T, s *server.Server, cnt *counter, opts cg.JoinOptions) (a, b *cg.Member, ncA, ncB *nats.Conn) {
	t.Helper()
	ctx := ctxT(t)
	ncA = natstest.Connect(t, s)
	ncB = natstest.Connect(t, s)
	ca, _ := cg.NewFromConn(ncA, "")
	cb, _ := cg.NewFromConn(ncB, "")
	var err error
	a, err = ca.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("a"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	b, err = cb.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("b"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Stop)
	return a, b, ncA, ncB
}

func TestStepDownMovesPin(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	a, b, _, _ := twoInstances(t, s, cnt, cg.JoinOptions{})
	publish(t, js, []string{"k1", "k2", "k3"}, 10)
	natstest.Eventually(t, 20*time.Second, "10 handled", func() bool { return cnt.distinct() == 10 })
	first := pinOf(t, c, "m1")
	if first == "" {
		t.Fatal("no pinned instance after traffic")
	}
	if (a.PinID() == first) == (b.PinID() == first) {
		t.Fatalf("exactly one instance should hold pin %s: a=%q b=%q", first, a.PinID(), b.PinID())
	}
	res, err := c.StepDown(ctx, cg.KindStatic, "ORDERS", "g", "m1")
	if err != nil || res.PrevPinID != first {
		t.Fatalf("step-down: %v %+v", err, res)
	}
	// The server pins again when it next has a message to deliver.
	publish(t, js, []string{"k1", "k2", "k3"}, 10)
	natstest.Eventually(t, 20*time.Second, "20 handled", func() bool { return cnt.distinct() == 20 })
	natstest.Eventually(t, 20*time.Second, "a new pin", func() bool { p := pinOf(t, c, "m1"); return p != "" && p != first })
	// The pin moved: a new pin id was issued. Whether the same process wins
	// the new pin is the server's choice; the message flow must continue
	// under the new id and be seen by the instance now holding it.
	second := pinOf(t, c, "m1")
	if a.PinID() != second && b.PinID() != second {
		t.Fatalf("no instance reports the new pin %s (a=%q b=%q)", second, a.PinID(), b.PinID())
	}
}

func TestStandbyTakesOverWhenPinnedConnectionDies(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	_, b, ncA, ncB := twoInstances(t, s, cnt, cg.JoinOptions{})
	publish(t, js, []string{"k1", "k2"}, 5)
	natstest.Eventually(t, 20*time.Second, "5 handled", func() bool { return cnt.distinct() == 5 })
	pinned, standby, nc := "a", "b", ncA
	if b.PinID() != "" {
		pinned, standby, nc = "b", "a", ncB
	}
	nc.Close() // the pinned instance's connection dies without a word
	publish(t, js, []string{"k1", "k2"}, 5)
	natstest.Eventually(t, 20*time.Second, "standby handles the rest", func() bool { return cnt.distinct() == 10 })
	if cnt.get(standby) == 0 {
		t.Fatalf("standby %s handled nothing (pinned %s handled %d)", standby, pinned, cnt.get(pinned))
	}
}

func TestDeleteStaticLeavesOthersAndStopsMembers(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "g-m1", cg.StaticConfig{MaxMembers: 10, Members: []string{"x"}}); err != nil {
		t.Fatal(err)
	}
	// Unrelated consumers whose names start like the group's.
	for _, name := range []string{"g-other", "g-m1-x", "g-m10"} {
		if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: name}); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", newCounter().handler("m1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Consumers) != 1 || res.Consumers[0] != "g-m1" {
		t.Fatalf("deleted %v, want [g-m1]", res.Consumers)
	}
	select {
	case <-m.Done():
		if m.Err() != nil {
			t.Fatalf("member stopped with %v, want a clean stop", m.Err())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("member did not stop after its group was deleted")
	}
	for _, name := range []string{"g-other", "g-m1-x", "g-m10"} {
		if _, err := js.Consumer(ctx, "ORDERS", name); err != nil {
			t.Errorf("unrelated consumer %s gone: %v", name, err)
		}
	}
	if _, err := c.StaticConfig(ctx, "ORDERS", "g-m1"); err != nil {
		t.Errorf("group g-m1 gone: %v", err)
	}
	if _, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g"); !errors.Is(err, cg.ErrGroupNotFound) {
		t.Fatalf("second delete: want ErrGroupNotFound, got %v", err)
	}
}

func TestConfigChangeStopsMemberWithError(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", newCounter().handler("m1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, cg.StaticBucket)
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{"max_members":10,"members":["m1","m2"]}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("member did not stop on a config change")
	}
	if !errors.Is(m.Err(), cg.ErrConfigChanged) {
		t.Fatalf("want ErrConfigChanged, got %v", m.Err())
	}
	// Garbage in KV stops a new member with an error naming the key, no crash.
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{not json`)); err != nil {
		t.Fatal(err)
	}
	_, err = c.JoinStatic(ctx, "ORDERS", "g", "m1", newCounter().handler("m1"), cg.JoinOptions{})
	if !errors.Is(err, cg.ErrInvalidConfig) {
		t.Fatalf("want ErrInvalidConfig, got %v", err)
	}
}

func TestGracefulStopHandsOverAtOnce(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	// A pinned TTL of 60s: without the release on stop, the standby would
	// wait a minute, far past the deadline below.
	a, b, _, _ := twoInstances(t, s, cnt, cg.JoinOptions{AckWait: 60 * time.Second})
	publish(t, js, []string{"k1"}, 3)
	natstest.Eventually(t, 20*time.Second, "3 handled", func() bool { return cnt.distinct() == 3 })
	pinned, standby := a, "b"
	if b.PinID() != "" {
		pinned, standby = b, "a"
	}
	pinned.Stop()
	publish(t, js, []string{"k1"}, 1)
	natstest.Eventually(t, 20*time.Second, "standby handles after release", func() bool { return cnt.get(standby) > 0 })
}

func TestStaticConsumerGoesAwayAndResumesWhereItLeftOff(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	opts := cg.JoinOptions{InactiveThreshold: time.Second}
	cnt := newCounter()
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("first"), opts)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, []string{"a", "b", "c"}, 10)
	natstest.Eventually(t, 20*time.Second, "10 handled", func() bool { return cnt.get("first") == 10 })
	m.Stop()
	// No litter: with every instance gone the server deletes the consumer.
	natstest.Eventually(t, 20*time.Second, "consumer deleted by inactivity", func() bool {
		_, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	publish(t, js, []string{"a", "b", "c"}, 5)
	var reason string
	m, err = c.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("second"), cg.JoinOptions{InactiveThreshold: time.Second, OnEvent: func(e cg.Event) {
		if e.Kind == cg.EventJoined {
			reason = e.Reason
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	// The group did not lose its position: only the 5 new messages.
	natstest.Eventually(t, 20*time.Second, "5 new handled", func() bool { return cnt.get("second") == 5 })
	ms, err := c.MemberInfo(ctx, cg.KindStatic, "ORDERS", "g", "m1")
	if err != nil || ms.Pending != 0 {
		t.Fatalf("member info after resuming: %+v %v", ms, err)
	}
	if cnt.get("second") != 5 || cnt.distinct() != 15 {
		t.Fatalf("second run handled %d (want 5), distinct %d (want 15)", cnt.get("second"), cnt.distinct())
	}
	if !strings.Contains(reason, "resuming after stream sequence 10") {
		t.Fatalf("joined event reason %q", reason)
	}
	// Deleting the group removes the saved position too.
	if _, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g"); err != nil {
		t.Fatal(err)
	}
	kv, _ := js.KeyValue(ctx, cg.PositionsBucket)
	if _, err := kv.Get(ctx, "ORDERS.g.m1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("saved position left behind: %v", err)
	}
}

// TestStaticDefaultThresholdAndCrashResume: a default member consumer is
// not kept forever, and a member whose every instance died without a
// goodbye (its connection cut: no stop, no final save) resumes from the
// position it saved while running once the server removed its consumer.
func TestStaticDefaultThresholdAndCrashResume(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci, err := js.Consumer(ctx, "ORDERS", "g-m1")
	if err != nil {
		t.Fatal(err)
	}
	if got := ci.CachedInfo().Config.InactiveThreshold; got != cg.DefaultInactiveThreshold {
		t.Fatalf("default static consumer: inactive threshold %s, want %s", got, cg.DefaultInactiveThreshold)
	}
	m.Stop()
	// Existing consumers are joined as they are: start over with a short
	// threshold for the crash.
	if err := js.DeleteConsumer(ctx, "ORDERS", "g-m1"); err != nil {
		t.Fatal(err)
	}

	nc, cjs := natstest.JetStream(t, s)
	cnt := newCounter()
	short := cg.JoinOptions{InactiveThreshold: time.Second}
	m, err = cg.New(cjs).JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("first"), short)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	publish(t, js, []string{"a", "b", "c"}, 10)
	natstest.Eventually(t, 20*time.Second, "10 handled", func() bool { return cnt.get("first") == 10 })
	natstest.Eventually(t, 20*time.Second, "position 10 saved while running", func() bool {
		kv, err := js.KeyValue(ctx, cg.PositionsBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(ctx, "ORDERS.g.m1")
		var p cg.Position
		return err == nil && json.Unmarshal(e.Value(), &p) == nil && p.AckFloor == 10
	})
	nc.Close() // the crash: nothing runs on the way out
	natstest.Eventually(t, 20*time.Second, "consumer removed after the crash", func() bool {
		_, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return errors.Is(err, jetstream.ErrConsumerNotFound)
	})
	publish(t, js, []string{"a", "b", "c"}, 5)
	m2, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("second"), short)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	natstest.Eventually(t, 20*time.Second, "5 new handled", func() bool { return cnt.get("second") == 5 })
	if cnt.distinct() != 15 {
		t.Fatalf("distinct %d, want 15", cnt.distinct())
	}
}
