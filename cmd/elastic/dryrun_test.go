package elastic_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/cg-dev/cg/cmd/elastic"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

func (e *env) revision(stream, group string) uint64 {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), cg.ElasticBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := kv.Get(context.Background(), cg.Key(stream, group))
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Revision()
}

func TestDryRun(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "256", "--filter", "orders.*:1")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8")
	rev := e.revision("ORDERS", "g")
	stored := string(e.stored("ORDERS", "g"))

	r := e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--dry-run")
	if !has(r.Err, "dry run: nothing written to elastic group g on ORDERS") || !has(r.Out, "Would move: 144 of 256 partitions") ||
		!has(r.Out, "Minimum:    28 (the fewest moves to reach these shares)") || !has(r.Out, "PARTITIONS  FROM  TO") ||
		!has(r.Out, "m9=") {
		t.Fatalf("add --dry-run: out %q err %q", r.Out, r.Err)
	}

	r = e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--dry-run", "--json")
	var plan elastic.PlanOutput
	if err := json.Unmarshal([]byte(r.Out), &plan); err != nil {
		t.Fatalf("add --dry-run --json: %v: %q", err, r.Out)
	}
	want := partition.Moves(partition.BalancedAssignment([]string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"}, 256),
		partition.BalancedAssignment([]string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "m9"}, 256))
	if plan.Moved != len(want) || len(plan.Moves) != len(want) || plan.Minimum != 28 || len(plan.Config.Members) != 9 {
		t.Fatalf("plan moved %d minimum %d members %v", plan.Moved, plan.Minimum, plan.Config.Members)
	}

	r = e.mustRun("elastic", "drop", "ORDERS", "g", "m8", "--dry-run", "--json")
	plan = elastic.PlanOutput{}
	if err := json.Unmarshal([]byte(r.Out), &plan); err != nil {
		t.Fatal(err)
	}
	// 8 → 7 over 256: shares 37,37,37,37,36,36,36; seven keep 32 each.
	if plan.Minimum != 32 || plan.Moved < plan.Minimum || len(plan.Config.Members) != 7 {
		t.Fatalf("drop plan moved %d minimum %d members %v", plan.Moved, plan.Minimum, plan.Config.Members)
	}

	r = e.mustRun("elastic", "add", "ORDERS", "g", "m1", "--dry-run")
	if !has(r.Err, "m1: already a member") || !has(r.Out, "Would move: none") || !has(r.Out, "Minimum:    0") {
		t.Fatalf("add of a member --dry-run: out %q err %q", r.Out, r.Err)
	}

	r = e.mustRun("elastic", "create-mapping", "ORDERS", "g", "m1:0-127", "m2:128-255", "--dry-run", "--json")
	plan = elastic.PlanOutput{}
	if err := json.Unmarshal([]byte(r.Out), &plan); err != nil {
		t.Fatal(err)
	}
	// At best m1 and m2 keep their 32 each (192 move); these mappings
	// keep only m1's, as m2's old partitions go to m1.
	if plan.Minimum != 192 || plan.Moved != 224 || len(plan.Config.MemberMappings) != 2 {
		t.Fatalf("create-mapping plan moved %d minimum %d", plan.Moved, plan.Minimum)
	}
	r = e.mustRun("elastic", "cm", "ORDERS", "g", "m1:0-127", "m2:128-255", "--dry-run")
	if !has(r.Out, "Would move: 224 of 256 partitions") || !has(r.Out, "(mapped)") {
		t.Fatalf("create-mapping --dry-run: %q", r.Out)
	}

	// Errors are the real command's.
	if r := e.run("elastic", "drop", "ORDERS", "g", "nobody", "--dry-run"); r.Code != 1 {
		t.Fatalf("drop of a non-member --dry-run: %d %q", r.Code, r.Err)
	}
	if r := e.run("elastic", "cm", "ORDERS", "g", "m1:0-9", "--dry-run"); r.Code != 2 {
		t.Fatalf("incomplete mapping --dry-run: %d %q", r.Code, r.Err)
	}

	if got := e.revision("ORDERS", "g"); got != rev {
		t.Fatalf("revision %d after dry runs, want %d", got, rev)
	}
	if got := string(e.stored("ORDERS", "g")); got != stored {
		t.Fatalf("stored config changed:\n%s\nwas\n%s", got, stored)
	}
}
