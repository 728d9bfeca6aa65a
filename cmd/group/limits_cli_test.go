package group_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func (e *env) run(args ...string) clitest.Result {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.env, args...)
}

// stream makes a stream on <prefix>.*, stamped with n partitions when n > 0.
func (e *env) stream(name, prefix string, n int) {
	e.t.Helper()
	sc := jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".*"}}
	if n > 0 {
		sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: prefix + ".*", Destination: fmt.Sprintf("{{partition(%d,1)}}.%s.{{wildcard(1)}}", n, prefix)}
	}
	if _, err := e.js.CreateStream(context.Background(), sc); err != nil {
		e.t.Fatal(err)
	}
}

// putRef stores a configuration as the reference would, with none of
// cg's create-time rules.
func (e *env) putRef(bucket, stream, group string, cfg any) {
	e.t.Helper()
	ctx := context.Background()
	kv, err := e.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, _ := json.Marshal(cfg)
	if _, err := kv.Put(ctx, cg.Key(stream, group), raw); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) consumers(stream string) int {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	return s.CachedInfo().State.Consumers
}

func firstLine(s string) string { l, _, _ := strings.Cut(s, "\n"); return l }

// create refuses partition counts above cg.MaxPartitions, both kinds, in
// one line naming the ceiling and why, creating nothing.
func TestCLICreateAboveCeiling(t *testing.T) {
	e := newEnv(t, 10)
	e.stream("BIG", "big", cg.MaxPartitions+1)
	over := fmt.Sprint(cg.MaxPartitions + 1)
	for _, args := range [][]string{
		{"static", "create", "balanced", "BIG", "g", over, "m1"},
		{"elastic", "create", "BIG", "g", over, "--filter", "big.*:1"},
	} {
		r := e.run(args...)
		line := firstLine(r.Err)
		if r.Code != 2 || !strings.HasPrefix(line, "error: max-members "+over) || !strings.Contains(line, "ceiling of 4096") || !strings.Contains(line, "quadratic") {
			t.Errorf("cg %v: exit %d, stderr %q", args, r.Code, r.Err)
		}
	}
	for _, b := range []string{cg.StaticBucket, cg.ElasticBucket} {
		if _, err := e.js.KeyValue(context.Background(), b); err == nil {
			t.Errorf("bucket %s made by a refused create", b)
		}
	}
}

