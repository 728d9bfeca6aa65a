package static_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

func TestCLIStaticNameClashRefused(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "a", "10", "b-m1"); r.Code != 0 {
		t.Fatalf("create a: exit %d %q", r.Code, r.Err)
	}
	before := clitest.Inventory(t, e.js)
	r := e.run("static", "create", "balanced", "ORDERS", "a-b", "10", "m1")
	if r.Code != 1 {
		t.Fatalf("clashing create: exit %d (%q), want 1", r.Code, r.Err)
	}
	clitest.OneLine(t, "clashing create", r.Err, `static group "a-b" on "ORDERS"`, `static group "a" on "ORDERS"`, `consumer "a-b-m1"`)
	if after := clitest.Inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Reference-made groups with names cg would not create: a member named
// with '.', a group named with '.'. Both show and delete cleanly.
func TestCLIStaticReferenceDottedNames(t *testing.T) {
	e := newEnv(t)
	clitest.Store(t, e.js, cg.StaticBucket,
		"ORDERS.g", `{"max_members":10,"filters":[">"],"members":["a.b","m2"]}`,
		"ORDERS.x.y", `{"max_members":10,"filters":[">"],"members":["m1"]}`)
	if r := e.run("static", "delete", "ORDERS", "g", "--force"); r.Code != 0 {
		t.Errorf("delete of a group with member a.b: exit %d %q", r.Code, r.Err)
	}
	if r := e.run("static", "info", "ORDERS", "x.y"); r.Code != 0 || !strings.Contains(r.Out, "m1") {
		t.Errorf("info of group x.y: exit %d %q %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("static", "delete", "ORDERS", "x.y", "--force"); r.Code != 0 {
		t.Errorf("delete of group x.y: exit %d %q", r.Code, r.Err)
	}
	if keys := e.kvKeys(); len(keys) != 0 {
		t.Errorf("left stored: %v", keys)
	}
	// create still refuses such a name.
	if r := e.run("static", "create", "balanced", "ORDERS", "x.y", "10", "m1"); r.Code != 2 {
		t.Errorf("create x.y: exit %d, want 2", r.Code)
	}
}

func TestCLIStaticCheckDottedGroup(t *testing.T) {
	e := newEnv(t)
	clitest.Store(t, e.js, cg.StaticBucket, "ORDERS.x.y", `{"max_members":10,"filters":[">"],"members":["m1"]}`)
	r := e.run("check", "ORDERS", "x.y")
	t.Logf("check: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	if r.Code == 3 || !strings.Contains(r.Out+r.Err, "x.y") {
		t.Errorf("check ORDERS x.y: exit %d, %q %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("static", "ls", "ORDERS"); r.Code != 0 || !strings.Contains(r.Out, "x.y") {
		t.Errorf("ls: exit %d %q", r.Code, r.Out)
	}
}

// A user's consumer with a member's name is never adopted: create refuses.
func TestCLIStaticUserConsumerNotAdopted(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.CreateConsumer(context.Background(), "ORDERS", jetstream.ConsumerConfig{Durable: "g-m1", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	before := clitest.Inventory(t, e.js)
	r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2")
	if r.Code != 1 {
		t.Fatalf("create over a user's consumer: exit %d (%q), want 1", r.Code, r.Err)
	}
	clitest.OneLine(t, "create over a user's consumer", r.Err, "consumer g-m1 on ORDERS exists but was not made by cg")
	if after := clitest.Inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
