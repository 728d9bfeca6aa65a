package elastic_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/cmd/elastic"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

func TestMinimal(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "256", "--filter", "orders.*:1")
	eight := []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"}
	e.mustRun(append([]string{"elastic", "add", "ORDERS", "g"}, eight...)...)
	rev, stored := e.revision("ORDERS", "g"), string(e.stored("ORDERS", "g"))

	// The plain dry run names its mode and points at --minimal.
	r := e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--dry-run")
	if !has(r.Out, "Mode: balanced (the member list re-split in blocks)") || !has(r.Out, "Would move: 144 of 256 partitions") ||
		!has(r.Err, "hint: with --minimal it would move 28") {
		t.Fatalf("add --dry-run: out %q err %q", r.Out, r.Err)
	}

	r = e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--minimal", "--dry-run")
	if !has(r.Err, "dry run: nothing written to elastic group g on ORDERS") ||
		!has(r.Out, "Mode: minimal (even shares, fewest moves; stored as member mappings)") ||
		!has(r.Out, "Would move: 28 of 256 partitions") || !has(r.Out, "Minimum: 28 (the fewest moves to reach these shares)") ||
		!has(r.Out, "Balanced: 144 (what re-splitting a member list would move)") || !has(r.Out, "(mapped)") ||
		!has(r.Out, "29-31 m1 m9") || strings.Contains(r.Err, "hint") {
		t.Fatalf("add --minimal --dry-run: out %q err %q", r.Out, r.Err)
	}
	t.Logf("cg elastic add ORDERS g m9 --minimal --dry-run\n%s%s", r.Err, r.Out)

	r = e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--minimal", "--dry-run", "--json")
	var plan elastic.PlanOutput
	if err := json.Unmarshal([]byte(r.Out), &plan); err != nil {
		t.Fatalf("add --minimal --dry-run --json: %v: %q", err, r.Out)
	}
	if plan.Mode != "minimal" || plan.Moved != 28 || len(plan.Moves) != 28 || plan.Minimum != 28 || plan.BalancedMoved == nil ||
		*plan.BalancedMoved != 144 || len(plan.Config.MemberMappings) != 9 || len(plan.Config.Members) != 0 {
		t.Fatalf("minimal plan: %+v", plan)
	}
	if e.revision("ORDERS", "g") != rev || string(e.stored("ORDERS", "g")) != stored {
		t.Fatal("dry runs changed the stored config")
	}

	// The real add does what the plan said and stores valid mappings.
	r = e.mustRun("elastic", "add", "ORDERS", "g", "m9", "--minimal")
	if !has(r.Err, "added m9 to elastic group g on ORDERS") || !has(r.Out, "Moved: 28 of 256 partitions") ||
		!has(r.Err, "now uses member mappings: change its members with --minimal, or go back to a member list with 'cg elastic delete-mapping ORDERS g'") {
		t.Fatalf("add --minimal: out %q err %q", r.Out, r.Err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(e.stored("ORDERS", "g"), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["members"]; ok || raw["member_mappings"] == nil {
		t.Fatalf("stored value: %s", e.stored("ORDERS", "g"))
	}
	cfg := e.config("ORDERS", "g")
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := partition.MappedAssignment(cfg.MemberMappings, 256); !slices.Equal(got.Owner, partition.MappedAssignment(plan.Config.MemberMappings, 256).Owner) {
		t.Fatal("stored mappings differ from the dry run's")
	}

	// Plain add and drop of the mapped group fail in one line saying what
	// to do instead; the stored value is untouched.
	mapped := string(e.stored("ORDERS", "g"))
	for _, verb := range []string{"add", "drop"} {
		r := e.run("elastic", verb, "ORDERS", "g", "m3")
		if r.Code != 1 || !has(r.Err, "uses member mappings; "+verb+" with --minimal") || !has(r.Err, "cg elastic delete-mapping") ||
			strings.Count(strings.TrimSpace(r.Err), "\n") > 0 {
			t.Fatalf("plain %s of a mapped group: %d %q", verb, r.Code, r.Err)
		}
	}
	if string(e.stored("ORDERS", "g")) != mapped {
		t.Fatal("refused changes altered the stored value")
	}

	// Minimal drop of the mapped group, as JSON: only m3's 29 move.
	r = e.mustRun("elastic", "drop", "ORDERS", "g", "m3", "--minimal", "--json")
	var mc cg.MembershipChange
	if err := json.Unmarshal([]byte(r.Out), &mc); err != nil {
		t.Fatalf("drop --minimal --json: %v: %q", err, r.Out)
	}
	if !mc.Minimal || len(mc.Moves) != 29 || len(mc.Config.MemberMappings) != 8 || !slices.Equal(mc.Changed, []string{"m3"}) {
		t.Fatalf("drop --minimal --json: %+v", mc)
	}
	for _, mv := range mc.Moves {
		if mv.From != "m3" {
			t.Fatalf("drop moved %+v", mv)
		}
	}
	if strings.Contains(r.Err, "now uses member mappings") {
		t.Fatalf("drop of an already mapped group repeats the note: %q", r.Err)
	}

	// Dropping a member of an even group to its last: a member list would
	// move no more, so --minimal keeps (here: returns to) a member list.
	e.mustRun("elastic", "create", "ORDERS", "small", "10")
	e.mustRun("elastic", "add", "ORDERS", "small", "a")
	r = e.mustRun("elastic", "add", "ORDERS", "small", "b", "--minimal", "--dry-run")
	if !has(r.Out, "Mode: minimal (a member list moves no more, so it stays one)") || !has(r.Out, "a=0-4 b=5-9 (balanced)") {
		t.Fatalf("add --minimal 1 to 2: %q", r.Out)
	}
	r = e.mustRun("elastic", "add", "ORDERS", "small", "b", "--minimal")
	if cfg := e.config("ORDERS", "small"); !slices.Equal(cfg.Members, []string{"a", "b"}) || strings.Contains(r.Err, "mappings") {
		t.Fatalf("add --minimal 1 to 2 stored %+v, stderr %q", cfg, r.Err)
	}

	r = e.mustRun("elastic", "add", "--help")
	if !has(r.Out, "--minimal") || !has(r.Out, "moves 28 rather than 144") {
		t.Fatalf("add --help: %q", r.Out)
	}
}
