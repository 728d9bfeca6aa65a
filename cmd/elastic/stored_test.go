package elastic_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// stampedStream makes the static walkthrough's kind of stream: subjects
// <prefix>.* stored as <p>.<prefix>.* by a {{partition(n,1)}} transform.
func (e *env) stampedStream(name, prefix string, n int) {
	e.t.Helper()
	_, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: prefix + ".*", Destination: fmt.Sprintf("{{partition(%d,1)}}.%s.{{wildcard(1)}}", n, prefix)}})
	if err != nil {
		e.t.Fatal(err)
	}
}

// Without --filter, a group over a partition-stamped stream takes its
// filters from the STORED subjects, and its members receive every message.
func TestCreateWithoutFilterOnStampedStreamDelivers(t *testing.T) {
	e := newEnv(t)
	e.stampedStream("SHOP", "shop", 10)
	r := e.mustRun("elastic", "create", "SHOP", "g", "4", "--json")
	var out struct {
		DefaultFilters bool             `json:"default_filters"`
		Config         cg.ElasticConfig `json:"config"`
	}
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil {
		t.Fatalf("create --json: %v: %q", err, r.Out)
	}
	pfs := out.Config.PartitioningFilters
	if !out.DefaultFilters || len(pfs) != 1 || pfs[0].String() != "*.shop.*:2" {
		t.Fatalf("default filters %+v, want the stored form *.shop.*:2", out)
	}
	if !strings.Contains(r.Err, "stores its subjects shop.* as *.shop.* (its subject transform rewrites them)") || !strings.Contains(r.Err, "--filter '*.shop.*:2'") {
		t.Fatalf("create does not say which filters it chose: %q", r.Err)
	}
	// Whatever create accepts, check does not call critical.
	if r := e.run("check", "SHOP", "g"); r.Code == 2 {
		t.Fatalf("check after create: exit 2: %s", r.Out)
	}
	e.mustRun("elastic", "add", "SHOP", "g", "m1")
	const n = 30
	for i := 0; i < n; i++ {
		if _, err := e.js.Publish(context.Background(), fmt.Sprintf("shop.c%d", i%9), nil); err != nil {
			t.Fatal(err)
		}
	}
	r = e.run("elastic", "consume", "SHOP", "g", "m1", "--sleep", "0s", "--count", fmt.Sprint(n), "--json")
	if r.Code != 0 {
		t.Fatalf("consume: exit %d: %s", r.Code, r.Err)
	}
	got := 0
	for _, l := range clitest.Lines(t, r.Out) {
		if l["type"] == "msg" {
			got++
		}
	}
	if got != n {
		t.Fatalf("member received %d messages, want %d", got, n)
	}
}

func TestCreateRefusesFiltersMatchingNothingStored(t *testing.T) {
	e := newEnv(t)
	e.stampedStream("SHOP", "shop", 10)
	for _, tc := range []struct {
		args []string
		want string
	}{
		// The configured form on a stamped stream: the stored form is named.
		{[]string{"SHOP", "g", "4", "--filter", "shop.*:1"}, `error: partitioning filter "shop.*" matches none of the subjects stream SHOP stores (<p>.shop.*): the group would take in nothing; the stream's subject transform puts the partition token first: give the stored form '*.shop.*:2'`},
		{[]string{"ORDERS", "g", "4", "--filter", "nothere.*"}, `error: partitioning filter "nothere.*" matches none of the subjects stream ORDERS stores (orders.*)`},
		{[]string{"SHOP", "g", "4", "--filter", "12.shop.*"}, `matches none of the subjects stream SHOP stores`},
	} {
		r := e.run(append([]string{"elastic", "create"}, tc.args...)...)
		if r.Code != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1", tc.args, r.Code, r.Err)
		}
		clitest.OneLine(t, fmt.Sprint(tc.args), r.Err, tc.want)
	}
	if keys := e.kvKeys(); len(keys) != 0 {
		t.Fatalf("refused creates stored %v", keys)
	}
	if s := e.streams(); !slices.Equal(s, []string{"EVENTS", "ORDERS", "SHOP"}) {
		t.Fatalf("refused creates left streams %v", s)
	}
}
