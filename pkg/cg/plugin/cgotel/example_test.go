package cgotel_test

import (
	"context"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgotel"
)

// A member instance that records a span per message, continuing the
// publisher's trace, and a publisher that stamps its trace context.
func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	tp := sdktrace.NewTracerProvider() // add an exporter: sdktrace.WithBatcher(...)
	defer func() { _ = tp.Shutdown(context.Background()) }()

	// The publisher's side: the current span's context goes in the headers.
	ctx, span := tp.Tracer("shop").Start(context.Background(), "checkout")
	msg := nats.NewMsg("orders.k1")
	cgotel.Inject(ctx, msg.Header, nil)
	_, _ = js.PublishMsg(ctx, msg)
	span.End()

	// The member's side: the handler's ctx carries the message's span.
	m, err := cg.New(js).JoinStatic(context.Background(), "ORDERS", "workers", "m1",
		func(ctx context.Context, msg *cg.Msg) {
			_, s := tp.Tracer("shop").Start(ctx, "store order")
			s.End()
			_ = msg.Ack()
		},
		cg.JoinOptions{Observers: []cg.Observer{cgotel.New(cgotel.TracerProvider(tp))}})
	if err != nil {
		log.Fatal(err)
	}
	_ = m.Wait()
}
