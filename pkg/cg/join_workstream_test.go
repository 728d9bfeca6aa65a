package cg

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// An elastic group whose work stream partitions differently from its
// stored max_members (4 stored, the work stream stamps 8) used to be
// consumed in part: members served 0-3 while partitions 4-7 filled up
// and were never consumed. Join refuses it, naming the repair, and joins
// once the repairing create has run.
func TestJoinElasticRefusesWorkStreamOtherPartitions(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.*"}}); err != nil {
		t.Fatal(err)
	}
	cfg := ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{{Filter: "r.*", PartitioningWildcards: []int{1}}}, Members: []string{"m1"}}
	if _, err := c.CreateElastic(ctx, "R", "g", ElasticConfig{MaxMembers: 4, PartitioningFilters: cfg.PartitioningFilters}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMembers(ctx, "R", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	ws, err := js.Stream(ctx, "R-g")
	if err != nil {
		t.Fatal(err)
	}
	sc := ws.CachedInfo().Config
	sc.Sources[0].SubjectTransforms = []jetstream.SubjectTransformConfig{{Source: "r.*", Destination: "{{Partition(8,1)}}.r.{{Wildcard(1)}}"}}
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *Msg) {}
	m, err := c.JoinElastic(ctx, "R", "g", "m1", h, JoinOptions{})
	if err == nil {
		m.Stop()
		t.Fatal("joined a group whose work stream stamps partitions no member serves")
	}
	var re *health.Error
	if !errors.Is(err, ErrStreamNotReady) || !strings.Contains(err.Error(), "R-g") || !strings.Contains(err.Error(), "re-run the group's create with max members 4") ||
		!errors.As(err, &re) || re.Remedy.Code != health.RemedyRepairWorkStreamJoin || re.Remedy.Stream != "R" || re.Remedy.Group != "g" || re.Remedy.MaxMembers != 4 {
		t.Fatalf("error: %v", err)
	}
	if _, err := c.CreateElastic(ctx, "R", "g", ElasticConfig{MaxMembers: 4, PartitioningFilters: cfg.PartitioningFilters}); err != nil {
		t.Fatalf("repairing create: %v", err)
	}
	m, err = c.JoinElastic(ctx, "R", "g", "m1", h, JoinOptions{})
	if err != nil {
		t.Fatalf("after the repair: %v", err)
	}
	m.Stop()
}
