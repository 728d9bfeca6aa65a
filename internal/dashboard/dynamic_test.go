package dashboard_test

import (
	"context"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
)

// TestEventsDynamicMembers: a member that adds itself arrives on /events
// as a member_added marked dynamic; the group's state marks it dynamic
// with a recent last_seen, while an operator's member shows neither; its
// clean stop arrives as a member_removed marked dynamic, like a drop.
func TestEventsDynamicMembers(t *testing.T) {
	f := newFixture(t, nil, "op")
	f.start(nil, dashboard.Options{})
	sampled(t, f.d)
	es := f.events("")
	_, ri := es.wait(t, 0, "ready", typ("ready"))

	m, err := f.fresh().JoinElastic(context.Background(), "ORDERS", "g", "d1", func(_ context.Context, msg *cg.Msg) { _ = msg.Ack() },
		cg.JoinOptions{Dynamic: true, SessionTimeout: cg.MinSessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	added, ai := es.wait(t, ri, "member_added d1", func(e map[string]any) bool { return e["type"] == "member_added" && e["member"] == "d1" })
	if added.ev["dynamic"] != true || added.ev["reason"] == nil {
		t.Fatalf("d1's member_added is not marked dynamic with a reason: %v", added.ev)
	}
	g, _ := es.wait(t, ri, "a state with d1 last seen", func(e map[string]any) bool {
		d1 := memberNamed(groupState(e), "d1")
		return e["type"] == "group" && d1 != nil && d1["last_seen"] != nil
	})
	st := groupState(g.ev)
	d1, op := memberNamed(st, "d1"), memberNamed(st, "op")
	if d1["dynamic"] != true {
		t.Fatalf("d1 in the state is not marked dynamic: %v", d1)
	}
	seen, err := time.Parse(time.RFC3339Nano, d1["last_seen"].(string))
	if err != nil || time.Since(seen) > 10*time.Second || time.Until(seen) > time.Second {
		t.Fatalf("d1 last seen %v (%v): not a recent liveness write", d1["last_seen"], err)
	}
	if _, ok := op["dynamic"]; ok {
		t.Fatalf("the operator's member op is marked dynamic: %v", op)
	}
	if _, ok := op["last_seen"]; ok {
		t.Fatalf("the operator's member op, never run, has a last_seen: %v", op)
	}

	m.Stop()
	removed, _ := es.wait(t, ai, "member_removed d1", func(e map[string]any) bool { return e["type"] == "member_removed" && e["member"] == "d1" })
	if removed.ev["dynamic"] != true || removed.ev["reason"] == nil {
		t.Fatalf("d1's member_removed is not marked dynamic with a reason: %v", removed.ev)
	}
	es.wait(t, ai, "a state without d1", func(e map[string]any) bool {
		return e["type"] == "group" && memberNamed(groupState(e), "d1") == nil && memberNamed(groupState(e), "op") != nil
	})
}
