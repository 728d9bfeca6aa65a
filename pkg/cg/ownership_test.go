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

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// serverState is what a refused command must leave unchanged: every
// stream with its config, every consumer, every stored group.
type serverState struct {
	streams   map[string]string // name -> config JSON
	consumers map[string]string // stream/name -> config JSON
	keys      map[string]uint64 // bucket/key -> revision
}

func snapshot(t *testing.T, js jetstream.JetStream) serverState {
	t.Helper()
	ctx := ctxT(t)
	st := serverState{streams: map[string]string{}, consumers: map[string]string{}, keys: map[string]uint64{}}
	lister := js.ListStreams(ctx)
	for si := range lister.Info() {
		raw, _ := json.Marshal(si.Config)
		st.streams[si.Config.Name] = string(raw)
		s, err := js.Stream(ctx, si.Config.Name)
		if err != nil {
			t.Fatal(err)
		}
		for ci := range s.ListConsumers(ctx).Info() {
			raw, _ := json.Marshal(ci.Config)
			st.consumers[si.Config.Name+"/"+ci.Name] = string(raw)
		}
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{cg.StaticBucket, cg.ElasticBucket} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			continue
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			st.keys[b+"/"+k] = e.Revision()
		}
	}
	return st
}

func sameState(t *testing.T, what string, before, after serverState) {
	t.Helper()
	diff := func(kind string, a, b map[string]string) {
		for k, v := range a {
			if b[k] != v {
				t.Errorf("%s: %s %s changed or vanished", what, kind, k)
			}
		}
		for k := range b {
			if _, ok := a[k]; !ok {
				t.Errorf("%s: %s %s appeared", what, kind, k)
			}
		}
	}
	diff("stream", before.streams, after.streams)
	diff("consumer", before.consumers, after.consumers)
	for k, v := range before.keys {
		if after.keys[k] != v {
			t.Errorf("%s: KV entry %s changed or vanished", what, k)
		}
	}
	for k := range after.keys {
		if _, ok := before.keys[k]; !ok {
			t.Errorf("%s: KV entry %s appeared", what, k)
		}
	}
}

func wantErrNaming(t *testing.T, what string, err error, sentinel error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want an error", what)
	}
	if !errors.Is(err, sentinel) {
		t.Errorf("%s: error %q does not wrap %v", what, err, sentinel)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func ordersFilter() []cg.PartitioningFilter {
	return []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}
}

func TestOwnershipStaticNameClashRefused(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "a", cg.StaticConfig{MaxMembers: 10, Members: []string{"b-m1", "x"}}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	_, err := c.CreateStatic(ctx, "ORDERS", "a-b", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}})
	wantErrNaming(t, "create a-b/m1 next to a/b-m1", err, cg.ErrNameClash, `"a-b"`, `"a"`, "a-b-m1")
	sameState(t, "refused clash", before, snapshot(t, js))
	// The other way round too, and with mappings.
	if _, err := c.CreateStatic(ctx, "ORDERS", "p", cg.StaticConfig{MaxMembers: 10, MemberMappings: []partition.MemberMapping{{Member: "m1", Partitions: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}}}}); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, js)
	_, err = c.CreateStatic(ctx, "ORDERS", "p-m", cg.StaticConfig{MaxMembers: 10, Members: []string{"1"}})
	if err != nil {
		t.Fatalf("p-m/1 gives p-m-1, no clash with p-m1: %v", err)
	}
	_, err = c.CreateStatic(ctx, "ORDERS", "", cg.StaticConfig{MaxMembers: 10, Members: []string{"1"}})
	if err == nil {
		t.Fatal("empty group accepted")
	}
	_ = before
}

func TestOwnershipStaticClashWithLiveConsumer(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	// A consumer named a-b-m1 exists on the stream, made by a user.
	if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "a-b-m1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	_, err := c.CreateStatic(ctx, "ORDERS", "a-b", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}})
	wantErrNaming(t, "create over a user's consumer", err, cg.ErrNotOwned, "a-b-m1", `"a-b"`)
	sameState(t, "refused foreign consumer", before, snapshot(t, js))
}

