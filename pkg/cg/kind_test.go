package cg

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestParseKind(t *testing.T) {
	for _, k := range Kinds() {
		got, err := ParseKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseKind(%q) = %q, %v", k, got, err)
		}
	}
	for _, s := range []string{"", "dynamic", "Static"} {
		if _, err := ParseKind(s); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q): %v, want ErrUnknownKind", s, err)
		}
	}
	if KindStatic.Bucket() != StaticBucket || KindElastic.Bucket() != ElasticBucket || Kind("x").Bucket() != "" {
		t.Error("buckets")
	}
	if KindStatic.WorkStream("S", "g") != "S" || KindElastic.WorkStream("S", "g") != "S-g" || Kind("x").WorkStream("S", "g") != "" {
		t.Error("work streams")
	}
	if (GroupRef{Kind: "elastic"}).KindOf() != KindElastic {
		t.Error("KindOf")
	}
}

// errString makes errors comparable by their wording.
func errString(err error) string { return fmt.Sprint(err) }

// Each generic method answers as the kind-specific one does, for both
// kinds, and an unknown kind is refused without a panic.
func TestKindGenericMatchesSpecific(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "K", Subjects: []string{"k.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "k.*", Destination: "{{partition(2,1)}}.k.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "K", "sg", StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "K", "sh", StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "E", Subjects: []string{"e.*"}}); err != nil {
		t.Fatal(err)
	}
	ecfg := ElasticConfig{MaxMembers: 2, PartitioningFilters: []PartitioningFilter{{Filter: "e.*", PartitioningWildcards: []int{1}}}, Members: []string{"m1"}}
	if _, err := c.CreateElastic(ctx, "E", "eg", ecfg); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "E", "eh", ecfg); err != nil {
		t.Fatal(err)
	}
	type pair struct {
		kind         Kind
		stream       string
		group, other string
		list         func(context.Context, string) ([]string, error)
		config       func(context.Context, string, string) (health.GroupConfig, error)
		info         func(context.Context, string, string) (health.GroupInfo, error)
		memberInfo   func(context.Context, string, string, string) (health.MemberStatus, error)
		stepDown     func(context.Context, string, string, string) (StepDownResult, error)
		delete       func(context.Context, string, string) (DeleteResult, error)
	}
	pairs := []pair{
		{KindStatic, "K", "sg", "sh", c.ListStatic,
			func(ctx context.Context, s, g string) (health.GroupConfig, error) { return c.StaticConfig(ctx, s, g) },
			c.StaticInfo, c.StaticMemberInfo, c.StaticStepDown, c.DeleteStatic},
		{KindElastic, "E", "eg", "eh", c.ListElastic,
			func(ctx context.Context, s, g string) (health.GroupConfig, error) { return c.ElasticConfig(ctx, s, g) },
			c.ElasticInfo, c.ElasticMemberInfo, c.ElasticStepDown, c.DeleteElastic},
	}
	same := func(what string, k Kind, a, b any, ea, eb error) {
		t.Helper()
		if !reflect.DeepEqual(a, b) || errString(ea) != errString(eb) {
			t.Errorf("%s %s: generic %+v, %v; specific %+v, %v", k, what, a, ea, b, eb)
		}
	}
	for _, p := range pairs {
		l1, e1 := c.List(ctx, p.kind, p.stream)
		l2, e2 := p.list(ctx, p.stream)
		if len(l1) != 2 {
			t.Errorf("%s list: %v", p.kind, l1)
		}
		same("list", p.kind, l1, l2, e1, e2)
		c1, e1 := c.Config(ctx, p.kind, p.stream, p.group)
		c2, e2 := p.config(ctx, p.stream, p.group)
		if e1 != nil {
			t.Errorf("%s config: %v", p.kind, e1)
		}
		same("config", p.kind, c1, c2, e1, e2)
		_, e1 = c.Config(ctx, p.kind, p.stream, "missing")
		_, e2 = p.config(ctx, p.stream, "missing")
		if !errors.Is(e1, ErrGroupNotFound) {
			t.Errorf("%s config of a missing group: %v", p.kind, e1)
		}
		same("missing config", p.kind, nil, nil, e1, e2)
		i1, e1 := c.Info(ctx, p.kind, p.stream, p.group)
		i2, e2 := p.info(ctx, p.stream, p.group)
		if e1 != nil || i1.Group != p.group || len(i1.Members) != 1 {
			t.Errorf("%s info: %+v, %v", p.kind, i1, e1)
		}
		i1.SampledAt = i2.SampledAt // when each was read
		same("info", p.kind, i1, i2, e1, e2)
		m1, e1 := c.MemberInfo(ctx, p.kind, p.stream, p.group, "m1")
		m2, e2 := p.memberInfo(ctx, p.stream, p.group, "m1")
		same("member-info", p.kind, m1, m2, e1, e2)
		_, e1 = c.MemberInfo(ctx, p.kind, p.stream, p.group, "nobody")
		_, e2 = p.memberInfo(ctx, p.stream, p.group, "nobody")
		if !errors.Is(e1, ErrMemberNotFound) {
			t.Errorf("%s member-info of a stranger: %v", p.kind, e1)
		}
		same("member-info stranger", p.kind, nil, nil, e1, e2)
		s1, e1 := c.StepDown(ctx, p.kind, p.stream, p.group, "m1")
		s2, e2 := p.stepDown(ctx, p.stream, p.group, "m1")
		same("step-down", p.kind, s1, s2, e1, e2)
		// Delete one group each way: the results differ only by the group's name.
		d1, e1 := c.Delete(ctx, p.kind, p.stream, p.group)
		d2, e2 := p.delete(ctx, p.stream, p.other)
		if e1 != nil || e2 != nil {
			t.Fatalf("%s delete: %v, %v", p.kind, e1, e2)
		}
		if fmt.Sprintf("%+v", d1) == "" || reflect.TypeOf(d1) != reflect.TypeOf(d2) {
			t.Errorf("%s delete: %+v vs %+v", p.kind, d1, d2)
		}
		if l, err := c.List(ctx, p.kind, p.stream); err != nil || len(l) != 0 {
			t.Errorf("%s list after delete: %v, %v", p.kind, l, err)
		}
		_, e1 = c.Delete(ctx, p.kind, p.stream, p.group)
		_, e2 = p.delete(ctx, p.stream, p.group)
		same("delete again", p.kind, nil, nil, e1, e2)
	}

	bad := Kind("dynamic")
	if _, err := c.List(ctx, bad, "K"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("list: %v", err)
	}
	if _, err := c.Config(ctx, bad, "K", "g"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("config: %v", err)
	}
	if _, err := c.Info(ctx, bad, "K", "g"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("info: %v", err)
	}
	if _, err := c.MemberInfo(ctx, bad, "K", "g", "m1"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("member-info: %v", err)
	}
	if _, err := c.StepDown(ctx, bad, "K", "g", "m1"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("step-down: %v", err)
	}
	if _, err := c.Delete(ctx, bad, "K", "g"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("delete: %v", err)
	}
	if m, err := c.Join(ctx, bad, "K", "g", "m1", nil, JoinOptions{}); m != nil || !errors.Is(err, ErrUnknownKind) {
		t.Errorf("join: %v, %v", m, err)
	}
}
