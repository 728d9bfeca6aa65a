package dashboard_test

import (
	"context"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestServerRestart: a dashboard outliving a restart of its server (same
// port, same store) says "connection" disconnected, then reconnected, and
// goes on: the group's state is sent again and a change made after the
// restart shows up.
func TestServerRestart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := natstest.Options(t.TempDir())
	opts.Port = port
	f := newFixture(t, opts, "m1")
	nc := natstest.Connect(t, f.srv, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	dc, err := cg.NewFromConn(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	f.start(dc, dashboard.Options{})
	sampled(t, f.d)
	es := f.events("")
	_, ri := es.wait(t, 0, "ready", typ("ready"))

	f.srv.Shutdown()
	f.srv.WaitForShutdown()
	down, di := es.wait(t, ri, "connection disconnected", func(e map[string]any) bool {
		return e["type"] == "connection" && e["state"] == "disconnected"
	})
	// A page opened while the server is away learns it from its snapshot.
	late := f.events("")
	late.wait(t, 0, "connection disconnected in a snapshot", func(e map[string]any) bool {
		return e["type"] == "connection" && e["state"] == "disconnected"
	})

	f.srv = natstest.Start(t, opts)
	up, ui := es.wait(t, di, "connection reconnected", func(e map[string]any) bool {
		return e["type"] == "connection" && e["state"] == "reconnected"
	})
	t.Logf("disconnected at +0, reconnected %s after", up.at.Sub(down.at))
	es.wait(t, ui, "group state after the reconnect", func(e map[string]any) bool {
		return e["type"] == "group" && e["group"] == "g" && groupState(e)["error"] == nil
	})
	// The engine's own connection (f.c) reconnects too; a change made now
	// shows.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := f.fresh().AddMembers(context.Background(), "ORDERS", "g", []string{"m2"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("add after restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	es.wait(t, ui, "m2 after the restart", func(e map[string]any) bool {
		return e["type"] == "group" && slices.Contains(owners(groupState(e)), "m2")
	})
}
