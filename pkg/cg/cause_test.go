package cg_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// causes counts a member's events by kind and cause.
type causes struct {
	mu sync.Mutex
	n  map[string]int
}

func newCauses() *causes { return &causes{n: map[string]int{}} }

func (c *causes) on(e cg.Event) {
	c.mu.Lock()
	c.n[string(e.Kind)+"/"+string(e.Cause)]++
	c.mu.Unlock()
}

func (c *causes) count(kind cg.EventKind, cause cg.EventCause) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[string(kind)+"/"+string(cause)]
}

func waitStopped(t *testing.T, m *cg.Member, what string) {
	t.Helper()
	select {
	case <-m.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("member did not stop: %s", what)
	}
}

// Each stop and pin-loss cause is reported on the event and by StopCause
// where it happens: a stop (released on stop, stop requested), a group
// deletion, a configuration change, a deleted stream, an elastic
// rebalance, a deleted work stream.
func TestEventCauses(t *testing.T) {
	t.Run("static", func(t *testing.T) {
		s, c, js := setup(t)
		ctx := ctxT(t)
		if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
			t.Fatal(err)
		}
		cnt := newCounter()
		ca, cb := newCauses(), newCauses()
		a, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("a"), cg.JoinOptions{OnEvent: ca.on})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Stop()
		publish(t, js, []string{"a", "b"}, 4)
		natstest.Eventually(t, 20*time.Second, "a pinned and handling", func() bool { return cnt.get("a") == 4 && a.PinID() != "" })
		c2, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		b, err := c2.JoinStatic(ctx, "ORDERS", "g", "m1", cnt.handler("b"), cg.JoinOptions{OnEvent: cb.on})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Stop()
		if a.StopCause() != "" {
			t.Fatalf("running instance has stop cause %q", a.StopCause())
		}
		a.Stop()
		if got := ca.count(cg.EventPinLost, cg.CauseReleasedOnStop); got != 1 {
			t.Errorf("pin lost released on stop: %d events, want 1", got)
		}
		if got := ca.count(cg.EventStopped, cg.CauseStopRequested); got != 1 || a.StopCause() != cg.CauseStopRequested {
			t.Errorf("stopped stop requested: %d events, StopCause %q", got, a.StopCause())
		}
		publish(t, js, []string{"a"}, 1)
		natstest.Eventually(t, 20*time.Second, "b takes over", func() bool { return cnt.get("b") == 1 })
		if _, err := c.Delete(ctx, cg.KindStatic, "ORDERS", "g"); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, b, "group deleted")
		if got := cb.count(cg.EventStopped, cg.CauseGroupDeleted); got != 1 || b.StopCause() != cg.CauseGroupDeleted || b.Err() != nil {
			t.Errorf("stopped group deleted: %d events, StopCause %q, Err %v", got, b.StopCause(), b.Err())
		}
		if got := cb.count(cg.EventPinLost, cg.CauseReleasedOnStop); got != 0 {
			t.Errorf("a group deletion released the pin as on stop (%d)", got)
		}

		// A configuration change.
		if _, err := c.CreateStatic(ctx, "ORDERS", "h", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
			t.Fatal(err)
		}
		ch := newCauses()
		m, err := c.JoinStatic(ctx, "ORDERS", "h", "m1", newCounter().handler("h"), cg.JoinOptions{OnEvent: ch.on})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		kv, _ := js.KeyValue(ctx, cg.StaticBucket)
		if _, err := kv.Put(ctx, "ORDERS.h", []byte(`{"max_members":10,"members":["m1","m2"]}`)); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, m, "config changed")
		if got := ch.count(cg.EventStopped, cg.CauseConfigChanged); got != 1 || m.StopCause() != cg.CauseConfigChanged {
			t.Errorf("stopped config changed: %d events, StopCause %q", got, m.StopCause())
		}

		// The stream deleted under a member.
		if _, err := c.CreateStatic(ctx, "ORDERS", "k", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
			t.Fatal(err)
		}
		ck := newCauses()
		h := func(_ context.Context, msg *cg.Msg) {
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = msg.DoubleAck(actx)
		}
		k, err := c.JoinStatic(ctx, "ORDERS", "k", "m1", h, cg.JoinOptions{OnEvent: ck.on})
		if err != nil {
			t.Fatal(err)
		}
		defer k.Stop()
		if err := js.DeleteStream(ctx, "ORDERS"); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, k, "stream deleted")
		if got := ck.count(cg.EventStopped, cg.CauseStreamGone); got != 1 || k.StopCause() != cg.CauseStreamGone {
			t.Errorf("stopped stream gone: %d events, StopCause %q (err %v)", got, k.StopCause(), k.Err())
		}
	})

	t.Run("elastic", func(t *testing.T) {
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
			actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = msg.DoubleAck(actx)
		}
		handled := func() int { mu.Lock(); defer mu.Unlock(); return n }
		ce := newCauses()
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{OnEvent: ce.on})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Stop()
		for i := range 5 {
			if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		natstest.Eventually(t, 20*time.Second, "pinned and handling", func() bool { return handled() == 5 && m.PinID() != "" })
		if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m2"}); err != nil {
			t.Fatal(err)
		}
		natstest.Eventually(t, 20*time.Second, "released to rebalance", func() bool {
			return ce.count(cg.EventPinLost, cg.CauseReleasedToRebalance) == 1
		})
		if err := js.DeleteStream(ctx, "ORDERS-g"); err != nil {
			t.Fatal(err)
		}
		waitStopped(t, m, "work stream deleted")
		if got := ce.count(cg.EventStopped, cg.CauseWorkStreamGone); got != 1 || m.StopCause() != cg.CauseWorkStreamGone {
			t.Errorf("stopped work stream gone: %d events, StopCause %q", got, m.StopCause())
		}
		if got := ce.count(cg.EventPinLost, cg.CauseReleasedOnStop); got != 0 {
			t.Errorf("pin released as on stop (%d) though nobody asked to stop", got)
		}
	})
}

