package dashboard_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// fixture is a real server with an elastic group "g" on ORDERS (and a
// dashboard over it, once started).
type fixture struct {
	t   *testing.T
	srv *server.Server
	js  jetstream.JetStream
	c   *cg.Client
	d   *dashboard.Server
	web *httptest.Server
}

func newFixture(t *testing.T, opts *server.Options, members ...string) *fixture {
	t.Helper()
	if opts == nil {
		opts = natstest.Options(t.TempDir())
	}
	s := natstest.Start(t, opts)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 4, Members: members,
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, srv: s, js: js, c: c}
}

// fresh is a client on its own connection, as another process would have.
func (f *fixture) fresh() *cg.Client {
	nc := natstest.Connect(f.t, f.srv)
	c, err := cg.NewFromConn(nc, "")
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// start runs a dashboard over client c (a fresh one when nil).
func (f *fixture) start(c *cg.Client, opts dashboard.Options) {
	f.t.Helper()
	if c == nil {
		c = f.fresh()
	}
	if opts.Every == 0 {
		opts.Every = 200 * time.Millisecond
	}
	opts.Logf = f.t.Logf
	d, err := dashboard.New(c, opts)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	f.d = d
	f.web = httptest.NewServer(d.Handler())
	f.t.Cleanup(func() {
		f.web.CloseClientConnections()
		f.web.Close()
		cancel()
		<-done
	})
}

// join runs an instance of member.
func (f *fixture) join(member string) *cg.Member {
	f.t.Helper()
	m, err := f.fresh().JoinElastic(context.Background(), "ORDERS", "g", member, func(ctx context.Context, msg *cg.Msg) { _ = msg.Ack() }, cg.JoinOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { m.Stop() })
	return m
}

// stream is one open /events connection.
type stream struct {
	resp   *http.Response
	mu     sync.Mutex
	events []got
	err    error
	cancel context.CancelFunc
}

type got struct {
	id string
	at time.Time
	ev map[string]any
}

func (f *fixture) events(lastID string) *stream {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.web.URL+"/events", nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		f.t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		f.t.Fatalf("/events Content-Type %q", ct)
	}
	st := &stream{resp: resp, cancel: cancel}
	go st.read()
	f.t.Cleanup(st.close)
	return st
}

func (st *stream) close() { st.cancel(); st.resp.Body.Close() }

// read parses the SSE framing: id and data lines, a blank line ends one.
func (st *stream) read() {
	sc := bufio.NewScanner(st.resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var id, data string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != "" {
				var ev map[string]any
				err := json.Unmarshal([]byte(data), &ev)
				st.mu.Lock()
				if err != nil && st.err == nil {
					st.err = err
				}
				st.events = append(st.events, got{id: id, at: time.Now(), ev: ev})
				st.mu.Unlock()
			}
			id, data = "", ""
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if data != "" {
				st.mu.Lock()
				st.err = errMultiData
				st.mu.Unlock()
			}
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

var errMultiData = &json.SyntaxError{}

// wait polls for an event matching cond (looking from index from on) and
// returns it and its index.
func (st *stream) wait(t *testing.T, from int, what string, cond func(map[string]any) bool) (got, int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st.mu.Lock()
		if st.err != nil {
			st.mu.Unlock()
			t.Fatalf("/events: %v", st.err)
		}
		for i := from; i < len(st.events); i++ {
			if cond(st.events[i].ev) {
				g := st.events[i]
				st.mu.Unlock()
				return g, i
			}
		}
		n := len(st.events)
		st.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 30s among %d events:\n%s", what, n, st.dump())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (st *stream) dump() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	evs := st.events
	if len(evs) > 12 {
		// The timeline in full, the group states only at the end.
		var keep []got
		for i, g := range evs {
			if g.ev["type"] != "group" || i >= len(evs)-3 {
				keep = append(keep, g)
			}
		}
		evs = keep
	}
	for _, g := range evs {
		j, _ := json.Marshal(g.ev)
		b.WriteString(g.id + " " + string(j) + "\n")
	}
	return b.String()
}

func typ(want string) func(map[string]any) bool {
	return func(e map[string]any) bool { return e["type"] == want }
}

// groupState returns the state of a "group" event.
func groupState(e map[string]any) map[string]any {
	st, _ := e["state"].(map[string]any)
	return st
}

// owners lists partition_stats' owners.
func owners(st map[string]any) []string {
	var out []string
	ps, _ := st["partition_stats"].([]any)
	for _, p := range ps {
		out = append(out, p.(map[string]any)["owner"].(string))
	}
	return out
}

func memberNamed(st map[string]any, name string) map[string]any {
	ms, _ := st["members"].([]any)
	for _, m := range ms {
		if m.(map[string]any)["name"] == name {
			return m.(map[string]any)
		}
	}
	return nil
}

// publish stores n messages over keys k0.. on ORDERS.
func (f *fixture) publish(n int) {
	f.t.Helper()
	for i := range n {
		if _, err := f.js.Publish(context.Background(), "orders.k"+strconv.Itoa(i%8), []byte("x")); err != nil {
			f.t.Fatal(err)
		}
	}
}
