package dashboard_test

import (
	"net"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

const bannerJS = `(b => b.hidden ? "" : b.dataset.state + ": " + b.textContent)(document.getElementById("banner"))`

// The page says so when it loses the dashboard (its event stream cut) and
// when the dashboard loses NATS (a server restart, same port and store),
// and again when each comes back; the group is drawn again after both.
func TestBrowserReconnect(t *testing.T) {
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

	b := newBrowser(t)
	b.do(t, "open the page", chromedp.Navigate(f.web.URL+"/"))
	group := `document.querySelectorAll('section.group[data-group="g"] .lane[data-owner="m1"]').length === 4`
	b.waitJS(t, 30*time.Second, "the snapshot", `document.body.dataset.ready === "1" && `+group)

	// The page's own stream cut: the browser reconnects by itself.
	f.web.CloseClientConnections()
	b.waitJS(t, 30*time.Second, "the page's reconnect", bannerJS+` === "reconnected: reconnected"`)
	b.waitJS(t, 30*time.Second, "the group after the page's reconnect", group)

	// The dashboard's NATS server restarts.
	f.srv.Shutdown()
	f.srv.WaitForShutdown()
	b.waitJS(t, 30*time.Second, "the NATS disconnect on the page", bannerJS+` === "disconnected: NATS: disconnected — reconnecting"`)
	down := time.Now()
	f.srv = natstest.Start(t, opts)
	b.waitJS(t, 30*time.Second, "the NATS reconnect on the page", bannerJS+` === "reconnected: NATS: reconnected"`)
	t.Logf("the page said NATS reconnected %v after the server went down", time.Since(down).Round(time.Millisecond))
	b.waitJS(t, 30*time.Second, "the group after the restart", group+` && !document.querySelector('section.group[data-group="g"] [data-state-error]')`)
	b.waitJS(t, 10*time.Second, "both in the timeline", `document.querySelector('#timeline li[data-type="connection"]')`)
	if p := b.Problems(); len(p) > 0 {
		t.Fatalf("the page logged errors: %v", p)
	}
}
