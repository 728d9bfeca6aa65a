package memberhttp_test

import (
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/memberhttp"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func code(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// Before the join the instance is alive but not ready; a connection that
// is closed for good (no reconnects left) fails /healthz too, so that an
// orchestrator restarts the process.
func TestHealthWithoutReconnects(t *testing.T) {
	s := natstest.RunServer(t)
	nc := natstest.Connect(t, s, nats.MaxReconnects(0))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := memberhttp.New(ln, nc.Status)
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	defer srv.Close()
	url := srv.URL()
	if c := code(t, url+"/healthz"); c != 200 {
		t.Errorf("/healthz before the join: %d, want 200", c)
	}
	if c := code(t, url+"/readyz"); c != 503 {
		t.Errorf("/readyz before the join: %d, want 503", c)
	}
	s.Shutdown()
	natstest.Eventually(t, 5*time.Second, "the connection closed", func() bool { return nc.Status() == nats.CLOSED })
	if c := code(t, url+"/healthz"); c != 503 {
		t.Errorf("/healthz with the connection closed for good: %d, want 503", c)
	}
}
