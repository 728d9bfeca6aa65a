package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// TestDashboardCommand: `cg dashboard ORDERS --listen 127.0.0.1:0` prints
// the URL (stderr "dashboard: URL", stdout the URL alone), serves the
// page, /events with the group and /metrics, and stops cleanly (exit 0)
// on Ctrl-C.
func TestDashboardCommand(t *testing.T) {
	_, js, env := clitest.Server(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 2, Members: []string{"m1"},
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	a := clitest.Start(cmd.Run, env, "dashboard", "ORDERS", "--listen", "127.0.0.1:0", "--read-only", "--every", "100ms")
	defer a.Stop(t)
	a.WaitOut(t, 30*time.Second, "the URL on stdout", func(out string) bool { return strings.HasSuffix(out, "/\n") })
	url := strings.TrimSpace(a.Out.String())
	if !strings.HasPrefix(url, "http://127.0.0.1:") || strings.HasSuffix(url, ":0/") {
		t.Fatalf("stdout %q, want http://127.0.0.1:PORT/", url)
	}
	if !strings.Contains(a.Err.String(), "dashboard: "+url+"\n") {
		t.Fatalf("stderr %q, want 'dashboard: %s'", a.Err.String(), url)
	}

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), "<html") {
		t.Fatalf("GET /: %s", resp.Status)
	}

	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ectx, "GET", url+"events", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var sawGroup bool
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("data line %q: %v", line, err)
		}
		if e["type"] == "group" && e["group"] == "g" && e["stream"] == "ORDERS" {
			if st := e["state"].(map[string]any); st["read_only"] != true {
				t.Fatalf("--read-only not in the state: %v", st)
			}
			sawGroup = true
			break
		}
	}
	if !sawGroup {
		t.Fatalf("no group state on /events: %v", sc.Err())
	}

	mresp, err := http.Get(url + "metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(mb), `cg_partition_pending{group="g",member="m1",partition="0",stream="ORDERS"}`) {
		t.Fatalf("/metrics lacks partition 0's pending:\n%s", mb)
	}
	if code := a.Stop(t); code != 0 {
		t.Fatalf("exit %d on interrupt; stderr:\n%s", code, a.Err.String())
	}
}

// TestDashboardBadInput: each mistake is one line saying what to mend,
// with a non-zero exit and nothing served.
func TestDashboardBadInput(t *testing.T) {
	_, js, env := clitest.Server(t)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		word string
	}{
		{[]string{"dashboard", "ORDERS", "--listen", "nonsense"}, "--listen"},
		{[]string{"dashboard", "ORDERS", "--every", "0s"}, "--every"},
		{[]string{"dashboard", "a", "b", "c"}, "at most"},
		{[]string{"dashboard", "NOPE", "--listen", "127.0.0.1:0"}, "NOPE"},
		{[]string{"dashboard", "ORDERS", "nope", "--listen", "127.0.0.1:0"}, "nope"},
	} {
		r := clitest.Run(t, cmd.Run, env, c.args...)
		if r.Code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		// One error line (a usage error adds the pointer to --help).
		if el := clitest.ErrorLines(r.Err); len(el) != 1 || !strings.Contains(el[0], c.word) {
			t.Errorf("%v: error lines %q, want one naming %q", c.args, el, c.word)
		}
		if r.Out != "" {
			t.Errorf("%v: stdout %q, want nothing", c.args, r.Out)
		}
	}
}
