package cg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// events collects a member's events.
type events struct {
	mu  sync.Mutex
	all []cg.Event
}

func (e *events) on(ev cg.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) has(kind cg.EventKind, reason string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ev := range e.all {
		if ev.Kind == kind && strings.Contains(ev.Reason, reason) {
			return true
		}
	}
	return false
}

// A static member whose consumer is deleted under it (nats consumer rm)
// recreates it within 5s, resuming after its saved position, and handles
// what is published after; its standby, recreating it too, agrees.
func TestStaticConsumerDeletedUnderMemberIsRecreated(t *testing.T) {
	s, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	cnt := newCounter()
	var ev events
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("a"), cg.JoinOptions{OnEvent: ev.on})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	publish(t, js, []string{"a", "b", "c"}, 10)
	natstest.Eventually(t, 20*time.Second, "10 handled", func() bool { return cnt.distinct() == 10 })
	cb, _ := cg.NewFromConn(natstest.Connect(t, s), "")
	standby, err := cb.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("b"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Stop()
	// Let the pinned instance save its position (every second).
	natstest.Eventually(t, 10*time.Second, "position saved", func() bool {
		kv, err := js.KeyValue(ctx, cg.PositionsBucket)
		if err != nil {
			return false
		}
		e, err := kv.Get(ctx, "ORDERS.g.m1")
		return err == nil && strings.Contains(string(e.Value()), `"ack_floor":10`)
	})
	if err := js.DeleteConsumer(ctx, "ORDERS", "g-m1"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	natstest.Eventually(t, 5*time.Second, "consumer recreated within 5s", func() bool {
		_, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil
	})
	t.Logf("recreated %v after the deletion", time.Since(deleted).Round(time.Millisecond))
	publish(t, js, []string{"a", "b", "c"}, 5)
	natstest.Eventually(t, 10*time.Second, "5 more handled", func() bool { return cnt.distinct() == 15 })
	if got := cnt.get("a") + cnt.get("b"); got != 15 {
		t.Fatalf("handled %d messages, want 15 (resumed after the saved position, nothing replayed)", got)
	}
	if !ev.has(cg.EventWarning, "was deleted on the server; recreated it (") {
		t.Fatalf("no recreation warning; events: %+v", ev.all)
	}
	for _, x := range []*cg.Member{m, standby} {
		select {
		case <-x.Done():
			t.Fatalf("an instance stopped: %v", x.Err())
		default:
		}
	}
}

// A static member whose stream is deleted stops with ErrConsumerGone
// within 5s instead of waiting forever.
func TestStaticStreamDeletedStopsMember(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	// Its acks may get no answer once the stream is gone: bounded.
	h := func(_ context.Context, msg *cg.Msg) {
		mu.Lock()
		n++
		mu.Unlock()
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = msg.DoubleAck(actx)
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	publish(t, js, []string{"a"}, 2)
	natstest.Eventually(t, 20*time.Second, "2 handled", func() bool { mu.Lock(); defer mu.Unlock(); return n == 2 })
	if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("member still running 5s after its stream was deleted")
	}
	if err := m.Err(); !errors.Is(err, cg.ErrConsumerGone) || !strings.Contains(err.Error(), "stream ORDERS was deleted") {
		t.Fatalf("stopped with %v, want ErrConsumerGone naming the stream", err)
	}
}

// An elastic member whose work stream is deleted stops with
// ErrWorkStreamGone within 5s, saying to re-run create; one whose consumer
// alone is deleted recreates it and goes on.
func TestElasticWorkStreamDeletedStopsMember(t *testing.T) {
	c, js, fresh := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	n := 0
	h := func(_ context.Context, msg *cg.Msg) {
		mu.Lock()
		n++
		mu.Unlock()
		// Its acks may get no answer once the work stream is gone: bounded.
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = msg.DoubleAck(actx)
	}
	handled := func() int { mu.Lock(); defer mu.Unlock(); return n }
	m, err := fresh().JoinElastic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	pub := func(k int) {
		for i := 0; i < k; i++ {
			if _, err := js.Publish(ctx, "orders.k"+string(rune('a'+i%5)), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(5)
	natstest.Eventually(t, 20*time.Second, "5 handled", func() bool { return handled() == 5 })

	// The member consumer alone: recreated, and traffic goes on.
	if err := js.DeleteConsumer(ctx, "ORDERS-g", "m1"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, "consumer recreated within 5s", func() bool {
		_, err := js.Consumer(ctx, "ORDERS-g", "m1")
		return err == nil
	})
	pub(5)
	natstest.Eventually(t, 10*time.Second, "5 more handled", func() bool { return handled() == 10 })

	if err := js.DeleteStream(ctx, "ORDERS-g"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("member still running 5s after its work stream was deleted")
	}
	var re *health.Error
	if err := m.Err(); !errors.Is(err, cg.ErrWorkStreamGone) || !strings.Contains(err.Error(), "re-run the group's create") ||
		!errors.As(err, &re) || re.Remedy.Code != health.RemedyRebuildWorkStream || re.Remedy.Stream != "ORDERS" || re.Remedy.Group != "g" {
		t.Fatalf("stopped with %v, want ErrWorkStreamGone saying to re-run create", err)
	}
}