func TestOwnershipElasticNameClashRefused(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	for _, st := range []jetstream.StreamConfig{{Name: "A1", Subjects: []string{"a1.*"}}, {Name: "A1-b", Subjects: []string{"a1b.*"}}} {
		if _, err := js.CreateStream(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	c := cg.New(js)
	if _, err := c.CreateElastic(ctx, "A1", "b-c", cg.ElasticConfig{MaxMembers: 4}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	_, err := c.CreateElastic(ctx, "A1-b", "c", cg.ElasticConfig{MaxMembers: 4})
	wantErrNaming(t, "create A1-b/c next to A1/b-c", err, cg.ErrNameClash, `"c"`, `"b-c"`, "A1-b-c")
	sameState(t, "refused elastic clash", before, snapshot(t, js))

	// With the work stream lost, the stored group still claims the name.
	if err := js.DeleteStream(ctx, "A1-b-c"); err != nil {
		t.Fatal(err)
	}
	before = snapshot(t, js)
	_, err = c.CreateElastic(ctx, "A1-b", "c", cg.ElasticConfig{MaxMembers: 4})
	wantErrNaming(t, "create A1-b/c next to A1/b-c without its work stream", err, cg.ErrNameClash, `"b-c"`)
	sameState(t, "refused elastic clash, no work stream", before, snapshot(t, js))
}

// A user's own stream called <stream>-<group> is never adopted, changed
// or deleted, messages and all.
func TestOwnershipElasticUserStreamNotAdopted(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS-g", Subjects: []string{"mine.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := js.Publish(ctx, fmt.Sprintf("mine.%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	c := cg.New(js)
	before := snapshot(t, js)
	_, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter()})
	wantErrNaming(t, "create over a user's stream", err, cg.ErrNotOwned, "ORDERS-g", `"g"`, "work-queue")
	sameState(t, "refused adoption", before, snapshot(t, js))

	// A group stored by someone else (the reference, an older cg) over that
	// stream: delete removes the entry and keeps the stream, saying so.
	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.ElasticBucket})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}]}`)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Delete(ctx, cg.KindElastic, "ORDERS", "g")
	if err != nil {
		t.Fatalf("delete: %v", err)
	}
	if res.WorkStream != "" || len(res.Kept) != 1 || !strings.Contains(res.Kept[0], "ORDERS-g") {
		t.Errorf("delete result %+v: want the work stream kept and reported", res)
	}
	si, err := js.Stream(ctx, "ORDERS-g")
	if err != nil {
		t.Fatalf("the user's stream was deleted: %v", err)
	}
	if n := si.CachedInfo().State.Msgs; n != 5 {
		t.Errorf("the user's stream holds %d messages, want 5", n)
	}
}

// A consumer <group>-<member> that belongs to another group (the clash
// made by hand, or by the reference, which does not check) is kept.
func TestOwnershipStaticDeleteKeepsOtherGroupsConsumer(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "a", cg.StaticConfig{MaxMembers: 10, Members: []string{"b-m1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "a", "b-m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	ci, err := js.Consumer(ctx, "ORDERS", "a-b-m1")
	if err != nil {
		t.Fatal(err)
	}
	md := ci.CachedInfo().Config.Metadata
	if md["cg.kind"] != "static" || md["cg.stream"] != "ORDERS" || md["cg.group"] != "a" || md["cg.member"] != "b-m1" {
		t.Errorf("member consumer marks %v", md)
	}
	kv, err := js.KeyValue(ctx, cg.StaticBucket)
	if err != nil {
		t.Fatal(err)
	}
	// Group a-b with member m1, stored without cg's clash check.
	if _, err := kv.Put(ctx, "ORDERS.a-b", []byte(`{"max_members":10,"filters":[">"],"members":["m1"]}`)); err != nil {
		t.Fatal(err)
	}
	res, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "a-b")
	if err != nil {
		t.Fatalf("delete a-b: %v", err)
	}
	if len(res.Consumers) != 0 || len(res.Kept) != 1 || !strings.Contains(res.Kept[0], "a-b-m1") {
		t.Errorf("delete a-b result %+v: want a-b-m1 kept and reported", res)
	}
	if _, err := js.Consumer(ctx, "ORDERS", "a-b-m1"); err != nil {
		t.Fatalf("group a's consumer was deleted with group a-b: %v", err)
	}
}

func TestOwnershipWorkStreamMarked(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	s, err := js.Stream(ctx, "ORDERS-g")
	if err != nil {
		t.Fatal(err)
	}
	md := s.CachedInfo().Config.Metadata
	if md["cg.kind"] != "elastic" || md["cg.stream"] != "ORDERS" || md["cg.group"] != "g" {
		t.Errorf("work stream marks %v", md)
	}
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinElastic(ctx, "ORDERS", "g", "m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 10*time.Second, "m1's consumer, marked", func() bool {
		ci, err := js.Consumer(ctx, "ORDERS-g", "m1")
		if err != nil {
			return false
		}
		md := ci.CachedInfo().Config.Metadata
		return md["cg.kind"] == "elastic" && md["cg.stream"] == "ORDERS" && md["cg.group"] == "g" && md["cg.member"] == "m1"
	})
}

// Identical concurrent creates all succeed, exactly one creates, and the
// group ends with both its entry and its work stream.
func TestOwnershipConcurrentIdenticalElasticCreates(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	const creators, rounds = 8, 12
	clients := make([]*cg.Client, creators)
	for i := range clients {
		nc := natstest.Connect(t, s)
		clients[i], _ = cg.NewFromConn(nc, "")
	}
	deadline := time.Now().Add(90 * time.Second)
	failures := 0
	for r := 0; r < rounds && time.Now().Before(deadline); r++ {
		group := fmt.Sprintf("g%d", r)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			errs    []error
			created int
		)
		for i := range creators {
			wg.Go(func() {
				res, err := clients[i].CreateElastic(ctx, "ORDERS", group, cg.ElasticConfig{MaxMembers: 8, PartitioningFilters: ordersFilter()})
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if res.Created {
					created++
				}
			})
		}
		wg.Wait()
		if len(errs) > 0 || created != 1 {
			failures++
			t.Errorf("round %d: %d errors (%v), %d created; want 0 errors, 1 created", r, len(errs), errs, created)
		}
		if _, err := js.Stream(ctx, "ORDERS-"+group); err != nil {
			t.Errorf("round %d: work stream missing: %v", r, err)
		}
		if _, err := clients[0].ElasticConfig(ctx, "ORDERS", group); err != nil {
			t.Errorf("round %d: entry missing: %v", r, err)
		}
	}
	t.Logf("%d rounds of %d concurrent identical creates, %d bad", rounds, creators, failures)
}

// A create racing a delete ends with both the entry and the work stream,
// or neither.
func TestOwnershipConcurrentCreateDelete(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	a := cg.New(js)
	nc := natstest.Connect(t, s)
	b, _ := cg.NewFromConn(nc, "")
	cfg := cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter()}
	const rounds = 20
	deadline := time.Now().Add(90 * time.Second)
	both, none := 0, 0
	for r := 0; r < rounds && time.Now().Before(deadline); r++ {
		if _, err := a.CreateElastic(ctx, "ORDERS", "g", cfg); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = a.CreateElastic(ctx, "ORDERS", "g", cfg) })
		wg.Go(func() { _, _ = b.Delete(ctx, cg.KindElastic, "ORDERS", "g") })
		wg.Go(func() { _, _ = b.CreateElastic(ctx, "ORDERS", "g", cfg) })
		wg.Wait()
		_, kerr := a.ElasticConfig(ctx, "ORDERS", "g")
		_, serr := js.Stream(ctx, "ORDERS-g")
		switch {
		case kerr == nil && serr == nil:
			both++
		case errors.Is(kerr, cg.ErrGroupNotFound) && errors.Is(serr, jetstream.ErrStreamNotFound):
			none++
		default:
			t.Errorf("round %d: entry %v, work stream %v: half a group", r, kerr, serr)
		}
		if _, err := a.Delete(ctx, cg.KindElastic, "ORDERS", "g"); err != nil && !errors.Is(err, cg.ErrGroupNotFound) {
			t.Fatal(err)
		}
		if _, err := js.Stream(ctx, "ORDERS-g"); err == nil {
			_ = js.DeleteStream(ctx, "ORDERS-g")
		}
	}
	t.Logf("create/delete races: %d ended with the group, %d without", both, none)
}

// Re-running create over a work stream whose cg-managed settings drifted
// repairs it; drift that cannot be repaired in place is refused, naming it.
func TestOwnershipElasticCreateRepairsDrift(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	cfg := cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter()}
	s, err := js.Stream(ctx, "ORDERS-g")
	if err != nil {
		t.Fatal(err)
	}
	good := s.CachedInfo().Config
	drifted := good
	drifted.MaxMsgs = 7
	drifted.Sources = []*jetstream.StreamSource{{Name: "ORDERS", SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: "orders.*", Destination: "{{Partition(4,1)}}.x.{{Wildcard(1)}}"}}}}
	if _, err := js.UpdateStream(ctx, drifted); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateElastic(ctx, "ORDERS", "g", cfg)
	if err != nil || res.Created {
		t.Fatalf("re-create over drift: %v %+v", err, res)
	}
	if len(res.Repaired) != 2 || !strings.Contains(strings.Join(res.Repaired, " "), "max messages 7") {
		t.Errorf("repaired %v, want max messages and sources", res.Repaired)
	}
	s, err = js.Stream(ctx, "ORDERS-g")
	if err != nil {
		t.Fatal(err)
	}
	got := s.CachedInfo().Config
	if got.MaxMsgs != good.MaxMsgs || got.Sources[0].SubjectTransforms[0] != good.Sources[0].SubjectTransforms[0] {
		t.Errorf("work stream not repaired: max msgs %d, transforms %v", got.MaxMsgs, got.Sources[0].SubjectTransforms)
	}
	if got.Metadata["cg.group"] != "g" {
		t.Errorf("repair lost the marks: %v", got.Metadata)
	}
	res, err = c.CreateElastic(ctx, "ORDERS", "g", cfg)
	if err != nil || len(res.Repaired) != 0 {
		t.Errorf("third create: %v, repaired %v; want identical", err, res.Repaired)
	}
}

// The reference's whole-subject mode (no partitioning filters) and
// --filter '>' are one group: re-creating either way succeeds identically.
func TestOwnershipWholeSubjectRecreate(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.>"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	// As the reference stores it.
	if _, err := c.CreateElastic(ctx, "EV", "whole", cg.ElasticConfig{MaxMembers: 3}); err != nil {
		t.Fatal(err)
	}
	pf, err := cg.ParsePartitioningFilter(">")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateElastic(ctx, "EV", "whole", cg.ElasticConfig{MaxMembers: 3, PartitioningFilters: []cg.PartitioningFilter{pf}})
	if err != nil || res.Created || len(res.Repaired) != 0 {
		t.Fatalf("re-create with --filter '>': %v %+v", err, res)
	}
	// And the other way round: --filter '>' first, stored as whole-subject.
	res, err = c.CreateElastic(ctx, "EV", "w2", cg.ElasticConfig{MaxMembers: 3, PartitioningFilters: []cg.PartitioningFilter{pf}})
	if err != nil || !res.Created {
		t.Fatal(err)
	}
	if len(res.Config.PartitioningFilters) != 0 {
		t.Errorf("--filter '>' stored as %v, want no partitioning filters (the reference's whole-subject form)", res.Config.PartitioningFilters)
	}
	if res, err = c.CreateElastic(ctx, "EV", "w2", cg.ElasticConfig{MaxMembers: 3}); err != nil || res.Created {
		t.Errorf("re-create without filters: %v %+v", err, res)
	}
}

func TestOwnershipWorkStreamNameTooLong(t *testing.T) {
	c, _, _ := elasticSetup(t, 4)
	_, err := c.CreateElastic(ctxT(t), "ORDERS", strings.Repeat("g", 195), cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter()})
	if err == nil || !strings.Contains(err.Error(), "work stream name") || !strings.Contains(err.Error(), "ORDERS-ggg") {
		t.Errorf("too long: %v; want it to name the work stream ORDERS-<group>", err)
	}
}

// Reference-made groups cg would not create: a member name with '.'
// (its consumer name is one the server cannot have) and a group name with
// '.' (key S.a.b). Both show and delete cleanly.
func TestOwnershipReferenceOddNames(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.StaticBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{"max_members":10,"filters":[">"],"members":["a.b","m2"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.x.y", []byte(`{"max_members":10,"filters":[">"],"members":["m1"]}`)); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m2", func(context.Context, *cg.Msg) {}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
	if gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "x.y"); err != nil || len(gi.Members) != 1 || gi.Members[0].ConsumerExists {
		t.Errorf("info of group x.y: %v %+v", err, gi.Members)
	}
	res, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g")
	if err != nil {
		t.Fatalf("delete of a group with member a.b: %v", err)
	}
	if len(res.Consumers) != 1 || res.Consumers[0] != "g-m2" {
		t.Errorf("deleted %v, want g-m2", res.Consumers)
	}
	if _, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "x.y"); err != nil {
		t.Fatalf("delete of group x.y: %v", err)
	}
	if _, err := kv.Get(ctx, "ORDERS.x.y"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("ORDERS.x.y still stored: %v", err)
	}
	if err := cg.ValidateStoredGroupName("a..b"); err == nil {
		t.Error("a..b accepted")
	}
}

// A static member never joins, updates or deletes a consumer of its name
// that is not its own; an elastic member never deletes a foreign consumer
// on its work stream.
func TestOwnershipMembersLeaveForeignConsumers(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	// Made after the create: a user's consumer with the member's name.
	if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "g-m1", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "3.>"}); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	_, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{})
	wantErrNaming(t, "join over a user's consumer", err, cg.ErrNotOwned, "g-m1", "priority group")
	sameState(t, "refused join", before, snapshot(t, js))

	// ReferenceCompatible: no marks, kept forever.
	if _, err := c.CreateStatic(ctx, "ORDERS", "r", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "r", "m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{ReferenceCompatible: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	ci, err := js.Consumer(ctx, "ORDERS", "r-m1")
	if err != nil {
		t.Fatal(err)
	}
	if cc := ci.CachedInfo().Config; cc.Metadata["cg.group"] != "" || cc.InactiveThreshold != 0 {
		t.Errorf("reference-compatible consumer has marks %v, inactive threshold %s", cc.Metadata, cc.InactiveThreshold)
	}
}

func TestOwnershipElasticMemberLeavesForeignConsumer(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	// Someone's own consumer on the work stream, named like the member
	// and holding partition 0 (it is not pinned in PCG).
	if _, err := js.CreateConsumer(ctx, "ORDERS-g", jetstream.ConsumerConfig{Name: "m1", AckPolicy: jetstream.AckExplicitPolicy, FilterSubject: "0.>"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var waits []string
	m, err := c.JoinElastic(ctx, "ORDERS", "g", "m1", func(context.Context, *cg.Msg) {}, cg.JoinOptions{OnEvent: func(e cg.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == cg.EventWaiting {
			waits = append(waits, e.Reason)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 10*time.Second, "the member saying the consumer is not its own", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, w := range waits {
			if strings.Contains(w, "not made by cg") {
				return true
			}
		}
		return false
	})
	ci, err := js.Consumer(ctx, "ORDERS-g", "m1")
	if err != nil {
		t.Fatalf("the foreign consumer was deleted: %v", err)
	}
	if cc := ci.CachedInfo().Config; cc.FilterSubject != "0.>" || len(cc.PriorityGroups) != 0 {
		t.Errorf("the foreign consumer was changed: %+v", cc)
	}
}

// Two clashing static creates at the same moment: exactly one stands.
func TestOwnershipConcurrentClashingStaticCreates(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	nc := natstest.Connect(t, s)
	c2, _ := cg.NewFromConn(nc, "")
	const rounds = 15
	deadline := time.Now().Add(60 * time.Second)
	for r := 0; r < rounds && time.Now().Before(deadline); r++ {
		a, ab := fmt.Sprintf("a%d", r), fmt.Sprintf("a%d-b", r)
		var wg sync.WaitGroup
		var errA, errB error
		wg.Go(func() {
			_, errA = c.CreateStatic(ctx, "ORDERS", a, cg.StaticConfig{MaxMembers: 10, Members: []string{"b-m1"}})
		})
		wg.Go(func() {
			_, errB = c2.CreateStatic(ctx, "ORDERS", ab, cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}})
		})
		wg.Wait()
		if (errA == nil) == (errB == nil) {
			t.Errorf("round %d: %s: %v, %s: %v; want exactly one to stand", r, a, errA, ab, errB)
		}
		for _, err := range []error{errA, errB} {
			if err != nil && !errors.Is(err, cg.ErrNameClash) {
				t.Errorf("round %d: %v, want a name clash", r, err)
			}
		}
		stored := 0
		for _, g := range []string{a, ab} {
			if _, err := c.StaticConfig(ctx, "ORDERS", g); err == nil {
				stored++
			}
		}
		if stored != 1 {
			t.Errorf("round %d: %d of the two groups stored, want 1", r, stored)
		}
	}
	_ = js
}

// An elastic group the reference stored with a '.' in its name (its work
// stream name is one the server cannot have) deletes cleanly.
func TestOwnershipElasticDottedGroupDeletes(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.x.y", []byte(`{"max_members":4,"partitioning_filters":[]}`)); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	res, err := c.Delete(ctx, cg.KindElastic, "ORDERS", "x.y")
	if err != nil || res.WorkStream != "" {
		t.Fatalf("delete x.y: %v %+v", err, res)
	}
	after := snapshot(t, js)
	delete(before.keys, cg.ElasticBucket+"/ORDERS.x.y")
	sameState(t, "delete of x.y touched only its entry", before, after)
}

// A work stream cg made for the group whose entry is gone (a create that
// stopped half-way) is the group's: an identical create adopts it, one
// with other settings is refused without changing it.
func TestOwnershipLeftoverWorkStream(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "ORDERS.g"); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, js)
	_, err = c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter(), MaxBufferedMsgs: 9})
	wantErrNaming(t, "create with other caps over a leftover", err, cg.ErrGroupExists, "ORDERS-g", "max messages unlimited (want 9)")
	sameState(t, "refused leftover", before, snapshot(t, js))
	res, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ordersFilter()})
	if err != nil || !res.Created {
		t.Fatalf("identical create over the leftover: %v %+v", err, res)
	}
}
