package cg_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkMemberConsume is one member's message rate with max-ack-pending
// 1 (strict per-key order): preloaded messages, a handler that only acks.
// ns/op is the time per message, so 1e9/ns/op is messages per second.
func BenchmarkMemberConsume(b *testing.B) {
	for _, tc := range []struct {
		name      string
		doubleAck bool
	}{{"ack", false}, {"double-ack", true}} {
		b.Run(tc.name, func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.JetStream(b, s)
			ctx := context.Background()
			_, err := js.CreateStream(ctx, jetstream.StreamConfig{
				Name: "ORDERS", Subjects: []string{"orders.*"},
				SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
			})
			if err != nil {
				b.Fatal(err)
			}
			c := cg.New(js)
			if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < b.N; i++ {
				if _, err := js.PublishAsync(fmt.Sprintf("orders.k%d", i%100), nil); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(time.Minute):
				b.Fatal("publish did not complete")
			}
			var n atomic.Int64
			done := make(chan struct{})
			b.ResetTimer()
			m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
				if tc.doubleAck {
					_ = msg.DoubleAck(ctx)
				} else {
					_ = msg.Ack()
				}
				if n.Add(1) == int64(b.N) {
					close(done)
				}
			}, cg.JoinOptions{})
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatalf("handled %d of %d", n.Load(), b.N)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
			m.Stop()
		})
	}
}

// BenchmarkMemberLanes is one member owning 8 partitions, messages over
// 1000 keys, a handler that takes 0 or 1ms and acks, at concurrency 1, 8
// and 32 (max ack pending: cg's choice); /hash-lanes is the alternative
// design (keys folded onto fixed lanes) for comparison. Order violations
// are counted and fail the run. Run with a fixed count, e.g. -benchtime
// 5000x.
func BenchmarkMemberLanes(b *testing.B) {
	for _, work := range []time.Duration{0, time.Millisecond} {
		for _, lanes := range []struct {
			conc int
			hash bool
		}{{1, false}, {8, false}, {32, false}, {8, true}, {32, true}} {
			conc := lanes.conc
			name := fmt.Sprintf("handler=%s/concurrency=%d", work, conc)
			if lanes.hash {
				name += "/hash-lanes"
			}
			b.Run(name, func(b *testing.B) {
				s := natstest.RunServer(b)
				_, js := natstest.JetStream(b, s)
				ctx := context.Background()
				laneStream(b, js, 8)
				c := cg.New(js)
				if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
					b.Fatal(err)
				}
				publishKeyed(b, js, keyNames(1000), b.N)
				var mu sync.Mutex
				last := map[string]int{}
				var n, bad int
				done := make(chan struct{})
				h := func(_ context.Context, msg *cg.Msg) {
					if work > 0 {
						time.Sleep(work)
					}
					key := msg.Headers().Get("Key")
					seq, _ := strconv.Atoi(msg.Headers().Get("Seq"))
					if msg.Ack() != nil {
						return
					}
					mu.Lock()
					if seq < last[key] {
						bad++
					}
					last[key] = seq
					n++
					if n == b.N {
						close(done)
					}
					mu.Unlock()
				}
				b.ResetTimer()
				opts := cg.JoinOptions{Concurrency: conc}
				if lanes.hash {
					opts = cg.WithHashLanes(opts)
				}
				m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, opts)
				if err != nil {
					b.Fatal(err)
				}
				select {
				case <-done:
				case <-time.After(5 * time.Minute):
					b.Fatalf("handled %d of %d", n, b.N)
				}
				b.StopTimer()
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
				m.Stop()
				if bad > 0 {
					b.Fatalf("%d per-key order violations", bad)
				}
			})
		}
	}
}
