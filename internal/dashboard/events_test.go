package dashboard_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
)

// TestEventsSnapshotAndChanges: on connect a "group" event per group
// names its partitions and owners (each owner in the CLI's colour), then a
// "ready"; an elastic add made through the engine arrives as member_added,
// rebalance and a new group state within a second; every event carries an
// increasing id.
func TestEventsSnapshotAndChanges(t *testing.T) {
	f := newFixture(t, nil, "m1", "m2")
	f.join("m1")
	f.start(nil, dashboard.Options{})
	sampled(t, f.d)

	es := f.events("")
	g, gi := es.wait(t, 0, "snapshot group event", typ("group"))
	if g.id != "" {
		t.Errorf("snapshot group event has id %q; snapshot events carry none", g.id)
	}
	if g.ev["stream"] != "ORDERS" || g.ev["group"] != "g" || g.ev["kind"] != "elastic" {
		t.Fatalf("snapshot names %v/%v (%v), want ORDERS/g elastic", g.ev["stream"], g.ev["group"], g.ev["kind"])
	}
	st := groupState(g.ev)
	if got, want := owners(st), []string{"m1", "m1", "m2", "m2"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot owners %v, want %v", got, want)
	}
	if st["partitions"] != 4.0 || st["kind"] != "elastic" || st["read_only"] != false {
		t.Fatalf("snapshot state %v", st)
	}
	m1 := memberNamed(st, "m1")
	if m1 == nil || m1["color"] != dashboard.MemberColor("m1") {
		t.Fatalf("m1 in snapshot: %v, want colour %s", m1, dashboard.MemberColor("m1"))
	}
	r, _ := es.wait(t, gi, "ready", typ("ready"))
	if _, err := strconv.ParseUint(r.id, 10, 64); err != nil {
		t.Fatalf("ready id %q: %v", r.id, err)
	}

	start := time.Now()
	if _, err := f.c.AddMembers(context.Background(), "ORDERS", "g", []string{"m3"}); err != nil {
		t.Fatal(err)
	}
	added, _ := es.wait(t, gi, "member_added m3", func(e map[string]any) bool { return e["type"] == "member_added" && e["member"] == "m3" })
	reb, _ := es.wait(t, gi, "rebalance", typ("rebalance"))
	upd, _ := es.wait(t, gi+1, "group state with m3", func(e map[string]any) bool {
		return e["type"] == "group" && slices.Contains(owners(groupState(e)), "m3")
	})
	lat := upd.at.Sub(start)
	t.Logf("elastic add reached /events in %s (member_added %s, rebalance %s)", lat, added.at.Sub(start), reb.at.Sub(start))
	// The aim is within a second (one sample at 200 ms plus the Info);
	// a loaded test machine gets slack, a dashboard that missed the
	// change until some later, slower path does not.
	if lat > time.Second {
		t.Logf("slower than a second: %s (a loaded machine?)", lat)
	}
	if lat > 5*time.Second {
		t.Errorf("elastic add took %s to reach /events, want within a second", lat)
	}
	if got := owners(groupState(upd.ev)); len(got) != 4 || !slices.Contains(got, "m1") || !slices.Contains(got, "m2") {
		t.Errorf("owners after add %v", got)
	}
	if added.ev["color"] != dashboard.MemberColor("m3") {
		t.Errorf("member_added colour %v", added.ev["color"])
	}
	if mv, _ := reb.ev["moves"].([]any); len(mv) == 0 {
		t.Errorf("rebalance without moves: %v", reb.ev)
	}
	// Ids increase.
	var last uint64
	for _, g := range es.snapshotIDs() {
		if g <= last {
			t.Fatalf("ids not increasing: %d after %d\n%s", g, last, es.dump())
		}
		last = g
	}
}

// snapshotIDs are the ids of the events that have one, after ready.
func (st *stream) snapshotIDs() []uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var out []uint64
	seenReady := false
	for _, g := range st.events {
		if g.ev["type"] == "ready" {
			seenReady = true
			continue
		}
		if !seenReady || g.id == "" {
			continue
		}
		n, _ := strconv.ParseUint(g.id, 10, 64)
		out = append(out, n)
	}
	return out
}

// sampled waits until the dashboard has sampled a group once, so a
// snapshot has it.
func sampled(t *testing.T, d *dashboard.Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(d.States()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("dashboard never sampled the group")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventsNewGroup: a group created while the dashboard runs shows up
// (a watcher on the configuration bucket has the groups listed again at
// once: without it the next listing is 10 s away, past the deadline).
func TestEventsNewGroup(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{})
	sampled(t, f.d)
	es := f.events("")
	_, ri := es.wait(t, 0, "ready", typ("ready"))
	start := time.Now()
	if _, err := f.c.CreateElastic(context.Background(), "ORDERS", "h", cg.ElasticConfig{MaxMembers: 2, Members: []string{"x"},
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	g, _ := es.wait(t, ri, "group h", func(e map[string]any) bool { return e["type"] == "group" && e["group"] == "h" })
	t.Logf("a new group reached /events in %s", g.at.Sub(start))
	if took := g.at.Sub(start); took > 5*time.Second {
		t.Fatalf("a new group took %s to show, want well under the 10 s fallback listing", took)
	}
	if got := owners(groupState(g.ev)); !slices.Equal(got, []string{"x", "x"}) {
		t.Fatalf("group h owners %v", got)
	}
}
