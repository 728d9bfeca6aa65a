package plugin_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgotel"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgprom"
)

// BenchmarkObserved is one member handling b.N messages (8 handler calls
// at once, acks) with no observer, with cgprom, and with cgprom and cgotel
// (spans to an in-memory recorder): what the plug-ins cost, as ratios of
// one run. Run with a fixed count, e.g. -benchtime 5000x.
func BenchmarkObserved(b *testing.B) {
	for _, tc := range []struct {
		name string
		obs  func(b *testing.B) []cg.Observer
	}{
		{"none", func(*testing.B) []cg.Observer { return nil }},
		{"cgprom", func(b *testing.B) []cg.Observer {
			m, err := cgprom.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			return []cg.Observer{m}
		}},
		{"cgprom+cgotel", func(b *testing.B) []cg.Observer {
			m, err := cgprom.New(prometheus.NewRegistry())
			if err != nil {
				b.Fatal(err)
			}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			return []cg.Observer{m, cgotel.New(cgotel.TracerProvider(tp))}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.JetStream(b, s)
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
				SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
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
				_ = msg.Ack()
				if n.Add(1) == int64(b.N) {
					close(done)
				}
			}, cg.JoinOptions{Concurrency: 8, Observers: tc.obs(b)})
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
