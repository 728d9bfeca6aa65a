package dashboard_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestStaticGroup: a static group beside the elastic one shows with its
// kind and owners; a step-down POSTed with kind static releases the pin
// the page showed; the dashboard narrowed to one group shows only it;
// deleting the group sends group_removed.
func TestStaticGroup(t *testing.T) {
	f := newFixture(t, nil, "m1")
	ctx := context.Background()
	if _, err := f.js.CreateStream(ctx, jetstream.StreamConfig{Name: "PAY", Subjects: []string{"pay.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "pay.*", Destination: "{{partition(2,1)}}.pay.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.CreateStatic(ctx, "PAY", "s", cg.StaticConfig{MaxMembers: 2, Members: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	m, err := f.fresh().JoinStatic(ctx, "PAY", "s", "a", func(ctx context.Context, msg *cg.Msg) { _ = msg.Ack() }, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	for _, k := range []string{"x", "y", "z", "w"} {
		if _, err := f.js.Publish(ctx, "pay."+k, nil); err != nil {
			t.Fatal(err)
		}
	}
	f.start(nil, dashboard.Options{Stream: "PAY", Group: "s"})
	pin := pinOf(t, f.d, "a", func(p string) bool { return p != "" })
	es := f.events("")
	g, _ := es.wait(t, 0, "static group", typ("group"))
	if g.ev["kind"] != "static" || g.ev["stream"] != "PAY" || g.ev["group"] != "s" {
		t.Fatalf("group event %v, want static PAY/s", g.ev)
	}
	if got := owners(groupState(g.ev)); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("owners %v, want a b", got)
	}
	_, ri := es.wait(t, 0, "ready", typ("ready"))
	for _, e := range es.all()[:ri] {
		if e.ev["type"] == "group" && e.ev["stream"] != "PAY" {
			t.Fatalf("a dashboard narrowed to PAY/s shows %v/%v", e.ev["stream"], e.ev["group"])
		}
	}
	code, rep := f.post(t, "/api/elastic/add", "", map[string]any{"stream": "ORDERS", "group": "g", "member": "m9"})
	if code != http.StatusForbidden {
		t.Fatalf("a control on a group out of view: %d %v, want 403", code, rep)
	}
	code, rep = f.post(t, "/api/step-down", "", map[string]any{"kind": "static", "stream": "PAY", "group": "s", "member": "a"})
	if code != 200 || rep["prev_pin_id"] != pin {
		t.Fatalf("step-down: %d %v, want ok releasing %s", code, rep, pin)
	}
	es.wait(t, ri, "step_down of a", func(e map[string]any) bool {
		return e["type"] == "step_down" && e["member"] == "a" && e["prev_pin_id"] == pin
	})
	m.Stop()
	if _, err := f.c.Delete(ctx, cg.KindStatic, "PAY", "s"); err != nil {
		t.Fatal(err)
	}
	es.wait(t, ri, "group_removed", func(e map[string]any) bool {
		return e["type"] == "group_removed" && e["stream"] == "PAY" && e["group"] == "s"
	})
	natstest.Eventually(t, 30*time.Second, "the state gone", func() bool { return len(f.d.States()) == 0 })
}
