package dashboard_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestEventsFailover: when the pinned instance dies (its connection cut,
// as a kill -9 would) the standby takes over, and /events says failover
// with the old and the new pin id.
func TestEventsFailover(t *testing.T) {
	f := newFixture(t, nil, "m1")
	var mu sync.Mutex
	handledBy := map[string]string{} // instance → pin id it handled under
	conns := map[string]*nats.Conn{}
	for _, name := range []string{"a", "b"} {
		nc := natstest.Connect(t, f.srv)
		conns[name] = nc
		c, _ := cg.NewFromConn(nc, "")
		m, err := c.JoinElastic(context.Background(), "ORDERS", "g", "m1", func(ctx context.Context, msg *cg.Msg) {
			mu.Lock()
			handledBy[name] = msg.PinID()
			mu.Unlock()
			_ = msg.Ack()
		}, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if !nc.IsClosed() {
				m.Stop()
			}
		})
	}
	f.start(nil, dashboard.Options{})
	f.publish(4)
	old := pinOf(t, f.d, "m1", func(p string) bool { return p != "" })
	// Who handles a message now is the pinned instance.
	mu.Lock()
	clear(handledBy)
	mu.Unlock()
	f.publish(1)
	var pinned string
	natstest.Eventually(t, 30*time.Second, "a handler under the pin", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for n, p := range handledBy {
			if p == old {
				pinned = n
			}
		}
		return pinned != ""
	})
	mu.Lock()
	t.Logf("pin %s; handled by %v; cutting %s", old, handledBy, pinned)
	mu.Unlock()
	es := f.events("")
	_, ri := es.wait(t, 0, "ready", typ("ready"))
	start := time.Now()
	conns[pinned].Close()
	// Keep publishing so the standby gets pinned once the pin times out.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for range 600 {
			select {
			case <-done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			_, _ = f.js.Publish(context.Background(), "orders.k1", []byte("x"))
		}
	}()
	fo, _ := es.wait(t, ri, "failover", typ("failover"))
	t.Logf("failover shown %s after the pinned instance's connection was cut", fo.at.Sub(start))
	if fo.ev["member"] != "m1" || fo.ev["prev_pin_id"] != old || fo.ev["pin_id"] == "" || fo.ev["pin_id"] == old {
		t.Fatalf("failover %v, want m1 from pin %s to a new one", fo.ev, old)
	}
}
