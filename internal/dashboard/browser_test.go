package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// lane is one partition lane as the page draws it.
type lane struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Text      string `json:"text"`
	Color     string `json:"color"`
}

const lanesJS = `[...document.querySelectorAll('section.group[data-stream="ORDERS"][data-group="g"] .lane')].map(l => ({
	partition: Number(l.dataset.partition), owner: l.dataset.owner, text: l.innerText,
	color: getComputedStyle(l).getPropertyValue("--c").trim()}))`

// pinnedJS is the pin id the page shows for member m1's pinned instance.
const pinnedJS = `(document.querySelector('section.group[data-group="g"] .member[data-member="m1"] .instance[data-pinned="true"]') || {dataset: {}}).dataset.pinId || ""`

// The page in a real headless Chromium against a real server: it loads
// without console errors, draws the right lanes and owners, follows an
// `elastic add` made from the CLI and a step-down's pin change, shows the
// handlers' messages, and its add-member control changes the stored config.
func TestBrowserDashboard(t *testing.T) {
	start := time.Now()
	srv, js, env := clitest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"elastic", "create", "ORDERS", "g", "6", "--filter", "orders.*:1"},
		{"elastic", "add", "ORDERS", "g", "m1", "m2"},
	} {
		if r := clitest.Run(t, cmd.Run, env, args...); r.Code != 0 {
			t.Fatalf("%v: %s", args, r)
		}
	}
	client, err := cg.NewFromConn(natstest.Connect(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}

	// The dashboard, as `cg dashboard ORDERS` serves it, on loopback.
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
	url := dashboard.URL(ln.Addr())

	// One instance of m1, whose handler tells the page what it handled,
	// as the demo's do; traffic so that it is pinned.
	member, err := client.JoinElastic(ctx, "ORDERS", "g", "m1", func(_ context.Context, m *cg.Msg) {
		d.Emit(dashboard.Handled("ORDERS", "g", "m1", "m1/a", m))
		_ = m.Ack()
	}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer member.Stop()
	keys := traffic.Keys("k", 12)
	seq := map[string]uint64{}
	sent := 0
	publish := func(n int) {
		for range n {
			k := keys[sent%len(keys)]
			sent++
			seq[k]++
			msg := &nats.Msg{Subject: "orders." + k, Data: []byte("x"), Header: nats.Header{
				traffic.KeyHeader: []string{k}, traffic.KeySeqHeader: []string{strconv.FormatUint(seq[k], 10)}}}
			if _, err := js.PublishMsg(ctx, msg); err != nil {
				t.Fatalf("publish: %v", err)
			}
		}
	}

	b := newBrowser(t) // after the dashboard, so that the browser closes first
	b.do(t, "open the page", chromedp.Navigate(url))
	b.waitJS(t, 30*time.Second, "the snapshot", `document.body.dataset.ready === "1" && document.querySelectorAll('section.group[data-group="g"] .lane').length === 6`)
	publish(24) // handled events are live only: the page is listening now

	// Lanes 0..5, each owned as the stored config says, in its owner's colour.
	gi, err := client.Info(ctx, cg.KindElastic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]string{}
	for _, ms := range gi.Members {
		for _, p := range ms.Partitions {
			want[p] = ms.Member
		}
	}
	lanes := evalJS[[]lane](t, b, lanesJS)
	if len(lanes) != 6 {
		t.Fatalf("lanes %+v", lanes)
	}
	for i, l := range lanes {
		if l.Partition != i || l.Owner != want[i] || !strings.Contains(l.Text, "P"+fmt.Sprint(i)) || !strings.Contains(l.Text, want[i]) {
			t.Errorf("lane %d: %+v, want owner %q named in the text", i, l, want[i])
		}
		if c := dashboard.MemberColor(want[i]); !strings.EqualFold(l.Color, c) {
			t.Errorf("lane %d colour %q, want %s's %q", i, l.Color, want[i], c)
		}
	}

	// The handlers' messages, and m1's pin.
	b.waitJS(t, 30*time.Second, "handled keys", `document.querySelectorAll('section.group[data-group="g"] .hkey[data-handled-by="m1/a"]').length > 0`)
	b.waitJS(t, 10*time.Second, "keys on m1's lanes", `[...document.querySelectorAll('section.group[data-group="g"] .lane[data-owner="m1"] [data-lane-keys]')].some(k => /k\d+/.test(k.textContent))`)
	b.waitJS(t, 30*time.Second, "m1 pinned", pinnedJS+` !== ""`)

	// `cg elastic add` from the CLI: the page shows m3 owning lanes.
	r := clitest.Run(t, cmd.Run, env, "elastic", "add", "ORDERS", "g", "m3")
	added := time.Now()
	if r.Code != 0 {
		t.Fatalf("elastic add: %s", r)
	}
	took := b.waitJS(t, 30*time.Second, "m3 on the page", `document.querySelector('section.group[data-group="g"] .lane[data-owner="m3"]') && document.querySelector('section.group[data-group="g"] .member[data-member="m3"]')`)
	t.Logf("elastic add from the CLI reached the page in %v (polled every 20ms)", time.Since(added).Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("the add took %v to show; the dashboard promises about a second", took)
	}
	b.waitJS(t, 30*time.Second, "the add in the timeline", `document.querySelector('#timeline li[data-type="member_added"][data-member="m3"], #timeline li[data-type="rebalance"]')`)

	// A step-down from the CLI: the page shows a new pin for m1. The add
	// may have moved m1's pin already; start from the pin the member holds
	// once the page shows it.
	var oldPin string
	clitest.Eventually(t, 30*time.Second, "the page showing the pin m1 holds", func() bool {
		if sent < 600 { // bounded: at most 600 messages in all
			publish(len(keys))
		}
		oldPin = member.PinID()
		return oldPin != "" && evalJS[string](t, b, pinnedJS) == oldPin
	})
	if r := clitest.Run(t, cmd.Run, env, "elastic", "step-down", "ORDERS", "g", "m1"); r.Code != 0 {
		t.Fatalf("step-down: %s", r)
	}
	publish(12) // m1 pulls again, and is pinned afresh
	steppedAt := time.Now()
	b.waitJS(t, 30*time.Second, "m1's new pin", fmt.Sprintf(`(p => p !== "" && p !== %q)(%s)`, oldPin, pinnedJS))
	t.Logf("step-down: the page showed m1's new pin %v after the step-down", time.Since(steppedAt).Round(time.Millisecond))
	clitest.Eventually(t, 30*time.Second, "the page and the member agreeing on the new pin", func() bool {
		p := member.PinID()
		return p != "" && p != oldPin && evalJS[string](t, b, pinnedJS) == p
	})
	b.waitJS(t, 30*time.Second, "the step-down in the timeline",
		fmt.Sprintf(`document.querySelector('#timeline li[data-type="step_down"][data-member="m1"][data-prev-pin-id=%q]')`, oldPin))

	// The page's own control: add member m4.
	b.do(t, "add m4 from the page",
		chromedp.SendKeys(chromedp.CSS(`section.group[data-group="g"] form[data-controls] input[name="member"]`), "m4"),
		chromedp.Click(chromedp.CSS(`section.group[data-group="g"] form[data-controls] button[data-action="add"]`)),
	)
	clitest.Eventually(t, 30*time.Second, "m4 in the stored config", func() bool {
		c, err := client.ElasticConfig(ctx, "ORDERS", "g")
		return err == nil && slices.Contains(c.Members, "m4")
	})
	b.waitJS(t, 30*time.Second, "m4 on the page", `document.querySelector('section.group[data-group="g"] .member[data-member="m4"]')`)
	if e := evalJS[string](t, b, `document.querySelector('section.group[data-group="g"] [data-error]').textContent`); e != "" {
		t.Errorf("the page shows an error after the add: %q", e)
	}

	// The artifact (and, with CG_UPDATE_SCREENSHOT=1, README's picture).
	png := b.screenshot(t, "dashboard.png")
	if os.Getenv("CG_UPDATE_SCREENSHOT") == "1" {
		if err := os.WriteFile("../../docs/dashboard.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A bad control input is refused on the page, in words.
	b.do(t, "set a mapping with no partitions",
		chromedp.Click(chromedp.CSS(`section.group[data-group="g"] form[data-controls] button[data-action="mapping-create"]`)),
	)
	b.waitJS(t, 10*time.Second, "the error for missing partitions", `document.querySelector('section.group[data-group="g"] [data-error]').textContent.includes("partitions")`)

	if p := b.Problems(); len(p) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
	t.Logf("browser test took %v", time.Since(start).Round(time.Millisecond))
}

// A read-only dashboard's page shows no controls (the state says
// read_only), and a group with no members has every lane unowned.
func TestBrowserReadOnly(t *testing.T) {
	srv, js, env := clitest.Server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	if r := clitest.Run(t, cmd.Run, env, "elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1"); r.Code != 0 {
		t.Fatal(r)
	}
	client, err := cg.NewFromConn(natstest.Connect(t, srv), "")
	if err != nil {
		t.Fatal(err)
	}
	d, err := dashboard.New(client, dashboard.Options{ReadOnly: true, Every: 200 * time.Millisecond})
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
	t.Cleanup(func() { stopDash(); <-served })

	b := newBrowser(t)
	b.do(t, "open the page", chromedp.Navigate(dashboard.URL(ln.Addr())))
	b.waitJS(t, 30*time.Second, "the snapshot", `document.body.dataset.ready === "1" && document.querySelector('section.group[data-group="g"]')`)
	var st struct {
		Hidden bool `json:"hidden"`
		Badge  bool `json:"badge"`
		Unown  int  `json:"unowned"`
	}
	raw := evalJS[string](t, b, `JSON.stringify({hidden: document.querySelector('section.group[data-group="g"] form[data-controls]').hidden,
		badge: !document.getElementById("readonly").hidden, unowned: document.querySelectorAll('section.group[data-group="g"] .lane[data-owner=""]').length})`)
	if err := json.Unmarshal([]byte(raw), &st); err != nil {
		t.Fatal(err)
	}
	if !st.Hidden || !st.Badge || st.Unown != 4 {
		t.Fatalf("read-only page: %+v (want controls hidden, the badge shown, 4 unowned lanes)", st)
	}
	if n := evalJS[int](t, b, `[...document.querySelectorAll('section.group button')].filter(b => b.offsetParent !== null).length`); n != 0 {
		t.Fatalf("%d control buttons visible on a read-only page", n)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Fatalf("the page logged errors:\n%s", strings.Join(p, "\n"))
	}
}
