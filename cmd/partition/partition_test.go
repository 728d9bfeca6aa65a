package partition_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/partition"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	pmath "github.com/cg-dev/cg/pkg/cg/partition"
)

// offline points at a port nothing listens on: the forms without a group
// must never dial.
var offline = clitest.Env("NATS_URL=nats://127.0.0.1:1")

func run(t *testing.T, env func(string) string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, cmd.Run, env, args...)
}

func decode(t *testing.T, r clitest.Result) partition.Output {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("exit %d: %q", r.Code, r.Err)
	}
	var out partition.Output
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil {
		t.Fatalf("not JSON: %v: %q", err, r.Out)
	}
	return out
}

func TestSubjectAndKeyForms(t *testing.T) {
	r := run(t, offline, "partition", "orders.alice", "--partitions", "10", "--filter", "orders.*:1")
	want := pmath.PartitionOfKey("alice", 10)
	if r.Code != 0 || r.Err != "" || !strings.Contains(r.Out, `Key:       "alice"`) ||
		!strings.Contains(r.Out, fmt.Sprintf("Hash:      0x%08x (FNV-1a)", pmath.Hash("alice"))) ||
		!strings.Contains(r.Out, fmt.Sprintf("Partition: %d of 10", want)) || strings.Contains(r.Out, "Owner") {
		t.Fatalf("subject form: %d out %q err %q", r.Code, r.Out, r.Err)
	}

	// No filter hashes the whole subject, as {{partition(N)}}.
	out := decode(t, run(t, offline, "partition", "orders.alice", "--partitions", "7", "--json"))
	if out.Key != "orders.alice" || out.Partition != pmath.PartitionOfKey("orders.alice", 7) || out.Hash != fmt.Sprintf("%08x", pmath.Hash("orders.alice")) {
		t.Fatalf("whole subject: %+v", out)
	}

	// --key gives the tokens; several are concatenated in order, and the
	// warning shows another split of the same key.
	r = run(t, offline, "partition", "--key", "ab", "--key", "c", "--partitions", "10")
	if r.Code != 0 || !strings.Contains(r.Out, `Key:       "abc" ("ab"+"c")`) ||
		!strings.Contains(r.Err, `warning: the key is 2 tokens concatenated ("ab"+"c")`) || !strings.Contains(r.Err, `"a"+"bc"`) {
		t.Fatalf("key form: %d out %q err %q", r.Code, r.Out, r.Err)
	}
	split := decode(t, run(t, offline, "partition", "--key", "a", "--key", "bc", "--partitions", "10", "--json"))
	joined := decode(t, run(t, offline, "partition", "--key", "abc", "--partitions", "10", "--json"))
	if split.Partition != joined.Partition || split.Hash != joined.Hash || strings.Join(split.SameAs, "+") != "ab+c" || joined.SameAs != nil {
		t.Fatalf("split %+v joined %+v", split, joined)
	}

	// Two wildcards, in the order listed; one token alone draws no warning.
	r = run(t, offline, "partition", "events.eu.alice", "--partitions", "8", "--filter", "events.*.*:2,1", "--json")
	out = decode(t, r)
	if out.Key != "aliceeu" || strings.Join(out.Tokens, ",") != "alice,eu" || !strings.Contains(r.Err, "warning") {
		t.Fatalf("two wildcards: %+v", out)
	}
	if r := run(t, offline, "partition", "events.eu.alice", "--partitions", "8", "--filter", "events.*.*:2"); r.Err != "" {
		t.Fatalf("one token warned: %q", r.Err)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"partition", "x.y", "--partitions", "10", "--filter", "orders.*:1"}, "matches none of the partitioning filters"},
		{[]string{"partition", "orders.a", "--partitions", "0"}, "must be at least 1"},
		{[]string{"partition", "orders.a", "--partitions", "-3"}, "must be at least 1"},
		{[]string{"partition", "orders.a"}, "--partitions N is required"},
		{[]string{"partition", "orders.a", "--partitions", "4", "--filter", "orders.*:2"}, "out of range"},
		{[]string{"partition", "orders.a", "--partitions", "4", "--filter", "orders"}, "needs a '*' wildcard"},
		{[]string{"partition", "orders.*", "--partitions", "4"}, "literal subject"},
		{[]string{"partition", "--partitions", "4"}, "give a subject or --key"},
		{[]string{"partition", "orders.a", "--key", "a", "--partitions", "4"}, "not both"},
		{[]string{"partition", "--key", "a", "--partitions", "4", "--filter", "orders.*"}, "with --key give the tokens"},
		{[]string{"partition", "orders.a", "--stream", "ORDERS"}, "go together"},
		{[]string{"partition", "orders.a", "--stream", "ORDERS", "--group", "g", "--partitions", "3"}, "come from the group"},
		{[]string{"partition", "orders.a", "--partitions", "3", "--elastic"}, "--elastic needs"},
		{[]string{"partition", "a", "b", "--partitions", "3"}, "accepts at most 1 arg"},
	}
	for _, tt := range tests {
		r := run(t, offline, tt.args...)
		first, _, _ := strings.Cut(r.Err, "\n")
		if r.Code != 2 || !strings.Contains(first, tt.want) || r.Out != "" {
			t.Errorf("%v: exit %d, stderr %q, want exit 2 and %q on the first line", tt.args, r.Code, r.Err, tt.want)
		}
	}
}

