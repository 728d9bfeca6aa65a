package cg

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Re-running create over a group whose work stream was lost remakes it,
// and must say so: the new work stream re-sources the stream from its
// start, so handled messages come again. It used to report "already
// exists, identical".
func TestCreateElasticSaysItRemadeTheWorkStream(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.*"}}); err != nil {
		t.Fatal(err)
	}
	cfg := ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{{Filter: "r.*", PartitioningWildcards: []int{1}}}}
	if _, err := c.CreateElastic(ctx, "R", "g", cfg); err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateElastic(ctx, "R", "g", cfg)
	if err != nil || res.Created || len(res.Repaired) != 0 {
		t.Fatalf("identical re-run: %+v %v", res, err)
	}
	if err := js.DeleteStream(ctx, "R-g"); err != nil {
		t.Fatal(err)
	}
	res, err = c.CreateElastic(ctx, "R", "g", cfg)
	if err != nil || res.Created {
		t.Fatalf("re-run over a lost work stream: %+v %v", res, err)
	}
	if len(res.Repaired) != 1 || !strings.Contains(res.Repaired[0], "missing") || !strings.Contains(res.Repaired[0], "from its start") {
		t.Fatalf("repaired: %q", res.Repaired)
	}
	if _, err := js.Stream(ctx, "R-g"); err != nil {
		t.Fatalf("work stream not remade: %v", err)
	}
}
