package cgotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgotel"
)

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// With the SDK's span recorder: a message published with the producer
// span's traceparent gets a consumer span that is that span's child, with
// the messaging attributes; a span the handler starts from its ctx is the
// consumer span's child; a message without a trace context starts a trace
// of its own; one that fails ends with an error status.
func TestTracer(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()

	pctx, producer := tp.Tracer("producer").Start(ctx, "publish orders", trace.WithSpanKind(trace.SpanKindProducer))
	msg := nats.NewMsg("orders.k1")
	msg.Data = []byte("hello")
	cgotel.Inject(pctx, msg.Header, nil)
	if msg.Header.Get("traceparent") == "" {
		t.Fatalf("Inject wrote no traceparent: %v", msg.Header)
	}
	if _, err := js.PublishMsg(ctx, msg, jetstream.WithMsgID("order-1")); err != nil {
		t.Fatal(err)
	}
	producer.End()
	if _, err := js.Publish(ctx, "orders.k2", []byte("no trace")); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "orders.k3", []byte("fails")); err != nil {
		t.Fatal(err)
	}

	h := func(ctx context.Context, m *cg.Msg) {
		_, child := tp.Tracer("handler").Start(ctx, "write "+m.Subject())
		child.End()
		if m.Subject() == "orders.k3" {
			_ = m.Term()
			return
		}
		_ = m.Ack()
	}
	mem, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{Observers: []cg.Observer{cgotel.New(cgotel.TracerProvider(tp))}})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Stop()
	byName := func() map[string]sdktrace.ReadOnlySpan {
		m := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range rec.Ended() {
			name := s.Name()
			if name == "process ORDERS" {
				name += " " + attrs(s)["messaging.destination.name"].AsString()
			}
			m[name] = s
		}
		return m
	}
	eventually(t, "three consumer spans", func() bool {
		n := 0
		for k := range byName() {
			if len(k) > 14 && k[:14] == "process ORDERS" {
				n++
			}
		}
		return n == 3
	})
	spans := byName()
	cs := spans["process ORDERS orders.k1"]
	if cs.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span kind %v, want consumer", cs.SpanKind())
	}
	if cs.SpanContext().TraceID() != producer.SpanContext().TraceID() || cs.Parent().SpanID() != producer.SpanContext().SpanID() {
		t.Errorf("consumer span trace %s parent %s, want the producer's trace %s and span %s",
			cs.SpanContext().TraceID(), cs.Parent().SpanID(), producer.SpanContext().TraceID(), producer.SpanContext().SpanID())
	}
	a := attrs(cs)
	want := map[attribute.Key]string{
		"messaging.system": "nats", "messaging.operation.type": "process", "messaging.operation.name": "process",
		"messaging.consumer.group.name": "g", "messaging.destination.name": "orders.k1",
		"messaging.destination.partition.id": "", "messaging.message.id": "order-1",
		"messaging.nats.stream": "ORDERS", "messaging.nats.consumer.name": "g-m1", "cg.member": "m1", "cg.result": "acked",
	}
	for k, v := range want {
		got, ok := a[k]
		if !ok || (v != "" && got.Emit() != v) {
			t.Errorf("attribute %s = %q (set %v), want %q", k, got.Emit(), ok, v)
		}
	}
	if a["messaging.nats.message.delivery_count"].AsInt64() != 1 || a["messaging.nats.stream.sequence"].AsInt64() != 1 || a["messaging.message.body.size"].AsInt64() != 5 {
		t.Errorf("delivery count %v, stream sequence %v, body size %v; want 1, 1, 5", a["messaging.nats.message.delivery_count"].Emit(),
			a["messaging.nats.stream.sequence"].Emit(), a["messaging.message.body.size"].Emit())
	}
	if ch := spans["write orders.k1"]; ch == nil || ch.Parent().SpanID() != cs.SpanContext().SpanID() {
		t.Errorf("the handler's span is not the consumer span's child")
	}
	if cs.Status().Code == codes.Error {
		t.Errorf("acked message's span has status %v", cs.Status())
	}
	root := spans["process ORDERS orders.k2"]
	if root.Parent().IsValid() || root.SpanContext().TraceID() == producer.SpanContext().TraceID() {
		t.Errorf("a message without trace context got parent %v in trace %s", root.Parent(), root.SpanContext().TraceID())
	}
	failed := spans["process ORDERS orders.k3"]
	if failed.Status().Code != codes.Error || attrs(failed)["cg.result"].AsString() != "failed" {
		t.Errorf("terminated message: status %v, result %q; want an error status and failed", failed.Status(), attrs(failed)["cg.result"].AsString())
	}
}
