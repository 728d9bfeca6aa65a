package cg

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// A server older than the consumer reset API: the reset is refused with
// ErrServerTooOld naming the version needed, and nothing changes.
func TestResetOldServerRefused(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	c := New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", StaticConfig{MaxMembers: 4, Filters: []string{">"}, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if _, err := js.Publish(ctx, "orders.a", nil); err != nil {
			t.Fatal(err)
		}
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, m *Msg) { _ = m.Ack() }, JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, "10 acked", func() bool {
		ci, err := c.consumerInfo(ctx, "ORDERS", "g-m1")
		return err == nil && ci != nil && ci.AckFloor.Stream == 10
	})
	m.Stop()
	_, err = c.reset(ctx, Version{2, 12, 3}, KindStatic, "ORDERS", "g", nil, ResetTarget{Start: true})
	if !errors.Is(err, ErrServerTooOld) || !strings.Contains(err.Error(), "2.14.0") {
		t.Fatalf("old server: %v", err)
	}
	ci, err := c.consumerInfo(ctx, "ORDERS", "g-m1")
	if err != nil || ci.AckFloor.Stream != 10 || ci.NumPending != 0 || ci.Delivered.Stream != 10 || ci.Paused {
		t.Fatalf("consumer changed: %+v %v", ci, err)
	}
	if _, ok := c.savedPosition(ctx, "ORDERS", "g", "m1"); ok {
		p, _ := c.savedPosition(ctx, "ORDERS", "g", "m1")
		if p.AckFloor != 10 {
			t.Fatalf("saved position moved: %+v", p)
		}
	}
}
