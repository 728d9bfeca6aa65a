package demo

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
)

// Bounds of --web.
const (
	defaultWebListen = "127.0.0.1:0"
	maxWebHold       = time.Hour
)

// web is the dashboard `cg demo --web` runs beside the walkthrough.
type web struct {
	srv  *dashboard.Server
	url  string
	stop context.CancelFunc
	done chan error
}

// checkWebListen refuses a --web-listen that is not host:port, before
// anything starts.
func checkWebListen(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--web-listen %q is not host:port: use such as 127.0.0.1:7777, or 127.0.0.1:0 for a free port", addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--web-listen %q is not a loopback address: the demo's page has live controls, so it serves 127.0.0.1 only; use such as 127.0.0.1:7777", addr)
	}
	return nil
}

// startWeb serves the dashboard of the demo's group on o.WebListen.
func (d *demo) startWeb(ctx context.Context) error {
	srv, err := dashboard.New(d.admin, dashboard.Options{Stream: streamName, Group: groupName})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.o.WebListen)
	if err != nil {
		return fmt.Errorf("--web-listen %s: %w", d.o.WebListen, err)
	}
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w := &web{srv: srv, url: dashboard.URL(ln.Addr()), stop: stop, done: make(chan error, 1)}
	go func() { w.done <- srv.Serve(sctx, ln) }()
	d.web = w
	d.step("Dashboard: "+w.url,
		"Open it beside this walkthrough: partitions as lanes in their owner's colour, the members'",
		"instances and pins, and a timeline of pins, step-downs, failovers and rebalances as they happen,",
		"with each message the handlers take (which instance handled which key).")
	// One plain line a script can find.
	d.logf("dashboard: %s", w.url)
	return nil
}

// stopWeb ends the dashboard, cutting open event streams.
func (d *demo) stopWeb() {
	if d.web == nil {
		return
	}
	d.web.stop()
	<-d.web.done
}

// handled tells the page which instance handled which message.
func (d *demo) handled(inst *instance, m *cg.Msg) {
	if d.web == nil {
		return
	}
	d.web.srv.Emit(dashboard.Handled(streamName, groupName, inst.member, inst.name, m))
}

// hold keeps the page open after the verdict, until --web-hold passes or
// the demo is interrupted.
func (d *demo) hold(ctx context.Context) {
	if d.web == nil || d.o.WebHold <= 0 {
		return
	}
	d.logf("keeping the dashboard at %s open for %v (interrupt to end)", d.web.url, d.o.WebHold)
	_ = sleepCtx(ctx, d.o.WebHold)
}
