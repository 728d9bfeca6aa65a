package cg_test

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

func TestListGroupsAcrossStreamsAndKinds(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if refs, err := c.ListGroups(ctx); err != nil || len(refs) != 0 {
		t.Fatalf("no buckets yet: %v %v", refs, err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*"}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []string{"b", "a"} {
		if _, err := c.CreateStatic(ctx, "ORDERS", g, cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []string{"a", "z"} {
		if _, err := c.CreateElastic(ctx, "EV", g, cg.ElasticConfig{MaxMembers: 4,
			PartitioningFilters: []cg.PartitioningFilter{{Filter: "ev.*", PartitioningWildcards: []int{1}}}}); err != nil {
			t.Fatal(err)
		}
	}
	all, err := c.ListGroups(ctx)
	want := []cg.GroupRef{{Kind: "elastic", Stream: "EV", Group: "a"}, {Kind: "elastic", Stream: "EV", Group: "z"},
		{Kind: "static", Stream: "ORDERS", Group: "a"}, {Kind: "static", Stream: "ORDERS", Group: "b"}}
	if err != nil || !slices.Equal(all, want) {
		t.Fatalf("ListGroups() = %v %v, want %v", all, err, want)
	}
	static, err := c.ListGroups(ctx, "static")
	if err != nil || !slices.Equal(static, want[2:]) {
		t.Fatalf("ListGroups(static) = %v %v", static, err)
	}
	if names, err := c.List(ctx, cg.KindElastic, "EV"); err != nil || !slices.Equal(names, []string{"a", "z"}) {
		t.Fatalf("List(elastic, EV) = %v %v", names, err)
	}
	if names, err := c.List(ctx, cg.KindStatic, "ORDERS"); err != nil || !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("List(static, ORDERS) = %v %v", names, err)
	}
}