// The runtime reaches user code only through the delivery stage: with a
// second stage plugged in, every message handled was accepted by it, in
// delivery order, and a stop asks for the rest back and then waits, once
// each, after the last accept.
func TestDeliveryStageIsTheOnlyWayIn(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	var log cg.StageLog
	var mu sync.Mutex
	var seen []string
	h := func(_ context.Context, msg *cg.Msg) {
		md, _ := msg.Metadata()
		mu.Lock()
		seen = append(seen, fmt.Sprintf("accept %d", md.Sequence.Stream))
		mu.Unlock()
		_ = msg.DoubleAck(context.Background())
	}
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.WithRecordingStage(cg.JoinOptions{}, &log))
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, []string{"a", "b", "c"}, 20)
	natstest.Eventually(t, 20*time.Second, "20 handled", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 20 })
	m.Stop()
	calls := log.Calls()
	if len(calls) < 2 || calls[len(calls)-2] != "handBack" || calls[len(calls)-1] != "wait" {
		t.Fatalf("stop did not end with handBack, wait: %v", calls)
	}
	accepted := calls[:len(calls)-2]
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(accepted, seen) {
		t.Fatalf("handler saw %v, stage accepted %v", seen, accepted)
	}
	if !slices.IsSortedFunc(accepted, func(a, b string) int {
		var x, y int
		fmt.Sscanf(a, "accept %d", &x)
		fmt.Sscanf(b, "accept %d", &y)
		return x - y
	}) {
		t.Fatalf("accepted out of delivery order: %v", accepted)
	}
}

// A handler's DoubleAck with a context that has no deadline is bounded, as
// jetstream.Msg's is: when the consumer is deleted under the message in
// hand and made again (as the member does), the ack goes to the new
// consumer, which never answers it, and an unbounded wait would hold the
// handler, and the member's stop, forever.
func TestDoubleAckWithoutDeadlineIsBounded(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	inHand, release := make(chan struct{}), make(chan struct{})
	acked := make(chan error, 1)
	var once sync.Once
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
		first := false
		once.Do(func() { first = true })
		if !first {
			return
		}
		close(inHand)
		<-release
		acked <- msg.DoubleAck(context.Background())
	}, cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	publish(t, js, []string{"a"}, 1)
	select {
	case <-inHand:
	case <-time.After(20 * time.Second):
		t.Fatal("no message reached the handler")
	}
	cons, err := js.Consumer(ctx, "ORDERS", m.Consumer())
	if err != nil {
		t.Fatal(err)
	}
	cfg := cons.CachedInfo().Config
	if err := js.DeleteConsumer(ctx, "ORDERS", m.Consumer()); err != nil {
		t.Fatal(err)
	}
	// Made again under the same name (as the member does once the message
	// in hand is done): the new consumer never answers an ack for a
	// delivery it did not make. It is paused for the test's length: one
	// that delivered the message to the member's next pull would have made
	// that same delivery (stream and consumer sequence 1) and answered the
	// ack (a loaded run re-pulled before the handler acked).
	pause := time.Now().Add(time.Hour)
	cfg.PauseUntil = &pause
	if _, err := js.CreateConsumer(ctx, "ORDERS", cfg); err != nil {
		t.Fatal(err)
	}
	close(release)
	select {
	case err := <-acked:
		if err == nil {
			t.Fatal("a double ack on a recreated consumer succeeded")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("DoubleAck(context.Background()) on a recreated consumer did not return")
	}
}
