package static_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// create refuses a group that would consume nothing, or whose stream
// stores some of the selected subjects without a partition token; what it
// accepts, check does not call critical.
func TestCreateRefusesFiltersThatMissMessages(t *testing.T) {
	e := newEnv(t)
	// MIXED's transform covers shop.* only: pay.* is stored as it is.
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "MIXED", Subjects: []string{"shop.*", "pay.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "shop.*", Destination: "{{partition(4,1)}}.shop.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ORDERS", "g", "10", "m1", "--filter", "payments.*"}, `error: filter "payments.*" matches none of the subjects stream ORDERS stores after the partition token (<p>.orders.*): members would receive nothing; give a filter within them, such as 'orders.*'`},
		{[]string{"ORDERS", "g", "10", "m1", "--filter", "orders.*.*"}, `filter "orders.*.*" matches none`},
		{[]string{"MIXED", "g", "4", "m1"}, `error: stream is not partitioned for this group: stream MIXED stores pay.* without a partition token (its subject transform source "shop.*" does not cover them), so no member would ever see them; widen the transform source to cover every subject of the stream, or create the group with filters on the covered part only, such as 'shop.*'`},
		{[]string{"MIXED", "g", "4", "m1", "--filter", ">"}, "stores pay.* without a partition token"},
	} {
		r := e.run(append([]string{"static", "create", "balanced"}, tc.args...)...)
		if r.Code != 1 {
			t.Errorf("%v: exit %d, stderr %q; want exit 1", tc.args, r.Code, r.Err)
		}
		clitest.OneLine(t, fmt.Sprint(tc.args), r.Err, tc.want)
	}
	if keys := e.kvKeys(); len(keys) != 0 {
		t.Fatalf("refused creates stored %v", keys)
	}
	for _, args := range [][]string{
		{"MIXED", "ok", "4", "m1", "--filter", "shop.*"},
		{"ORDERS", "ok", "10", "m1", "--filter", "orders.alice"},
		{"ORDERS", "all", "10", "m1", "m2"},
	} {
		if r := e.run(append([]string{"static", "create", "balanced"}, args...)...); r.Code != 0 {
			t.Fatalf("%v: exit %d: %s", args, r.Code, r.Err)
		}
		if r := e.run("check", args[0], args[1]); r.Code == 2 {
			t.Errorf("create accepted %v, check calls it critical: %s", args, r.Out)
		}
	}
}

// A group stored by the reference whose max_members is not the stream's
// partition count: consume refuses it, check calls it critical.
func TestConsumeRefusesStoredPartitionMismatch(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	clitest.Store(t, e.js, cg.StaticBucket,
		"ORDERS.ref", `{"max_members":6,"filters":[">"],"members":["m1","m2"]}`,
		"ORDERS.bad", `{"max_members":10,"filters":["orders.*","orders.>"],"members":["m1"]}`)
	r := e.run("static", "consume", "ORDERS", "ref", "m1")
	if r.Code != 1 || !strings.Contains(r.Err, `error: stream is not partitioned for this group: stream "ORDERS" partitions into 10 ({{partition(10,...)}}) but the group has max_members 6`) {
		t.Fatalf("consume: exit %d, stderr %q", r.Code, r.Err)
	}
	r = e.run("static", "consume", "ORDERS", "bad", "m1")
	if r.Code != 1 || !strings.Contains(r.Err, `error: stored group configuration is invalid: key ORDERS.bad in bucket static-consumer-groups: filter "orders.*": overlaps filter "orders.>"`) {
		t.Fatalf("consume of a bad stored filter: exit %d, stderr %q", r.Code, r.Err)
	}
	for _, name := range []string{"ref-m1", "bad-m1"} {
		if _, err := e.js.Consumer(ctx, "ORDERS", name); err == nil {
			t.Errorf("consume refused, but consumer %s was made", name)
		}
	}
	r = e.run("check", "ORDERS", "ref")
	if r.Code != 2 || !strings.Contains(r.Out, "stream-partitions-mismatch") {
		t.Fatalf("check: exit %d, %s", r.Code, r.Out)
	}
	r = e.run("check", "ORDERS", "bad")
	if r.Code != 2 || !strings.Contains(r.Out, "config-invalid") {
		t.Fatalf("check of a bad stored filter: exit %d, %s", r.Code, r.Out)
	}
}
