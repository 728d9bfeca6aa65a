package cg_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// putRef stores a configuration as the reference would: straight into
// the bucket, with none of cg's create-time rules.
func putRef(t *testing.T, js jetstream.JetStream, bucket, stream, group string, cfg any) {
	t.Helper()
	ctx := ctxT(t)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(cfg)
	if _, err := kv.Put(ctx, cg.Key(stream, group), raw); err != nil {
		t.Fatal(err)
	}
}

func consumerNames(t *testing.T, js jetstream.JetStream, stream string) []string {
	t.Helper()
	var out []string
	st, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	l := st.ConsumerNames(ctxT(t))
	for n := range l.Name() {
		out = append(out, n)
	}
	if err := l.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func hasCode(rep health.CheckReport, code string) bool {
	for _, f := range rep.Findings {
		if f.Code == code {
			return true
		}
	}
	return false
}

// partStream makes a stream on <prefix>.* stamped with n partitions.
func partStream(t *testing.T, js jetstream.JetStream, name, prefix string, n int) {
	t.Helper()
	_, err := js.CreateStream(ctxT(t), jetstream.StreamConfig{Name: name, Subjects: []string{prefix + ".*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: prefix + ".*", Destination: fmt.Sprintf("{{partition(%d,1)}}.%s.{{wildcard(1)}}", n, prefix)}})
	if err != nil {
		t.Fatal(err)
	}
}

// Create refuses a partition count above cg.MaxPartitions (and a filter
// count that would put more filter subjects on one member), both kinds,
// naming the ceiling, with nothing created.
func TestCreateRefusesAboveCeiling(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	over := cg.MaxPartitions + 1
	partStream(t, js, "BIG", "big", over)
	partStream(t, js, "MAX", "max", cg.MaxPartitions)
	c := cg.New(js)
	for name, create := range map[string]func() error{
		"static": func() error {
			_, err := c.CreateStatic(ctx, "BIG", "g", cg.StaticConfig{MaxMembers: over, Members: []string{"m1"}})
			return err
		},
		"static filters": func() error {
			_, err := c.CreateStatic(ctx, "MAX", "g", cg.StaticConfig{MaxMembers: cg.MaxPartitions, Filters: []string{"max.a", "max.b"}, Members: []string{"m1"}})
			return err
		},
		"elastic": func() error {
			_, err := c.CreateElastic(ctx, "BIG", "g", cg.ElasticConfig{MaxMembers: over, PartitioningFilters: []cg.PartitioningFilter{{Filter: "big.*", PartitioningWildcards: []int{1}}}})
			return err
		},
	} {
		err := create()
		var ve *cg.ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), fmt.Sprint(cg.MaxPartitions)) || !strings.Contains(err.Error(), "quadratic") {
			t.Errorf("%s: %v, want a validation error naming the ceiling %d and why", name, err, cg.MaxPartitions)
		}
	}
	for _, b := range []string{cg.StaticBucket, cg.ElasticBucket} {
		if _, err := js.KeyValue(ctx, b); !errors.Is(err, jetstream.ErrBucketNotFound) {
			t.Errorf("bucket %s exists after refused creates (%v)", b, err)
		}
	}
	if _, err := js.Stream(ctx, cg.WorkStreamName("BIG", "g")); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("work stream made by a refused create: %v", err)
	}
	// A static member's share is what counts: two members of 4096
	// partitions with two filters hold 4096 filter subjects each.
	if _, err := c.CreateStatic(ctx, "MAX", "two", cg.StaticConfig{MaxMembers: cg.MaxPartitions, Filters: []string{"max.a", "max.b"}, Members: []string{"m1", "m2"}}); err != nil {
		t.Errorf("static, two members, two filters: %v", err)
	}
	// The ceiling itself is allowed.
	if _, err := c.CreateElastic(ctx, "MAX", "e", cg.ElasticConfig{MaxMembers: cg.MaxPartitions, PartitioningFilters: []cg.PartitioningFilter{{Filter: "*.max.*", PartitioningWildcards: []int{2}}}}); err != nil {
		t.Errorf("elastic at the ceiling: %v", err)
	}
	if _, err := c.CreateStatic(ctx, "MAX", "s", cg.StaticConfig{MaxMembers: cg.MaxPartitions, Members: []string{"m1"}}); err != nil {
		t.Errorf("static at the ceiling: %v", err)
	}
}

// A group stored above the ceiling (by the reference) is refused at join
// before any consumer is sent to the server; info, check and delete work.
func TestStoredAboveCeiling(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	n := 5000
	partStream(t, js, "SBIG", "sbig", n)
	putRef(t, js, cg.StaticBucket, "SBIG", "g", cg.StaticConfig{MaxMembers: n, Members: []string{"m1", "m2"}})
	bigElastic(t, js, "EBIG", "g", n)
	c := cg.New(js)
	noop := func(context.Context, *cg.Msg) {}
	for _, kind := range []string{"static", "elastic"} {
		t.Run(kind, func(t *testing.T) {
			stream, cstream := "SBIG", "SBIG"
			join, info, del := func() (*cg.Member, error) { return c.JoinStatic(ctx, "SBIG", "g", "m1", noop, cg.JoinOptions{}) },
				func() (health.GroupInfo, error) { return c.Info(ctx, cg.KindStatic, "SBIG", "g") },
				func() error { _, err := c.Delete(ctx, cg.KindStatic, "SBIG", "g"); return err }
			if kind == "elastic" {
				stream, cstream = "EBIG", cg.WorkStreamName("EBIG", "g")
				join, info, del = func() (*cg.Member, error) { return c.JoinElastic(ctx, "EBIG", "g", "m1", noop, cg.JoinOptions{}) },
					func() (health.GroupInfo, error) { return c.Info(ctx, cg.KindElastic, "EBIG", "g") },
					func() error { _, err := c.Delete(ctx, cg.KindElastic, "EBIG", "g"); return err }
			}
			m, err := join()
			if !errors.Is(err, cg.ErrTooManyPartitions) || !strings.Contains(err.Error(), "4096") {
				if m != nil {
					m.Stop()
				}
				t.Fatalf("join: %v, want ErrTooManyPartitions naming the ceiling", err)
			}
			if names := consumerNames(t, js, cstream); len(names) != 0 {
				t.Fatalf("consumers %v on %s after a refused join", names, cstream)
			}
			gi, err := info()
			if err != nil || gi.Partitions != n || len(gi.Owners) != n {
				t.Fatalf("info: %v (partitions %d)", err, gi.Partitions)
			}
			rep, err := c.Check(ctx, cg.CheckScope{Kind: cg.Kind(kind), Stream: stream, Group: "g"})
			if err != nil || !hasCode(rep, health.CodePartitionCeiling) || rep.Status() != health.SeverityCritical {
				t.Fatalf("check: %v %+v", err, rep.Findings)
			}
			if err := del(); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := info(); !errors.Is(err, cg.ErrGroupNotFound) {
				t.Fatalf("info after delete: %v", err)
			}
		})
	}
}

// A cancelled context stops info on a very large stored group promptly;
// before info was linear, 100,000 partitions took minutes of CPU and
// ignored SIGTERM.
func TestInfoCancelledPromptly(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	bigElastic(t, js, "HUGE", "g", 100000)
	c := cg.New(js)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Info(ctx, cg.KindElastic, "HUGE", "g")
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("info: %v, want the context's error", err)
	}
	if took > 3*time.Second {
		t.Fatalf("info returned %v after its context ended", took-300*time.Millisecond)
	}
	t.Logf("cancelled info returned after %v", took.Round(time.Millisecond))
}

