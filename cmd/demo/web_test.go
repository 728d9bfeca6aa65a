package demo_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

// `cg demo --web` serves the group's dashboard while the walkthrough runs:
// /events carries the group's state and the handlers' messages (which
// instance handled which key), and the demo still passes by counting;
// --web-hold keeps the page up after the verdict, then it goes.
func TestDemoWebEvents(t *testing.T) {
	port := clitest.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	a := clitest.Start(cmd.Run, clitest.Env(), "--json", "demo", "--web", "--web-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--web-hold", "3s",
		"--phase", "500ms", "--ack-wait", "1s", "--keys", "8", "--rate", "100/s", "--sleep", "1ms")
	a.WaitErr(t, 30*time.Second, "the dashboard's URL", func(s string) bool { return strings.Contains(s, "dashboard: "+url) })

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("/events content type %q", ct)
	}
	var (
		group   bool
		handled = map[string]int{} // instance -> messages
		parted  bool
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && !(group && len(handled) >= 2 && parted) {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type, Stream, Group, Member, Instance, Subject, Key string
			Seq                                                 uint64
			Partitions                                          []int
			State                                               json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, line)
		}
		switch ev.Type {
		case "group":
			var st struct {
				Kind       string `json:"kind"`
				Partitions int    `json:"partitions"`
				Members    []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			if err := json.Unmarshal(ev.State, &st); err != nil {
				t.Fatalf("group state: %v: %s", err, line)
			}
			if ev.Stream != "ORDERS" || ev.Group != "fulfillment" || st.Kind != "static" || st.Partitions != 10 || len(st.Members) != 2 {
				t.Fatalf("group event %s", line)
			}
			group = true
		case "handled":
			if ev.Stream != "ORDERS" || ev.Group != "fulfillment" || !strings.HasPrefix(ev.Instance, ev.Member+"/") || ev.Key == "" || ev.Seq == 0 {
				t.Fatalf("handled event %s", line)
			}
			handled[ev.Instance]++
			// The subject as the handler sees it, and its partition.
			if ev.Subject != "orders."+ev.Key || len(ev.Partitions) != 1 || ev.Partitions[0] < 0 || ev.Partitions[0] >= 10 {
				t.Fatalf("handled event's subject or partition: %s", line)
			}
			parted = true
		}
	}
	if !group || len(handled) < 2 || !parted {
		t.Fatalf("from /events: group state %v, handled by %v, with partitions %v (scan: %v)", group, handled, parted, sc.Err())
	}
	t.Logf("handled events by instance while reading: %v", handled)
	resp.Body.Close()

	// --web-hold: the verdict is out and the page still answers.
	a.WaitOut(t, 30*time.Second, "the verdict", func(s string) bool { return strings.Contains(s, `"ok"`) })
	held, err := http.Get(url)
	if err != nil || held.StatusCode != http.StatusOK {
		t.Fatalf("the dashboard during --web-hold: %v %v", err, held)
	}
	held.Body.Close()
	if code := a.Wait(t); code != 0 {
		t.Fatalf("demo --web exit %d\nstdout:\n%s\nstderr:\n%s", code, a.Out, a.Err)
	}
	var v struct {
		OK bool `json:"ok"`
	}
	if err := json.Unmarshal([]byte(a.Out.String()), &v); err != nil || !v.OK {
		t.Fatalf("verdict (%v):\n%s", err, a.Out)
	}
	// The dashboard went away with the demo.
	if _, err := http.Get(url); err == nil {
		t.Errorf("the dashboard still answers at %s after the demo ended", url)
	}
}

func TestDemoWebUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"demo", "--web-hold", "1m"}, "go with --web"},
		{[]string{"demo", "--web", "--web-listen", "0.0.0.0:7777"}, "not a loopback address"},
		{[]string{"demo", "--web", "--web-listen", "7777"}, "not host:port"},
		{[]string{"demo", "--web", "--web-hold", "2h"}, "--web-hold"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), tc.args...)
		if r.Code != 2 || !strings.Contains(r.Err, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Err, tc.says)
		}
	}
}

// `cg demo elastic --web`: the page follows the dynamic member too. A
// group state names m4 once it added itself, m4's instance shows in the
// handled messages, and a later state no longer names m4 once it stopped.
func TestDemoElasticWebDynamic(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	port := clitest.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	a := clitest.Start(cmd.Run, clitest.Env(), "--json", "demo", "elastic", "--web", "--web-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--phase", "1s", "--ack-wait", "1s", "--keys", "16", "--rate", "200/s", "--sleep", "1ms")
	a.WaitErr(t, 30*time.Second, "the dashboard's URL", func(s string) bool { return strings.Contains(s, "dashboard: "+url) })

	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url+"events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /events: %v", err)
	}
	defer resp.Body.Close()
	var (
		joined  bool // a state named m4
		handled int  // messages m4/a handled
		left    bool // a state after that without m4
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && !left {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type, Group, Instance string
			State                 json.RawMessage
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("event is not JSON: %v: %s", err, line)
		}
		switch ev.Type {
		case "group":
			var st struct {
				Members []struct {
					Name string `json:"name"`
				} `json:"members"`
			}
			if err := json.Unmarshal(ev.State, &st); err != nil {
				t.Fatalf("group state: %v: %s", err, line)
			}
			named := false
			for _, m := range st.Members {
				named = named || m.Name == "m4"
			}
			switch {
			case named:
				joined = true
			case joined && handled > 0:
				left = true
			}
		case "handled":
			if ev.Instance == "m4/a" {
				handled++
			}
		}
	}
	if !joined || handled == 0 || !left {
		t.Fatalf("from /events: m4 in a group state %v, m4/a handled %d, a later state without m4 %v (scan: %v)\nstderr:\n%s",
			joined, handled, left, sc.Err(), a.Err)
	}
	resp.Body.Close()
	if code := a.Wait(t); code != 0 {
		t.Fatalf("demo elastic --web exit %d\nstdout:\n%s\nstderr:\n%s", code, a.Out, a.Err)
	}
	var v struct {
		OK bool `json:"ok"`
	}
	if err := json.Unmarshal([]byte(a.Out.String()), &v); err != nil || !v.OK {
		t.Fatalf("verdict (%v):\n%s", err, a.Out)
	}
}
