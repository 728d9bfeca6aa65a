package dashboard_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
)

// pinOf polls the member's pin id in the dashboard's state.
func pinOf(t *testing.T, d *dashboard.Server, member string, cond func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range d.States() {
			st := e.State.(*dashboard.GroupState)
			for _, m := range st.Members {
				if m.Name == member && cond(m.PinID) {
					return m.PinID
				}
			}
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(d.States())
			t.Fatalf("%s's pin never met the condition: %s", member, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEventsStepDown: a step-down (through the engine) shows up as a
// step_down naming the pin released, then a pin with the new pin id, and
// the member's state moves to the new pin; the standby shows as an
// instance of the member.
func TestEventsStepDown(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.join("m1")
	f.join("m1")
	f.start(nil, dashboard.Options{})
	f.publish(8) // the server pins an instance when it first delivers
	old := pinOf(t, f.d, "m1", func(p string) bool { return p != "" })
	es := f.events("")
	g, _ := es.wait(t, 0, "snapshot with two instances of m1", func(e map[string]any) bool {
		if e["type"] != "group" {
			return false
		}
		m := memberNamed(groupState(e), "m1")
		is, _ := m["instances"].([]any)
		return m["pin_id"] == old && len(is) == 2
	})
	inst := memberNamed(groupState(g.ev), "m1")["instances"].([]any)
	if p := inst[0].(map[string]any); p["pinned"] != true || p["pin_id"] != old || p["id"] != old {
		t.Fatalf("first instance %v, want the pinned one with pin %s", p, old)
	}
	_, ri := es.wait(t, 0, "ready", typ("ready"))

	start := time.Now()
	res, err := f.c.StepDown(context.Background(), cg.KindElastic, "ORDERS", "g", "m1")
	if err != nil {
		t.Fatal(err)
	}
	if res.PrevPinID != old {
		t.Fatalf("step-down released %q, the dashboard showed %q", res.PrevPinID, old)
	}
	sd, _ := es.wait(t, ri, "step_down", typ("step_down"))
	f.publish(8) // the next delivery pins an instance again
	if sd.ev["member"] != "m1" || sd.ev["prev_pin_id"] != old || sd.ev["reason"] != "admin" {
		t.Fatalf("step_down event %v, want member m1, prev_pin_id %s, reason admin", sd.ev, old)
	}
	pin, _ := es.wait(t, ri, "pin with a new pin id", func(e map[string]any) bool {
		return e["type"] == "pin" && e["member"] == "m1" && e["pin_id"] != "" && e["pin_id"] != old
	})
	t.Logf("step-down: step_down after %s, new pin after %s", sd.at.Sub(start), pin.at.Sub(start))
	if pin.at.Sub(start) > 5*time.Second {
		t.Errorf("new pin took %s to show", pin.at.Sub(start))
	}
	newPin := pin.ev["pin_id"].(string)
	es.wait(t, ri, "group state with the new pin", func(e map[string]any) bool {
		return e["type"] == "group" && memberNamed(groupState(e), "m1")["pin_id"] == newPin
	})
	for _, e := range es.all() {
		if e.ev["type"] == "failover" {
			t.Errorf("a step-down is not a failover: %v", e.ev)
		}
	}
}

func (st *stream) all() []got {
	st.mu.Lock()
	defer st.mu.Unlock()
	return append([]got(nil), st.events...)
}

// TestEventsResume: a client coming back with Last-Event-ID gets exactly
// the events after it, in order, and no snapshot; an id the ring no longer
// holds (or from another dashboard) gets a fresh snapshot.
func TestEventsResume(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{Buffer: 8})
	sampled(t, f.d)
	es := f.events("")
	r, _ := es.wait(t, 0, "ready", typ("ready"))
	es.close()
	for i := range 5 {
		f.d.Emit(dashboard.Event{Type: dashboard.TypeHandled, Stream: "ORDERS", Group: "g", Member: "m1", Instance: "a", Key: "k", Seq: uint64(i + 1)})
	}
	re := f.events(r.id)
	_, ri := re.wait(t, 0, "ready after resume", typ("ready"))
	evs := re.all()
	var seqs []float64
	for _, e := range evs[:ri] {
		if e.ev["type"] == "group" {
			t.Fatalf("resume sent a snapshot: %v", e.ev)
		}
		if e.ev["type"] == "handled" {
			seqs = append(seqs, e.ev["seq"].(float64))
			if e.ev["color"] != dashboard.MemberColor("m1") || e.ev["instance"] != "a" {
				t.Errorf("handled event %v", e.ev)
			}
		}
	}
	if len(seqs) != 5 || seqs[0] != 1 || seqs[4] != 5 {
		t.Fatalf("resumed with handled seqs %v, want 1..5 in order\n%s", seqs, re.dump())
	}
	if evs[ri].ev["resumed"] != true {
		t.Errorf("ready after resume %v, want resumed", evs[ri].ev)
	}
	// Overflow the ring: the id falls out of it, so a snapshot comes.
	for i := range 20 {
		f.d.Emit(dashboard.Event{Type: dashboard.TypeHandled, Seq: uint64(100 + i)})
	}
	old := f.events(r.id)
	_, oi := old.wait(t, 0, "ready", typ("ready"))
	if e := old.all(); e[0].ev["type"] != "group" || e[oi].ev["resumed"] == true {
		t.Fatalf("an id out of the ring got no fresh snapshot:\n%s", old.dump())
	}
	n, _ := strconv.ParseUint(r.id, 10, 64)
	future := f.events(strconv.FormatUint(n+1_000_000, 10))
	future.wait(t, 0, "snapshot for an unknown id", typ("group"))
}
