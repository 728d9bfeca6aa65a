package cg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Growing 8 → 9 members over 256 partitions with Minimal stores mappings
// the reference reads as valid, moves the 28 partitions the plan said,
// and running members end up consuming exactly the planned partitions;
// a later plain add is refused and a Minimal drop moves the fewest again.
func TestMinimalAddDropRebalancesRunningMembers(t *testing.T) {
	c, js, fresh := elasticSetup(t, 256)
	ctx := ctxT(t)
	eight := []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"}
	if _, err := c.AddMembers(ctx, "ORDERS", "g", eight); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	handled := map[int]string{} // partition -> member that handled it last
	count := 0
	running := map[string]*cg.Member{}
	for _, name := range append(slices.Clone(eight), "m9") {
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", name, func(_ context.Context, msg *cg.Msg) {
			mu.Lock()
			handled[msg.Partition()] = name
			count++
			mu.Unlock()
			_ = msg.Ack()
		}, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
		running[name] = m
	}

	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	stored := func() jetstream.KeyValueEntry {
		e, err := kv.Get(ctx, cg.Key("ORDERS", "g"))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	rev := stored().Revision()

	plan, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m9"}, cg.Minimal(), cg.DryRun())
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Moves) != 28 || plan.MinimumMoves() != 28 || plan.BalancedMoves() != 144 || !plan.Minimal ||
		len(plan.Config.MemberMappings) != 9 || len(plan.Config.Members) != 0 {
		t.Fatalf("plan: %d moves, minimum %d, balanced %d, config %+v", len(plan.Moves), plan.MinimumMoves(), plan.BalancedMoves(), plan.Config)
	}
	if got := stored().Revision(); got != rev {
		t.Fatalf("dry run wrote revision %d after %d", got, rev)
	}

	done, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m9"}, cg.Minimal())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(done.Moves, plan.Moves) || !slices.Equal(done.Changed, []string{"m9"}) {
		t.Fatalf("add moved %v, the plan said %v", done.Moves, plan.Moves)
	}
	checkStoredMappings(t, js, stored().Value(), done.Config)
	waitPlanned(t, js, running, done.Config)
	publishAndCheckOwners(t, js, &mu, handled, &count, done.Config)

	// A plain change of the now mapped group says what to do instead.
	for _, f := range []func(context.Context, string, string, []string, ...cg.ChangeOption) (cg.MembershipChange, error){c.AddMembers, c.DropMembers} {
		_, err := f(ctx, "ORDERS", "g", []string{"m3"})
		var re *health.Error
		if !errors.Is(err, cg.ErrMappedGroup) || !strings.Contains(err.Error(), "minimal option") || !strings.Contains(err.Error(), "delete the mappings") ||
			!errors.As(err, &re) || re.Remedy.Code != health.RemedyMinimalOrDeleteMappings {
			t.Fatalf("plain change of a mapped group: %v", err)
		}
	}

	// Dropping from the mapped group: the fewest moves again.
	drop, err := c.DropMembers(ctx, "ORDERS", "g", []string{"m3"}, cg.Minimal())
	if err != nil {
		t.Fatal(err)
	}
	if len(drop.Moves) != drop.MinimumMoves() || len(drop.Moves) != 29 || len(drop.Config.MemberMappings) != 8 {
		t.Fatalf("drop moved %d, minimum %d, config %+v", len(drop.Moves), drop.MinimumMoves(), drop.Config)
	}
	for _, mv := range drop.Moves {
		if mv.From != "m3" {
			t.Fatalf("drop moved partition %d from %s: only m3's partitions had to move", mv.Partition, mv.From)
		}
	}
	checkStoredMappings(t, js, stored().Value(), drop.Config)
	waitPlanned(t, js, running, drop.Config)
	publishAndCheckOwners(t, js, &mu, handled, &count, drop.Config)
}