// A group stored above the ceiling: consume refuses it at once, sending
// no consumer to the server; info, check and delete work on it.
func TestCLIStoredAboveCeiling(t *testing.T) {
	e := newEnv(t, 10)
	e.stream("BIG", "big", 5000)
	e.putRef(cg.StaticBucket, "BIG", "g", cg.StaticConfig{MaxMembers: 5000, Members: []string{"m1", "m2"}})
	start := time.Now()
	r := e.run("static", "consume", "BIG", "g", "m1")
	if r.Code != 1 || !strings.Contains(firstLine(r.Err), "above cg's ceiling of 4096") || time.Since(start) > 20*time.Second {
		t.Fatalf("consume: exit %d after %v, stderr %q", r.Code, time.Since(start), r.Err)
	}
	if n := e.consumers("BIG"); n != 0 {
		t.Fatalf("%d consumers after a refused consume", n)
	}
	var gi struct{ Partitions int }
	if r := e.run("static", "info", "BIG", "g", "--json"); r.Code != 0 || json.Unmarshal([]byte(r.Out), &gi) != nil || gi.Partitions != 5000 {
		t.Fatalf("info: exit %d, stderr %q", r.Code, r.Err)
	}
	if r := e.run("check", "BIG", "g"); r.Code == 0 || !strings.Contains(r.Out+r.Err, "ceiling of 4096") {
		t.Fatalf("check: exit %d, out %q err %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("static", "delete", "BIG", "g", "--force"); r.Code != 0 {
		t.Fatalf("delete: exit %d, stderr %q", r.Code, r.Err)
	}
}

// The reference README's `cg static create balanced foo cg 10 '>' m1 m2`
// stores a member named ">": cg shows the group, refuses to run that
// member, runs the others, steps down and deletes cleanly.
func TestCLIMemberNamedGreaterThan(t *testing.T) {
	e := newEnv(t, 10)
	e.putRef(cg.StaticBucket, "ORDERS", "cg", cg.StaticConfig{MaxMembers: 10, Members: []string{">", "m1", "m2"}})
	if r := e.run("static", "info", "ORDERS", "cg"); r.Code != 0 || !strings.Contains(r.Out, "impossible") {
		t.Fatalf("info: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("static", "watch", "ORDERS", "cg", "--count", "1", "--json"); r.Code != 0 || !strings.Contains(r.Out, "can never run") {
		t.Fatalf("watch: exit %d, out %.300q, err %q", r.Code, r.Out, r.Err)
	}
	var ms health.MemberStatus
	if r := e.run("static", "member-info", "ORDERS", "cg", ">", "--json"); r.Code != 0 || json.Unmarshal([]byte(r.Out), &ms) != nil || ms.Unusable == "" {
		t.Fatalf("member-info: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("static", "ls", "ORDERS"); r.Code != 0 || !strings.Contains(r.Out, "cg") {
		t.Fatalf("ls: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	if r := e.run("check", "ORDERS", "cg", "--json"); !strings.Contains(r.Out, health.CodeMemberUnusable) || strings.Contains(r.Out, health.CodeCheckFailed) {
		t.Fatalf("check: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	r := e.run("static", "consume", "ORDERS", "cg", ">")
	if r.Code != 2 || !strings.Contains(firstLine(r.Err), "the server refuses it in a consumer name, so no instance of such a member could run") {
		t.Fatalf("consume '>': exit %d, stderr %q", r.Code, r.Err)
	}
	if r := e.run("static", "step-down", "ORDERS", "cg", ">"); r.Code != 0 || !strings.Contains(r.Err, "nothing to step down") {
		t.Fatalf("step-down '>': exit %d, stderr %q", r.Code, r.Err)
	}
	// The other members run.
	m1 := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "cg", "m1")
	c := cg.New(e.js)
	natstest.Eventually(t, 20*time.Second, "member m1 pulling", func() bool {
		ms, err := c.MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "cg", "m1")
		return err == nil && ms.Active
	})
	if code := m1.Stop(t); code != 0 {
		t.Fatalf("consume m1: exit %d, stderr %q", code, m1.Err.String())
	}
	r = e.run("static", "delete", "ORDERS", "cg", "--force")
	if r.Code != 0 || e.consumers("ORDERS") != 0 {
		t.Fatalf("delete: exit %d, stderr %q, %d consumers left", r.Code, r.Err, e.consumers("ORDERS"))
	}
}

// The reference's positional filter is refused with a hint to --filter.
func TestCLIPositionalFilterHint(t *testing.T) {
	e := newEnv(t, 10)
	r := e.run("static", "create", "balanced", "ORDERS", "g", "10", ">", "m1", "m2")
	if r.Code != 2 || !strings.Contains(firstLine(r.Err), "did you mean --filter '>'") {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
	if _, err := e.js.KeyValue(context.Background(), cg.StaticBucket); err == nil {
		t.Fatal("bucket made by a refused create")
	}
}

// step-down with nothing pinned says so and exits 0, both kinds, twice,
// with --json too.
func TestCLIStepDownNothingPinned(t *testing.T) {
	e := newEnv(t, 10)
	e.stream("EL", "el", 0)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "10", "m1")
	e.mustRun("elastic", "create", "EL", "g", "4", "--filter", "el.*:1")
	e.mustRun("elastic", "add", "EL", "g", "m1")
	for _, kind := range []string{"static", "elastic"} {
		stream := map[string]string{"static": "ORDERS", "elastic": "EL"}[kind]
		for range 2 {
			r := e.run(kind, "step-down", stream, "g", "m1")
			if r.Code != 0 || strings.Count(r.Err, "\n") != 1 || !strings.Contains(r.Err, "nothing to step down") {
				t.Fatalf("%s step-down: exit %d, stderr %q", kind, r.Code, r.Err)
			}
		}
		var sd cg.StepDownResult
		if r := e.run(kind, "step-down", stream, "g", "m1", "--json"); r.Code != 0 || json.Unmarshal([]byte(r.Out), &sd) != nil || !sd.NothingPinned {
			t.Fatalf("%s step-down --json: exit %d, out %q", kind, r.Code, r.Out)
		}
	}
}

// An interrupted info on a very large stored group returns promptly (it
// took minutes of CPU and ignored SIGTERM at 100,000 partitions).
func TestCLIInfoInterruptedPromptly(t *testing.T) {
	e := newEnv(t, 10)
	e.stream("HUGE", "huge", 0)
	cfg := cg.ElasticConfig{MaxMembers: 100000, Members: []string{"m1", "m2"},
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "huge.*", PartitioningWildcards: []int{1}}}}
	e.putRef(cg.ElasticBucket, "HUGE", "g", cfg)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: cg.WorkStreamName("HUGE", "g"), Retention: jetstream.WorkQueuePolicy,
		AllowDirect: true, Sources: []*jetstream.StreamSource{{Name: "HUGE", SubjectTransforms: cg.ElasticTransforms(cfg)}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if _, err := e.js.Publish(ctx, fmt.Sprintf("huge.k%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 20*time.Second, "work stream sourced", func() bool {
		ws, err := e.js.Stream(ctx, cg.WorkStreamName("HUGE", "g"))
		return err == nil && ws.CachedInfo().State.Msgs == 200
	})
	ictx, cancel := context.WithTimeout(ctx, 300*time.Millisecond) // as SIGINT cancels the root's context
	defer cancel()
	start := time.Now()
	r := clitest.RunCtx(ictx, cmd.Run, e.env, "elastic", "info", "HUGE", "g")
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("info ran %v after its context ended (exit %d)", took, r.Code)
	}
	if r.Code != 1 || !strings.Contains(r.Err, "context deadline exceeded") {
		t.Fatalf("exit %d, stderr %q", r.Code, r.Err)
	}
}
