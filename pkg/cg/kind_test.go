package cg

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
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

// Each kind-generic call answers for both kinds from the kind's own
// store and stream, and an unknown kind is refused without a panic.
func TestKindGenericCalls(t *testing.T) {
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
	for _, p := range []struct {
		kind                 Kind
		stream, group, other string
		config               health.GroupConfig
		consumer, workStream string
	}{
		{KindStatic, "K", "sg", "sh", StaticConfig{}, "sg-m1", ""},
		{KindElastic, "E", "eg", "eh", ElasticConfig{}, "m1", "E-eg"},
	} {
		if l, err := c.List(ctx, p.kind, p.stream); err != nil || !reflect.DeepEqual(l, []string{p.group, p.other}) {
			t.Errorf("%s list: %v, %v", p.kind, l, err)
		}
		if _, err := c.List(ctx, p.kind, "NOSUCH"); !errors.Is(err, ErrStreamNotFound) {
			t.Errorf("%s list of a missing stream: %v", p.kind, err)
		}
		cfg, err := c.Config(ctx, p.kind, p.stream, p.group)
		if err != nil || reflect.TypeOf(cfg) != reflect.TypeOf(p.config) || cfg.PartitionCount() != 2 {
			t.Errorf("%s config: %#v, %v", p.kind, cfg, err)
		}
		if _, err := c.Config(ctx, p.kind, p.stream, "missing"); !errors.Is(err, ErrGroupNotFound) {
			t.Errorf("%s config of a missing group: %v", p.kind, err)
		}
		gi, err := c.Info(ctx, p.kind, p.stream, p.group)
		if err != nil || gi.Kind != p.kind.String() || gi.Group != p.group || gi.WorkStream != p.workStream ||
			len(gi.Members) != 1 || gi.Members[0].Consumer != p.consumer || !reflect.DeepEqual(gi.Members[0].Partitions, []int{0, 1}) {
			t.Errorf("%s info: %+v, %v", p.kind, gi, err)
		}
		ms, err := c.MemberInfo(ctx, p.kind, p.stream, p.group, "m1")
		if err != nil || ms.Member != "m1" || ms.Consumer != p.consumer {
			t.Errorf("%s member-info: %+v, %v", p.kind, ms, err)
		}
		_, err = c.MemberInfo(ctx, p.kind, p.stream, p.group, "nobody")
		if !errors.Is(err, ErrMemberNotFound) || !strings.Contains(err.Error(), fmt.Sprintf(`"nobody" is not a member of %s group %q (members: m1)`, p.kind, p.group)) {
			t.Errorf("%s member-info of a stranger: %v", p.kind, err)
		}
		// No instance runs: nothing is pinned, which is not an error.
		sd, err := c.StepDown(ctx, p.kind, p.stream, p.group, "m1")
		if err != nil || !sd.NothingPinned || sd.Member != "m1" || sd.Consumer != p.consumer {
			t.Errorf("%s step-down: %+v, %v", p.kind, sd, err)
		}
		d, err := c.Delete(ctx, p.kind, p.stream, p.group)
		if err != nil || d.Key != p.stream+"."+p.group {
			t.Fatalf("%s delete: %+v, %v", p.kind, d, err)
		}
		if p.kind == KindElastic && d.WorkStream != p.workStream {
			t.Errorf("%s delete kept the work stream: %+v", p.kind, d)
		}
		if l, err := c.List(ctx, p.kind, p.stream); err != nil || !reflect.DeepEqual(l, []string{p.other}) {
			t.Errorf("%s list after delete: %v, %v", p.kind, l, err)
		}
		if _, err := c.Delete(ctx, p.kind, p.stream, p.group); !errors.Is(err, ErrGroupNotFound) {
			t.Errorf("%s delete again: %v", p.kind, err)
		}
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