type env struct {
	t   *testing.T
	js  jetstream.JetStream
	env func(string) string
}

// newEnv starts a server with ORDERS partition-stamped into 10 by its
// first wildcard, and EVENTS plain.
func newEnv(t *testing.T) *env {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.*.*"}}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, js: js, env: clitest.Env("NATS_URL=" + s.ClientURL())}
}

func (e *env) mustRun(args ...string) clitest.Result {
	e.t.Helper()
	r := run(e.t, e.env, args...)
	if r.Code != 0 {
		e.t.Fatalf("cg %v: exit %d, stderr %q", args, r.Code, r.Err)
	}
	return r
}

func TestStaticGroup(t *testing.T) {
	e := newEnv(t)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2", "m3")
	a := pmath.BalancedAssignment([]string{"m1", "m2", "m3"}, 10)
	ctx := context.Background()
	for _, key := range []string{"alice", "bob", "carol", "dave"} {
		// The server's own transform says where the message went.
		ack, err := e.js.Publish(ctx, "orders."+key, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := e.js.Stream(ctx, "ORDERS")
		msg, err := s.GetMsg(ctx, ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		_, p := pmath.StripPartition(msg.Subject)

		out := decode(t, run(t, e.env, "partition", "orders."+key, "--stream", "ORDERS", "--group", "g", "--json"))
		if out.Partition != p || out.Partitions != 10 || out.Owner != a.Owner[p] || out.Kind != "static" || out.Filter != "orders.*:1" || out.Key != key {
			t.Fatalf("%s: server put it in %d (owner %s); cg says %+v", key, p, a.Owner[p], out)
		}
	}
	r := e.mustRun("partition", "--key", "alice", "--stream", "ORDERS", "--group", "g")
	p := pmath.PartitionOfKey("alice", 10)
	if !strings.Contains(r.Out, fmt.Sprintf("Partition: %d of 10", p)) || !strings.Contains(r.Out, "Owner:     "+a.Owner[p]+" in static group g on ORDERS") {
		t.Fatalf("key with group: %q", r.Out)
	}

	// A subject the stream's transform does not take is a usage error; a
	// missing group fails and points at the elastic flag.
	if r := run(t, e.env, "partition", "orders.a.b", "--stream", "ORDERS", "--group", "g"); r.Code != 2 || !strings.Contains(r.Err, "matches none") {
		t.Fatalf("subject outside the transform: %d %q", r.Code, r.Err)
	}
	if r := run(t, e.env, "partition", "orders.a", "--stream", "ORDERS", "--group", "nope"); r.Code != 1 || !strings.Contains(r.Err, "--elastic") {
		t.Fatalf("missing group: %d %q", r.Code, r.Err)
	}
}

func TestElasticGroup(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "EVENTS", "g", "12", "--filter", "events.*.*:2")
	// No members yet: the partition is unowned.
	r := e.mustRun("partition", "events.eu.alice", "--stream", "EVENTS", "--group", "g", "--elastic")
	p := pmath.PartitionOfKey("alice", 12)
	if !strings.Contains(r.Out, fmt.Sprintf("Partition: %d of 12", p)) || !strings.Contains(r.Out, "Owner:     none") {
		t.Fatalf("unowned: %q", r.Out)
	}
	e.mustRun("elastic", "add", "EVENTS", "g", "m1", "m2")
	e.mustRun("elastic", "create-mapping", "EVENTS", "g", fmt.Sprintf("whale:%d", p), "m1:"+rest(12, p))
	out := decode(t, run(t, e.env, "partition", "events.eu.alice", "--stream", "EVENTS", "--group", "g", "--elastic", "--json"))
	if out.Owner != "whale" || out.Partition != p || out.Kind != "elastic" || out.Filter != "events.*.*:2" {
		t.Fatalf("mapped: %+v", out)
	}
	if r := run(t, e.env, "partition", "orders.alice", "--stream", "EVENTS", "--group", "g", "--elastic"); r.Code != 2 {
		t.Fatalf("subject outside the group's filters: %d %q", r.Code, r.Err)
	}
	if r := run(t, e.env, "partition", "events.a.b", "--stream", "EVENTS", "--group", "g"); r.Code != 1 {
		t.Fatalf("elastic group read as static: %d %q", r.Code, r.Err)
	}
}

// rest lists 0..n-1 without p, comma separated.
func rest(n, p int) string {
	var out []string
	for i := 0; i < n; i++ {
		if i != p {
			out = append(out, fmt.Sprint(i))
		}
	}
	return strings.Join(out, ",")
}