// A reference-made group may list a member named ">" (its README's
// positional filter taken as a member). cg shows it, marks the member as
// impossible, refuses to run it, runs the others and deletes cleanly.
func TestMemberNamedGreaterThan(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := ctxT(t)
	ordersStream(t, js, "foo", 10)
	putRef(t, js, cg.StaticBucket, "foo", "cg", cg.StaticConfig{MaxMembers: 10, Members: []string{">", "m1", "m2"}})
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ef", Subjects: []string{"e.*"}}); err != nil {
		t.Fatal(err)
	}
	ecfg := cg.ElasticConfig{MaxMembers: 4, Members: []string{">", "m1"}, PartitioningFilters: []cg.PartitioningFilter{{Filter: "e.*", PartitioningWildcards: []int{1}}}}
	if _, err := cg.New(js).CreateElastic(ctx, "ef", "eg", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: ecfg.PartitioningFilters}); err != nil {
		t.Fatal(err)
	}
	putRef(t, js, cg.ElasticBucket, "ef", "eg", ecfg)
	c := cg.New(js)
	noop := func(context.Context, *cg.Msg) {}
	for _, k := range cg.Kinds() {
		t.Run(k.String(), func(t *testing.T) {
			stream, group := "foo", "cg"
			if k == cg.KindElastic {
				stream, group = "ef", "eg"
			}
			gi, err := c.Info(ctx, k, stream, group)
			if err != nil {
				t.Fatalf("info: %v", err)
			}
			var bad *health.MemberStatus
			for i := range gi.Members {
				if gi.Members[i].Member == ">" {
					bad = &gi.Members[i]
				} else if gi.Members[i].Unusable != "" {
					t.Errorf("member %s marked unusable: %s", gi.Members[i].Member, gi.Members[i].Unusable)
				}
			}
			if bad == nil || bad.Unusable == "" || bad.ConsumerExists || len(bad.Partitions) == 0 {
				t.Fatalf("member '>' in info: %+v", bad)
			}
			if ms, err := c.MemberInfo(ctx, k, stream, group, ">"); err != nil || ms.Unusable == "" {
				t.Fatalf("member-info '>': %v %+v", err, ms)
			}
			if refs, err := c.ListGroups(ctx, k); err != nil || len(refs) != 1 {
				t.Fatalf("ls: %v %v", err, refs)
			}
			rep, err := c.Check(ctx, cg.CheckScope{Kind: k, Stream: stream, Group: group})
			if err != nil || !hasCode(rep, health.CodeMemberUnusable) || hasCode(rep, health.CodeCheckFailed) {
				t.Fatalf("check: %v %+v", err, rep.Findings)
			}
			if sd, err := c.StepDown(ctx, k, stream, group, ">"); err != nil || !sd.NothingPinned {
				t.Fatalf("step-down '>': %v %+v", err, sd)
			}
			m, err := c.Join(ctx, k, stream, group, ">", noop, cg.JoinOptions{})
			if err == nil || !strings.Contains(err.Error(), "consumer name") {
				if m != nil {
					m.Stop()
				}
				t.Fatalf("join '>': %v", err)
			}
			m, err = c.Join(ctx, k, stream, group, "m1", noop, cg.JoinOptions{})
			if err != nil {
				t.Fatalf("join m1: %v", err)
			}
			m.Stop()
			if _, err := c.Delete(ctx, k, stream, group); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, err := c.Info(ctx, k, stream, group); !errors.Is(err, cg.ErrGroupNotFound) {
				t.Fatalf("info after delete: %v", err)
			}
		})
	}
}

// Stepping down a member with no pinned instance is success with
// NothingPinned: twice in a row must not fail.
func TestStepDownNothingPinned(t *testing.T) {
	_, c, _ := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		res, err := c.StepDown(ctx, cg.KindStatic, "ORDERS", "g", "m1")
		if err != nil || !res.NothingPinned || res.Why == "" {
			t.Fatalf("step-down %d: %v %+v", i, err, res)
		}
	}
}
