package cg_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// KeyReader gives the hashed tokens joined with ".", in hash order, for
// static and elastic groups, and says when the key cannot be read.
func TestKeyReader(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := cg.New(js)
	for _, sc := range []jetstream.StreamConfig{
		{Name: "SHOP", Subjects: []string{"shop.*.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "shop.*.*", Destination: "{{partition(4,2,1)}}.shop.{{wildcard(1)}}.{{wildcard(2)}}"}},
		// The hashed token is not written back: no key to read.
		{Name: "LOSSY", Subjects: []string{"lossy.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "lossy.*", Destination: "{{partition(4,1)}}.lossy"}},
		{Name: "PLAIN", Subjects: []string{"plain.>"}},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []struct{ stream string }{{"SHOP"}, {"LOSSY"}} {
		if _, err := c.CreateStatic(ctx, g.stream, "g", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CreateElastic(ctx, "PLAIN", "e", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: []cg.PartitioningFilter{
		{Filter: "plain.*.*", PartitioningWildcards: []int{2}}, {Filter: "plain.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "PLAIN", "whole", cg.ElasticConfig{MaxMembers: 4}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		kind          cg.Kind
		stream, group string
		subject, want string
		ok            bool
	}{
		{cg.KindStatic, "SHOP", "g", "shop.k1.refund", "refund.k1", true},
		{cg.KindStatic, "LOSSY", "g", "lossy", "", false},
		{cg.KindElastic, "PLAIN", "e", "plain.a.b", "b", true},
		{cg.KindElastic, "PLAIN", "e", "plain.k7", "k7", true},
		{cg.KindElastic, "PLAIN", "e", "plain.a.b.c", "", false},
		{cg.KindElastic, "PLAIN", "whole", "plain.a.b", "plain.a.b", true},
	} {
		keyOf, err := c.KeyReader(ctx, tc.kind, tc.stream, tc.group)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.stream, tc.group, err)
		}
		if got, ok := keyOf(tc.subject); got != tc.want || ok != tc.ok {
			t.Errorf("%s %s: key of %s = %q, %v; want %q, %v", tc.stream, tc.group, tc.subject, got, ok, tc.want, tc.ok)
		}
	}
	if _, err := c.KeyReader(ctx, cg.KindElastic, "PLAIN", "nope"); err == nil {
		t.Fatal("KeyReader of a group that does not exist: no error")
	}
}
