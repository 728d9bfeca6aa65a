package dashboard_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The page in a real headless Chromium: a member started with
// `cg elastic consume --dynamic` appears with a "dynamic" badge and when it
// was last seen, its join in the timeline as a member added; its clean
// stop takes it off the page and into the timeline as a member removed.
// An operator's member, never run, has neither badge nor last seen.
func TestBrowserDynamicMembers(t *testing.T) {
	srv, js, env := clitest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1"},
		{"elastic", "add", "ORDERS", "g", "op"},
	} {
		if r := clitest.Run(t, cmd.Run, env, args...); r.Code != 0 {
			t.Fatalf("%v: %s", args, r)
		}
	}
	client, err := cg.NewFromConn(natstest.Connect(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(client, dashboard.Options{Stream: "ORDERS", Every: 200 * time.Millisecond, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dctx, stopDash := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- d.Serve(dctx, ln) }()
	t.Cleanup(func() {
		stopDash()
		if err := <-served; err != nil {
			t.Errorf("dashboard: %v", err)
		}
	})

	b := newBrowser(t)
	b.do(t, "open the page", chromedp.Navigate(dashboard.URL(ln.Addr())))
	const group = `section.group[data-group="g"]`
	b.waitJS(t, 30*time.Second, "the snapshot", `document.body.dataset.ready === "1" && document.querySelector('`+group+` .member[data-member="op"]')`)

	d1 := clitest.Start(cmd.Run, env, "elastic", "consume", "ORDERS", "g", "d1", "--dynamic", "--session-timeout", "2s")
	started := time.Now()
	defer d1.Stop(t)
	const member = group + ` .member[data-member="d1"][data-dynamic="true"]`
	b.waitJS(t, 30*time.Second, "d1 on the page with its badge", `document.querySelector('`+member+` .badge.dynamic')`)
	t.Logf("a --dynamic start reached the page in %v", time.Since(started).Round(time.Millisecond))
	b.waitJS(t, 30*time.Second, "d1 owning lanes", `document.querySelector('`+group+` .lane[data-owner="d1"]')`)
	b.waitJS(t, 30*time.Second, "d1 last seen", `(s => s && s.dataset.lastSeen !== "" && /seen [0-9.]+m?s ago/.test(s.textContent))(document.querySelector('`+member+` .seen'))`)
	b.waitJS(t, 30*time.Second, "d1's join in the timeline", `document.querySelector('#timeline li[data-type="member_added"][data-member="d1"][data-dynamic="true"]')`)
	if n := evalJS[int](t, b, `document.querySelectorAll('`+group+` .member[data-member="op"] .badge.dynamic, `+group+` .member[data-member="op"] .seen').length`); n != 0 {
		t.Fatalf("the operator's member op shows a dynamic badge or a last seen (%d elements)", n)
	}

	if code := d1.Stop(t); code != 0 {
		t.Fatalf("d1 stopped with exit %d:\n%s", code, d1.Err.String())
	}
	stopped := time.Now()
	b.waitJS(t, 30*time.Second, "d1 off the page", `!document.querySelector('`+group+` .member[data-member="d1"]') && !document.querySelector('`+group+` .lane[data-owner="d1"]')`)
	t.Logf("a --dynamic clean stop left the page in %v", time.Since(stopped).Round(time.Millisecond))
	b.waitJS(t, 30*time.Second, "d1's leave in the timeline", `document.querySelector('#timeline li[data-type="member_removed"][data-member="d1"][data-dynamic="true"]')`)

	if p := b.Problems(); len(p) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}
