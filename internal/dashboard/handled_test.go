package dashboard_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// TestHandledEvents: a handler emitting Handled for each message it
// handles (as the demo does) puts one "handled" event per message on
// /events, naming instance, key, subject, stream sequence and pin.
func TestHandledEvents(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{})
	m, err := f.fresh().JoinElastic(context.Background(), "ORDERS", "g", "m1", func(ctx context.Context, msg *cg.Msg) {
		f.d.Emit(dashboard.Handled("ORDERS", "g", "m1", "m1/a", msg))
		_ = msg.Ack()
	}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	es := f.events("")
	_, ri := es.wait(t, 0, "ready", typ("ready"))
	for i := range 3 {
		msg := nats.NewMsg("orders.k" + string(rune('a'+i)))
		msg.Header.Set(traffic.KeyHeader, "k"+string(rune('a'+i)))
		if _, err := f.js.PublishMsg(context.Background(), msg); err != nil {
			t.Fatal(err)
		}
	}
	es.wait(t, ri, "the third handled", func(e map[string]any) bool { return e["type"] == "handled" && e["key"] == "kc" })
	var seqs []float64
	for _, g := range es.all() {
		e := g.ev
		if e["type"] != "handled" {
			continue
		}
		seqs = append(seqs, e["seq"].(float64))
		if e["instance"] != "m1/a" || e["member"] != "m1" || e["pin_id"] == "" || !strings.HasPrefix(e["subject"].(string), "orders.k") {
			t.Errorf("handled event %v", e)
		}
	}
	if len(seqs) != 3 || seqs[0] != 1 || seqs[1] != 2 || seqs[2] != 3 {
		t.Fatalf("handled seqs %v, want 1 2 3 once each", seqs)
	}
}

// TestKeepAlive: an idle /events stream gets keep-alive comments, and
// starts by telling the browser to retry after a second.
func TestKeepAlive(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{KeepAlive: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	first, n := "", 0
	for sc.Scan() {
		if first == "" {
			first = sc.Text()
		}
		if sc.Text() == ": keep-alive" {
			if n++; n == 2 {
				break
			}
		}
	}
	if n < 2 || first != "retry: 1000" {
		t.Fatalf("first line %q, %d keep-alives (%v)", first, n, sc.Err())
	}
}
