package elastic_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

func TestCLIElasticNameClashRefused(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for _, st := range []jetstream.StreamConfig{{Name: "A1", Subjects: []string{"a1.*"}}, {Name: "A1-b", Subjects: []string{"a1b.*"}}} {
		if _, err := e.js.CreateStream(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	e.mustRun("elastic", "create", "A1", "b-c", "4")
	before := clitest.Inventory(t, e.js)
	r := e.run("elastic", "create", "A1-b", "c", "4", "--filter", "a1b.*")
	if r.Code != 1 {
		t.Fatalf("clashing create: exit %d (%q), want 1", r.Code, r.Err)
	}
	clitest.OneLine(t, "clashing create", r.Err, `elastic group "c" on "A1-b"`, `elastic group "b-c" on "A1"`, `"A1-b-c"`)
	if after := clitest.Inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

func TestCLIElasticUserStreamKept(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS-g", Subjects: []string{"mine.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.Publish(ctx, "mine.1", nil); err != nil {
		t.Fatal(err)
	}
	before := clitest.Inventory(t, e.js)
	r := e.run("elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*")
	if r.Code != 1 {
		t.Fatalf("create over a user's stream: exit %d (%q), want 1", r.Code, r.Err)
	}
	clitest.OneLine(t, "create over a user's stream", r.Err, "stream ORDERS-g exists but was not made by cg", `elastic group "g" on ORDERS`, "not a work-queue stream sourcing ORDERS", "rename the group or remove the stream")
	if after := clitest.Inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Stored by someone else over that stream: delete keeps the stream.
	clitest.Store(t, e.js, cg.ElasticBucket, "ORDERS.g", `{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}]}`)
	r = e.run("elastic", "delete", "ORDERS", "g", "--force")
	if r.Code != 0 || !strings.Contains(r.Err, "kept stream ORDERS-g") {
		t.Fatalf("delete: exit %d, stderr %q; want 0 and the stream reported kept", r.Code, r.Err)
	}
	s, err := e.js.Stream(ctx, "ORDERS-g")
	if err != nil || s.CachedInfo().State.Msgs != 1 {
		t.Fatalf("the user's stream was not kept with its message: %v", err)
	}
}

func TestCLIElasticRecreateRepairsDrift(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1", "--max-buffered-msgs", "100")
	s, err := e.js.Stream(ctx, "ORDERS-g")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = 5
	if _, err := e.js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	r := e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1", "--max-buffered-msgs", "100")
	if !strings.Contains(r.Err, "repaired its work stream ORDERS-g: max messages 5 (want 100)") {
		t.Errorf("re-create over drift said %q", r.Err)
	}
	if s, _ := e.js.Stream(ctx, "ORDERS-g"); s.CachedInfo().Config.MaxMsgs != 100 {
		t.Errorf("max msgs %d after re-create, want 100", s.CachedInfo().Config.MaxMsgs)
	}
}

func TestCLIElasticWholeSubjectRecreate(t *testing.T) {
	e := newEnv(t)
	// The reference's whole-subject mode: no partitioning filters.
	if _, err := cg.New(e.js).CreateElastic(context.Background(), "ORDERS", "whole", cg.ElasticConfig{MaxMembers: 3}); err != nil {
		t.Fatal(err)
	}
	r := e.mustRun("elastic", "create", "ORDERS", "whole", "3", "--filter", ">")
	if !strings.Contains(r.Err, "already exists, identical") {
		t.Errorf("re-create with --filter '>' said %q", r.Err)
	}
}
