package cg_test

import (
	"context"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// inUse is the heap and goroutine stacks in use after a collection.
func inUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc + ms.StackInuse)
}

// TestMeasureMemoryPerUnit measures what cg's numeric options cost in the
// member's memory, the measurement their ceilings (limits.go) are chosen
// from: per handler slot (Concurrency) and per message held unacked in
// the instance (MaxAckPending). The embedded server runs in the same
// process, so its side of the consumer counts too. It runs only when asked:
//
//	CG_MEASURE_MEMORY=1 go test -run TestMeasureMemoryPerUnit -v ./pkg/cg/
func TestMeasureMemoryPerUnit(t *testing.T) {
	if os.Getenv("CG_MEASURE_MEMORY") == "" {
		t.Skip("set CG_MEASURE_MEMORY=1 to measure memory per concurrency slot and per held message")
	}
	_, js, fresh := laneSetup(t, "m1")
	ctx := ctxT(t)

	// Concurrency: N lanes (workers), max ack pending left to cg (4×N,
	// at most the ceiling), 20 messages handled.
	slot := func(n int) int64 {
		// A member consumer made again resumes after what the last
		// handled: 20 new messages for each run.
		publishKeyed(t, js, keyNames(20), 20)
		before := inUse()
		done := make(chan struct{}, 64)
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
			_ = msg.Ack()
			done <- struct{}{}
		}, cg.JoinOptions{Concurrency: n, MaxAckPending: max(n, 20)})
		if err != nil {
			t.Fatal(err)
		}
		// Stop and delete so that each run sees the 20 messages anew.
		defer func() {
			m.Stop()
			_ = js.DeleteConsumer(ctx, "ORDERS", "g-m1")
		}()
		for range 20 {
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("20 messages not handled")
			}
		}
		return inUse() - before
	}
	base := slot(1)
	for _, n := range []int{256, 1024} {
		d := slot(n)
		t.Logf("concurrency %5d: %7.1f KB more than concurrency 1 (%.2f KB per slot)", n, float64(d-base)/1024, float64(d-base)/1024/float64(n-1))
	}

	// Held messages: one key, its first message in the handler while the
	// rest wait in the key's queue, max ack pending M.
	held := func(mx int, size int) int64 {
		st, err := js.Stream(ctx, "ORDERS")
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Purge(ctx); err != nil {
			t.Fatal(err)
		}
		payload := []byte(strings.Repeat("x", size))
		for i := 0; i < mx+1; i++ {
			if _, err := js.PublishMsgAsync(&nats.Msg{Subject: "orders.k001.e1", Data: payload}); err != nil {
				t.Fatal(err)
			}
		}
		<-js.PublishAsyncComplete()
		before := inUse()
		release := make(chan struct{})
		m, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
			<-release
			_ = msg.Ack()
		}, cg.JoinOptions{Concurrency: 2, MaxAckPending: mx})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			close(release)
			m.Stop()
			_ = js.DeleteConsumer(ctx, "ORDERS", "g-m1")
		}()
		natstest.Eventually(t, 30*time.Second, "max ack pending delivered", func() bool {
			cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
			return err == nil && cons.CachedInfo().NumAckPending == mx
		})
		return inUse() - before
	}
	for _, size := range []int{128, 1024} {
		small, big := held(16, size), held(4096, size)
		t.Logf("payload %4d B: 4096 messages held take %7.1f KB more than 16 (%.2f KB per message)", size, float64(big-small)/1024, float64(big-small)/1024/4080)
	}
}
