package group_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

var listenURL = regexp.MustCompile(`listening: (http://\S+) `)

// startListening starts consume with --listen 127.0.0.1:0 and returns it
// with the URL it printed.
func startListening(t *testing.T, env func(string) string, args ...string) (*clitest.Async, string) {
	t.Helper()
	a := clitest.Start(cmd.Run, env, append(args, "--listen", "127.0.0.1:0", "--sleep", "0s")...)
	t.Cleanup(func() { a.Stop(t) })
	var url string
	a.WaitErr(t, 30*time.Second, "the listening line", func(s string) bool {
		if m := listenURL.FindStringSubmatch(s); m != nil {
			url = m[1]
		}
		return url != ""
	})
	return a, url
}

// get returns the status code and body of url ("" and 0 when it cannot
// be reached).
func get(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metric sums the samples of name whose labels include every pair of want
// (label="value"), from a /metrics text page.
func metric(page, name string, want ...string) float64 {
	total := 0.0
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, w := range want {
			if !strings.Contains(line, w) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		total += v
	}
	return total
}

// A bad --listen: one line naming the flag, exit 2, nothing joined; a port
// already taken: exit 1 with the address, nothing joined either.
func TestConsumeListenBadInput(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	before := clitest.Inventory(t, e.js)
	for _, addr := range []string{"9090", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:http", "a:b:c"} {
		r := clitest.Run(t, cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--count", "1", "--listen", addr)
		errs := clitest.ErrorLines(r.Err)
		if r.Code != 2 || len(errs) != 1 {
			t.Errorf("--listen %q: exit %d, want 2 with one error line; stderr %q", addr, r.Code, r.Err)
			continue
		}
		clitest.OneLine(t, addr, errs[0], "--listen", "host:port")
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	r := clitest.Run(t, cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--count", "1", "--listen", taken.Addr().String())
	if r.Code != 1 || !strings.Contains(r.Err, "cannot listen on "+taken.Addr().String()) {
		t.Errorf("a taken port: exit %d, stderr %q; want exit 1 naming the address", r.Code, r.Err)
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("a refused consume changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// /readyz follows the NATS connection: 503 within 5s of the server going
// away while /healthz stays 200, and 200 again within 5s of its return
// (same port, same store).
func TestConsumeListenReadyFollowsConnection(t *testing.T) {
	port := clitest.FreePort(t)
	opts := natstest.Options(t.TempDir())
	opts.Port = port
	s := natstest.Start(t, opts)
	_, js := natstest.JetStream(t, s)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	env := clitest.Env("NATS_URL=" + s.ClientURL())
	if r := clitest.Run(t, cmd.Run, env, "static", "create", "balanced", "ORDERS", "g", "4", "m1"); r.Code != 0 {
		t.Fatalf("create: %s", r)
	}
	_, url := startListening(t, env, "static", "consume", "ORDERS", "g", "m1")
	clitest.Eventually(t, 30*time.Second, "/readyz 200", func() bool { c, _ := get(url + "/readyz"); return c == 200 })

	s.Shutdown()
	s.WaitForShutdown()
	down := time.Now()
	clitest.Eventually(t, 5*time.Second, "/readyz 503 with the server gone", func() bool { c, _ := get(url + "/readyz"); return c == 503 })
	t.Logf("/readyz 503 %s after the shutdown", time.Since(down).Round(time.Millisecond))
	if c, body := get(url + "/readyz"); !strings.Contains(body, "NATS connection") {
		t.Errorf("/readyz while NATS is down: %d %q, want it to name the connection", c, body)
	}
	if c, body := get(url + "/healthz"); c != 200 {
		t.Errorf("/healthz while only NATS is down: %d %q, want 200", c, body)
	}

	back := time.Now()
	s = natstest.Start(t, opts)
	clitest.Eventually(t, 5*time.Second, "/readyz 200 with the server back", func() bool { c, _ := get(url + "/readyz"); return c == 200 })
	t.Logf("/readyz 200 %s after the restart", time.Since(back).Round(time.Millisecond))
	_ = s
}

// A member stopped by a terminal error (its static group changed on the
// server) answers /readyz 503 before it exits: it keeps serving until a
// probe has seen it, then exits 1 at once.
func TestConsumeListenTerminalError(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	a, url := startListening(t, e.env, "static", "consume", "ORDERS", "g", "m1", "--listen-linger", "60s")
	clitest.Eventually(t, 30*time.Second, "/readyz 200", func() bool { c, _ := get(url + "/readyz"); return c == 200 })
	clitest.Store(t, e.js, cg.StaticBucket, "ORDERS.g", `{"max_members":4,"members":["m1","m2"]}`)
	a.WaitErr(t, 30*time.Second, "the stop on the change", func(s string) bool { return strings.Contains(s, "stopped") })
	// Still serving: with a 60s linger only a probe's 503 lets it exit.
	if c, _ := get(url + "/healthz"); c != 503 {
		t.Errorf("/healthz after the stop: %d, want 503", c)
	}
	c, body := get(url + "/readyz")
	if c != 503 || !strings.Contains(body, "changed") {
		t.Fatalf("/readyz after the terminal error: %d %q, want 503 naming the change", c, body)
	}
	code, ended := a.Within(t, 10*time.Second)
	if !ended || code != 1 {
		t.Fatalf("after the probe saw the stop: ended %v, exit %d; want exit 1 at once", ended, code)
	}
}

// /metrics counts: the pinned instance's acked messages sum to what it
// handled, its failures and dead letters under a policy, its pinned gauge
// is 1 on its partitions and the standby's 0.
func TestConsumeListenMetrics(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	flags := []string{"static", "consume", "ORDERS", "g", "m1", "--max-deliver", "2", "--dead-letter", "dlq.orders", "--fail-subject", "orders.k3"}
	a1, url1 := startListening(t, e.env, flags...)
	ctx := context.Background()
	if _, err := e.js.Publish(ctx, "orders.k0", nil); err != nil {
		t.Fatal(err)
	}
	a1.WaitErr(t, 30*time.Second, "instance 1 pinned", func(s string) bool { return strings.Contains(s, "pinned:") })
	_, url2 := startListening(t, e.env, flags...)
	clitest.Eventually(t, 30*time.Second, "the standby ready", func() bool { c, _ := get(url2 + "/readyz"); return c == 200 })
	const n = 40 // keys k0..k9, 4 of them k3
	for i := 1; i < n; i++ {
		if _, err := e.js.Publish(ctx, fmt.Sprintf("orders.k%d", i%10), nil); err != nil {
			t.Fatal(err)
		}
	}
	var page string
	clitest.Eventually(t, 30*time.Second, "36 acked and 4 dead-lettered", func() bool {
		_, page = get(url1 + "/metrics")
		return metric(page, "cg_member_messages_total", `result="acked"`) == n-4 &&
			metric(page, "cg_member_messages_total", `result="dead_lettered"`) == 4
	})
	if f := metric(page, "cg_member_messages_total", `result="failed"`); f != 4 {
		t.Errorf("failed = %v, want 4 (the first delivery of each orders.k3 message)", f)
	}
	if d := metric(page, "cg_member_handler_duration_seconds_count"); d != n+4 {
		t.Errorf("handler durations counted %v, want %d", d, n+4)
	}
	_, page2 := get(url2 + "/metrics")
	for p := range 4 {
		lbl := fmt.Sprintf(`partition="%d"`, p)
		if v := metric(page, "cg_member_pinned", lbl); v != 1 {
			t.Errorf("pinned instance: cg_member_pinned{%s} = %v, want 1", lbl, v)
		}
		if !strings.Contains(page2, "cg_member_pinned{") || metric(page2, "cg_member_pinned", lbl) != 0 {
			t.Errorf("standby: cg_member_pinned{%s} = %v (shown: %v), want 0", lbl, metric(page2, "cg_member_pinned", lbl), strings.Contains(page2, "cg_member_pinned{"+lbl))
		}
	}
	if v := metric(page2, "cg_member_messages_total"); v != 0 {
		t.Errorf("standby counted %v messages, want 0", v)
	}
	if c, body := get(url1 + "/readyz"); c != 200 || !strings.Contains(body, "pinned") {
		t.Errorf("pinned instance /readyz: %d %q", c, body)
	}
	if c, body := get(url2 + "/readyz"); c != 200 || !strings.Contains(body, "standby") {
		t.Errorf("standby /readyz: %d %q", c, body)
	}
}

// An elastic member's endpoint: ready once it pulls its partitions,
// pinned on all of them, its messages counted.
func TestConsumeListenElastic(t *testing.T) {
	e := newEnv(t, 4)
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1")
	_, url := startListening(t, e.env, "elastic", "consume", "PLAIN", "e", "m1")
	const n = 20
	for i := range n {
		if _, err := e.js.Publish(context.Background(), fmt.Sprintf("plain.k%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	var page string
	clitest.Eventually(t, 30*time.Second, "20 acked", func() bool {
		_, page = get(url + "/metrics")
		return metric(page, "cg_member_messages_total", `stream="PLAIN"`, `group="e"`, `member="m1"`, `result="acked"`) == n
	})
	if v := metric(page, "cg_member_pinned"); v != 4 {
		t.Errorf("pinned gauges sum to %v, want 4 (partitions 0-3)", v)
	}
	if c, body := get(url + "/readyz"); c != 200 || !strings.Contains(body, "pinned, partitions 0-3") {
		t.Errorf("/readyz: %d %q, want 200 pinned on 0-3", c, body)
	}
}
