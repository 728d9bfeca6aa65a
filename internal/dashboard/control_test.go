package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/internal/dashboard"
)

// post sends a control request and returns the status and reply.
func (f *fixture) post(t *testing.T, path, origin string, body any) (int, map[string]any) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", f.web.URL+path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		t.Fatalf("%s: reply is not JSON: %v", path, err)
	}
	if resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: reply Content-Type %q", path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, rep
}

func (f *fixture) members(t *testing.T) []string {
	t.Helper()
	cfg, err := f.c.ElasticConfig(context.Background(), "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	return cfg.MemberNames()
}

// TestControls: the page's controls change the stored configuration
// through the engine, from the dashboard's own origin; a foreign origin
// and bad input are refused with a one-line error and change nothing.
func TestControls(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{})
	self := f.web.URL // httptest: http://127.0.0.1:PORT

	code, rep := f.post(t, "/api/elastic/add", "http://evil.example", map[string]any{"stream": "ORDERS", "group": "g", "member": "m9"})
	if code != http.StatusForbidden || !strings.Contains(rep["error"].(string), "evil.example") {
		t.Fatalf("foreign origin: %d %v, want 403 naming it", code, rep)
	}
	if got := f.members(t); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("a refused add changed the members: %v", got)
	}

	code, rep = f.post(t, "/api/elastic/add", self, map[string]any{"stream": "ORDERS", "group": "g", "member": "m2"})
	if code != 200 || rep["ok"] != true {
		t.Fatalf("add: %d %v", code, rep)
	}
	if got := f.members(t); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("after add members %v, want m1 m2", got)
	}
	if mv, _ := rep["moves"].([]any); len(mv) != 2 {
		t.Errorf("add moved %v, want 2 partitions", rep["moves"])
	}

	// Bad input: one line, nothing changed.
	for _, c := range []struct {
		path string
		body any
		code int
		word string
	}{
		{"/api/elastic/add", map[string]any{"stream": "ORDERS", "group": "g"}, 400, "member"},
		{"/api/elastic/add", map[string]any{"stream": "ORDERS", "group": "g", "member": "a.b"}, 400, "member name"},
		{"/api/elastic/add", map[string]any{"stream": "ORDERS", "group": "nope", "member": "m3"}, 404, "nope"},
		{"/api/elastic/add", map[string]any{"stream": "ORDERS", "group": "g", "member": "m3", "bogus": 1}, 400, "bogus"},
		{"/api/elastic/drop", map[string]any{"stream": "ORDERS", "group": "g", "member": "zz"}, 404, "zz"},
		{"/api/mapping/create", map[string]any{"stream": "ORDERS", "group": "g", "member": "m1", "partitions": []int{7}}, 400, "out of range"},
		{"/api/step-down", map[string]any{"kind": "nope", "stream": "ORDERS", "group": "g", "member": "m1"}, 400, "static or elastic"},
	} {
		code, rep := f.post(t, c.path, self, c.body)
		msg, _ := rep["error"].(string)
		if code != c.code || !strings.Contains(msg, c.word) || strings.Contains(msg, "\n") {
			t.Errorf("%s %v: %d %q, want %d with one line naming %q", c.path, c.body, code, msg, c.code, c.word)
		}
	}
	if got := f.members(t); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("refused requests changed the members: %v", got)
	}

	// Mapping: m2 takes partition 0; then back to a member list.
	code, rep = f.post(t, "/api/mapping/create", self, map[string]any{"stream": "ORDERS", "group": "g", "member": "m2", "partitions": []int{0}})
	if code != 200 {
		t.Fatalf("mapping/create: %d %v", code, rep)
	}
	cfg, _ := f.c.ElasticConfig(context.Background(), "ORDERS", "g")
	if cfg.Mode() != "mapped" || cfg.Assignment().Owner[0] != "m2" || cfg.Assignment().Owner[1] != "m1" {
		t.Fatalf("after mapping/create: mode %s owners %v", cfg.Mode(), cfg.Assignment().Owner)
	}
	code, rep = f.post(t, "/api/mapping/delete", self, map[string]any{"stream": "ORDERS", "group": "g"})
	if code != 200 {
		t.Fatalf("mapping/delete: %d %v", code, rep)
	}
	cfg, _ = f.c.ElasticConfig(context.Background(), "ORDERS", "g")
	if cfg.Mode() != "balanced" || !slices.Equal(cfg.MemberNames(), []string{"m1", "m2"}) {
		t.Fatalf("after mapping/delete: mode %s members %v", cfg.Mode(), cfg.MemberNames())
	}
	code, rep = f.post(t, "/api/elastic/drop", self, map[string]any{"stream": "ORDERS", "group": "g", "member": "m2"})
	if code != 200 || !slices.Equal(f.members(t), []string{"m1"}) {
		t.Fatalf("drop: %d %v, members %v", code, rep, f.members(t))
	}
	code, rep = f.post(t, "/api/step-down", self, map[string]any{"kind": "elastic", "stream": "ORDERS", "group": "g", "member": "m1"})
	if code != 200 || rep["note"] == nil {
		t.Fatalf("step-down with nothing pinned: %d %v, want ok with a note", code, rep)
	}
}

// TestControlsReadOnly: with ReadOnly every control answers 403 and
// changes nothing, and the state says read_only.
func TestControlsReadOnly(t *testing.T) {
	f := newFixture(t, nil, "m1")
	f.start(nil, dashboard.Options{ReadOnly: true})
	for _, p := range []string{"/api/elastic/add", "/api/elastic/drop", "/api/mapping/create", "/api/mapping/delete", "/api/step-down"} {
		code, rep := f.post(t, p, f.web.URL, map[string]any{"kind": "elastic", "stream": "ORDERS", "group": "g", "member": "m2", "partitions": []int{0}})
		if code != http.StatusForbidden || !strings.Contains(rep["error"].(string), "read-only") {
			t.Errorf("%s read-only: %d %v, want 403", p, code, rep)
		}
	}
	if got := f.members(t); !slices.Equal(got, []string{"m1"}) {
		t.Fatalf("read-only dashboard changed the members: %v", got)
	}
	es := f.events("")
	g, _ := es.wait(t, 0, "group state", typ("group"))
	if groupState(g.ev)["read_only"] != true {
		t.Fatalf("state %v, want read_only", groupState(g.ev))
	}
}