// checkStoredMappings checks the stored value is what the change returned,
// in the contract's form (mappings, no member list), and that the
// reference library reads it as valid and derives the same partitions.
func checkStoredMappings(t *testing.T, js jetstream.JetStream, raw []byte, want cg.ElasticConfig) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatal(err)
	}
	if _, ok := fields["members"]; ok {
		t.Fatalf("stored value has both a member list and mappings: %s", raw)
	}
	var got cg.ElasticConfig
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if err := got.Validate(); err != nil {
		t.Fatalf("stored value %s: %v", raw, err)
	}
	if g, w := got.Assignment(), want.Assignment(); !slices.Equal(g.Owner, w.Owner) {
		t.Fatalf("stored assignment differs from the change's")
	}
	ref, err := pcgroups.GetElasticConsumerGroupConfig(context.Background(), js, "ORDERS", "g")
	if err != nil {
		t.Fatalf("the reference refuses the stored value: %v", err)
	}
	for _, mm := range got.MemberMappings {
		if !ref.IsInMembership(mm.Member) {
			t.Fatalf("the reference does not see %s as a member", mm.Member)
		}
		if r, ours := pcgroups.ElasticGetPartitionFilters(*ref, mm.Member), got.MemberFilters(mm.Member); !slices.Equal(r, ours) {
			t.Fatalf("%s: reference filters %v, ours %v", mm.Member, r, ours)
		}
	}
}

// waitPlanned waits until every running member owns its planned
// partitions and its consumer on the server filters exactly them.
func waitPlanned(t *testing.T, js jetstream.JetStream, running map[string]*cg.Member, cfg cg.ElasticConfig) {
	t.Helper()
	a := cfg.Assignment()
	for name, m := range running {
		want := a.MemberPartitions(name)
		natstest.Eventually(t, 20*time.Second, name+" owns its planned partitions", func() bool {
			if !slices.Equal(m.Partitions(), want) {
				return false
			}
			if len(want) == 0 {
				return true
			}
			ci, err := js.Consumer(context.Background(), cg.WorkStreamName("ORDERS", "g"), name)
			if err != nil {
				return false
			}
			return slices.Equal(ci.CachedInfo().Config.FilterSubjects, cfg.MemberFilters(name))
		})
	}
}

// publishAndCheckOwners publishes keyed messages and checks each partition
// was handled by the member the configuration maps it to.
func publishAndCheckOwners(t *testing.T, js jetstream.JetStream, mu *sync.Mutex, handled map[int]string, count *int, cfg cg.ElasticConfig) {
	t.Helper()
	mu.Lock()
	clear(handled)
	start := *count
	mu.Unlock()
	const n = 300
	for i := 0; i < n; i++ {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("orders.k%03d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 20*time.Second, fmt.Sprintf("%d messages handled", n), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return *count-start >= n
	})
	a := cfg.Assignment()
	mu.Lock()
	defer mu.Unlock()
	if len(handled) < 100 {
		t.Fatalf("%d messages reached only %d partitions", n, len(handled))
	}
	for p, who := range handled {
		if want := a.Owner[p]; who != want {
			t.Errorf("partition %d handled by %s, mapped to %s", p, who, want)
		}
	}
}

// Minimal changes racing each other all land (the compare-and-set retry),
// and the result is still even.
func TestMinimalConcurrentAddsAllLand(t *testing.T) {
	c, _, _ := elasticSetup(t, 64)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"a", "b", "c"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{fmt.Sprintf("w%d", i)}, cg.Minimal()); err != nil {
				errs <- err
			}
		}()
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
	a := cfg.Assignment()
	if names := cfg.MemberNames(); len(names) != 11 {
		t.Fatalf("%d members after 8 concurrent adds: %v", len(names), names)
	}
	for _, m := range cfg.MemberNames() {
		if n := len(a.MemberPartitions(m)); n != 5 && n != 6 {
			t.Fatalf("%s owns %d of 64 over 11 members", m, n)
		}
	}
}
