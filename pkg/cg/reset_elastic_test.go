package cg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// An elastic group skips its backlog to the end with its members running;
// a rewind is refused with nothing changed.
func TestResetElastic(t *testing.T) {
	c, js, fresh := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []handled // seq is the origin's stream sequence
	h := func(_ context.Context, m *cg.Msg) {
		time.Sleep(2 * time.Millisecond) // a handler's work, not synchronisation
		var n int
		fmt.Sscan(string(m.Data()), &n)
		mu.Lock()
		got = append(got, handled{seq: uint64(n), key: m.Subject()})
		mu.Unlock()
		_ = m.Ack()
	}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(got) }
	for _, name := range []string{"m1", "m2"} {
		m, err := fresh().JoinElastic(ctx, "ORDERS", "g", name, h, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Stop)
	}
	for i := 1; i <= 400; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%d", i%12), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 30*time.Second, "work stream sourced all 400", func() bool {
		s, err := js.Stream(ctx, cg.WorkStreamName("ORDERS", "g"))
		return err == nil && s.CachedInfo().State.LastSeq >= 400
	})
	natstest.Eventually(t, 30*time.Second, "20 handled", func() bool { return count() >= 20 })

	if _, err := c.Reset(ctx, cg.KindElastic, "ORDERS", "g", nil, cg.ResetTarget{Seq: 1}); !errors.Is(err, cg.ErrResetUnsupported) {
		t.Fatalf("elastic rewind: %v", err)
	}
	handledBefore := count()
	res, err := c.Reset(ctx, cg.KindElastic, "ORDERS", "g", nil, cg.ResetTarget{End: true})
	if err != nil {
		t.Fatal(err)
	}
	handledAtReset := count()
	var skipped uint64
	for _, mp := range res.Members {
		skipped += mp.Skipped
	}
	// Planned before what was in hand was let settle: at most what was
	// not handled before the call.
	if handledAtReset >= 400 || skipped == 0 || int(skipped)+handledBefore > 400 {
		t.Fatalf("skip: %d handled before, %d at the reset, %d planned skipped", handledBefore, handledAtReset, skipped)
	}
	ws, err := js.Stream(ctx, cg.WorkStreamName("ORDERS", "g"))
	if err != nil || ws.CachedInfo().State.Msgs != 0 {
		t.Fatalf("work stream after the skip: %v %+v", err, ws)
	}
	for i := 401; i <= 430; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%d", i%12), []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 30*time.Second, "the 30 new handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, h := range got {
			if h.seq > 400 {
				n++
			}
		}
		return n == 30
	})
	mu.Lock()
	defer mu.Unlock()
	// What was handled after the reset is the new messages only (the
	// backlog was skipped), once each, in per-key order.
	checkReplay(t, got[handledAtReset:], 401, 430)
}
