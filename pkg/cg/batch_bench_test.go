package cg_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// A sink whose cost is what seed 003's case has: one external write per
// call, a fixed latency (a round trip, a commit) plus a small cost per
// message in it. Handled one at a time every message pays the call; in a
// batch of N, N messages share it.
const (
	sinkCallCost = time.Millisecond
	sinkMsgCost  = 20 * time.Microsecond
)

// BenchmarkBatchVsSingle measures one member owning 10
// partitions, a preloaded backlog, the same sink cost per message handled
// one at a time (max ack pending 1, one sink call per message) and in
// ordered batches of Size (one sink call per batch), back to back in one
// run; size=10/max-ack-pending=40 lets the server deliver the next batch
// while one is written (cg's default max ack pending for a batch member
// is Size). It reports single-msgs/s, batch-msgs/s and batch/single. Every
// message must be written once and the member's stream order kept (a
// failure fails the run). Each b.N iteration is a whole pair of runs: use
// -benchtime 1x (make bench-batches); -short preloads 500 instead of 3000.
func BenchmarkBatchVsSingle(b *testing.B) {
	n := 3000
	if testing.Short() {
		n = 500
	}
	for _, tc := range []struct{ size, maxAckPending int }{{10, 10}, {10, 0}, {50, 0}, {100, 0}} {
		size := tc.size
		name := fmt.Sprintf("size=%d", size)
		if tc.maxAckPending > 0 {
			name += fmt.Sprintf("/max-ack-pending=%d", tc.maxAckPending)
		}
		b.Run(name, func(b *testing.B) {
			var single, batch, calls float64
			for i := 0; i < b.N; i++ {
				r, _ := sinkRun(b, n, 0, 0)
				single += r
				r, c := sinkRun(b, n, size, tc.maxAckPending)
				batch += r
				calls += float64(c)
			}
			b.ReportMetric(float64(n*b.N)/calls, "msgs/batch")
			b.ReportMetric(single/float64(b.N), "single-msgs/s")
			b.ReportMetric(batch/float64(b.N), "batch-msgs/s")
			b.ReportMetric(batch/single, "batch/single")
		})
	}
}

// sinkRun preloads n messages on a fresh server, joins one member (in
// batches of size, or one at a time for 0) whose handler pays the sink's
// cost, and returns the rate from the first write to the last and the
// number of sink calls.
func sinkRun(b *testing.B, n, size, maxAckPending int) (float64, int) {
	b.Helper()
	s := natstest.RunServer(b)
	defer s.Shutdown()
	nc, js := natstest.JetStream(b, s)
	defer nc.Close()
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	}); err != nil {
		b.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync(fmt.Sprintf("orders.k%d", i%100), nil); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publish did not complete")
	}

	var (
		mu          sync.Mutex
		first, last time.Time
		written     = map[uint64]int{}
		high        uint64
		broken      int
		calls       int
		done        = make(chan struct{})
	)
	write := func(msgs []*cg.Msg) {
		time.Sleep(sinkCallCost + time.Duration(len(msgs))*sinkMsgCost)
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		if first.IsZero() {
			first = now.Add(-sinkCallCost - time.Duration(len(msgs))*sinkMsgCost)
		}
		last = now
		calls++
		for _, m := range msgs {
			md, err := m.Metadata()
			if err != nil {
				broken++
				continue
			}
			seq := md.Sequence.Stream
			if written[seq]++; written[seq] == 1 {
				if seq <= high {
					broken++
				}
				high = max(high, seq)
			}
		}
		if len(written) == n {
			select {
			case <-done:
			default:
				close(done)
			}
		}
	}
	opts := cg.JoinOptions{MaxAckPending: maxAckPending}
	var h cg.Handler
	if size > 0 {
		opts.Batch = &cg.BatchOptions{Size: size, Handler: func(_ context.Context, bt *cg.Batch) error {
			write(bt.Msgs)
			return nil
		}}
	} else {
		h = func(_ context.Context, m *cg.Msg) {
			write([]*cg.Msg{m})
			_ = m.Ack()
		}
	}
	m, err := c.Join(ctx, cg.KindStatic, "ORDERS", "g", "m1", h, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Stop()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		mu.Lock()
		defer mu.Unlock()
		b.Fatalf("size %d: wrote %d of %d", size, len(written), n)
	}
	mu.Lock()
	defer mu.Unlock()
	dups := 0
	for _, k := range written {
		dups += k - 1
	}
	if broken > 0 || dups > 0 {
		b.Fatalf("size %d: %d writes out of stream order, %d duplicates", size, broken, dups)
	}
	return float64(n) / last.Sub(first).Seconds(), calls
}
