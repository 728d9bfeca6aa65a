package static_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

func inventory(t *testing.T, js jetstream.JetStream) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for name := range js.StreamNames(ctx).Name() {
		out = append(out, "stream "+name)
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for c := range s.ConsumerNames(ctx).Name() {
			out = append(out, "consumer "+name+"/"+c)
		}
	}
	for _, b := range []string{cg.StaticBucket, cg.ElasticBucket} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			continue
		}
		keys, _ := kv.Keys(ctx)
		for _, k := range keys {
			out = append(out, "key "+b+"/"+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func TestCLIStaticNameClashRefused(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "a", "10", "b-m1"); r.Code != 0 {
		t.Fatalf("create a: exit %d %q", r.Code, r.Err)
	}
	before := inventory(t, e.js)
	r := e.run("static", "create", "balanced", "ORDERS", "a-b", "10", "m1")
	if r.Code != 1 {
		t.Fatalf("clashing create: exit %d (%q), want 1", r.Code, r.Err)
	}
	if lines := strings.Split(strings.TrimSpace(r.Err), "\n"); len(lines) != 1 {
		t.Errorf("clashing create printed %d lines: %q", len(lines), r.Err)
	}
	for _, w := range []string{`static group "a-b" on "ORDERS"`, `static group "a" on "ORDERS"`, `consumer "a-b-m1"`} {
		if !strings.Contains(r.Err, w) {
			t.Errorf("clashing create: %q does not mention %s", r.Err, w)
		}
	}
	if after := inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Reference-made groups with names cg would not create: a member named
// with '.', a group named with '.'. Both show and delete cleanly.
func TestCLIStaticReferenceDottedNames(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	kv, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.StaticBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.g", []byte(`{"max_members":10,"filters":[">"],"members":["a.b","m2"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.x.y", []byte(`{"max_members":10,"filters":[">"],"members":["m1"]}`)); err != nil {
		t.Fatal(err)
	}
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
	ctx := context.Background()
	kv, err := e.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.StaticBucket})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "ORDERS.x.y", []byte(`{"max_members":10,"filters":[">"],"members":["m1"]}`)); err != nil {
		t.Fatal(err)
	}
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
	before := inventory(t, e.js)
	r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2")
	if r.Code != 1 {
		t.Fatalf("create over a user's consumer: exit %d (%q), want 1", r.Code, r.Err)
	}
	if lines := strings.Split(strings.TrimSpace(r.Err), "\n"); len(lines) != 1 || !strings.Contains(r.Err, "consumer g-m1 on ORDERS exists but was not made by cg") {
		t.Errorf("create over a user's consumer said %q", r.Err)
	}
	if after := inventory(t, e.js); after != before {
		t.Errorf("a refused create changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
