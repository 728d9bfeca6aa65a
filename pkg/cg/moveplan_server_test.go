package cg_test

import (
	"context"
	"testing"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// A dry run plans the change from the stored config and writes nothing.
func TestDryRunWritesNothing(t *testing.T) {
	c, js, _ := elasticSetup(t, 256)
	ctx := context.Background()
	members := []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"}
	if _, err := c.AddMembers(ctx, "ORDERS", "g", members); err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	rev := func() uint64 {
		e, err := kv.Get(ctx, cg.Key("ORDERS", "g"))
		if err != nil {
			t.Fatal(err)
		}
		return e.Revision()
	}
	before := rev()
	plan, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m9"}, cg.DryRun())
	if err != nil {
		t.Fatal(err)
	}
	if !plan.DryRun || plan.Revision != before || len(plan.Config.Members) != 9 {
		t.Fatalf("plan %+v, stored revision %d", plan, before)
	}
	if got := plan.MinimumMoves(); got != 28 {
		t.Errorf("minimum %d, want 28", got)
	}
	if len(plan.Moves) != 144 {
		t.Errorf("moves %d, want 144", len(plan.Moves))
	}
	if _, err := c.DropMembers(ctx, "ORDERS", "g", []string{"m1"}, cg.DryRun()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.SetMappings(ctx, "ORDERS", "g", []partition.MemberMapping{{Member: "a", Partitions: seq(0, 128)}, {Member: "b", Partitions: seq(128, 256)}}, cg.DryRun()); err != nil {
		t.Fatal(err)
	}
	if after := rev(); after != before {
		t.Fatalf("revision %d after dry runs, want %d", after, before)
	}
	cfg, err := c.ElasticConfig(ctx, "ORDERS", "g")
	if err != nil || len(cfg.Members) != 8 || len(cfg.MemberMappings) != 0 {
		t.Fatalf("stored config changed: %+v %v", cfg, err)
	}
	// The real change moves what the dry run said.
	done, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m9"})
	if err != nil {
		t.Fatal(err)
	}
	if len(done.Moves) != len(plan.Moves) || done.Revision == before {
		t.Fatalf("real add moved %d (plan %d), revision %d", len(done.Moves), len(plan.Moves), done.Revision)
	}
}

func seq(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}
