// Package cgotel records an OpenTelemetry span for each message a cg member
// hands to its handler, as an observer of the member runtime
// (cg.JoinOptions.Observers): what franz-go's plugin/kotel is to its
// client. The engine itself depends on no tracing library.
//
// The span continues the producer's trace: its parent is the span context
// the message headers carry (W3C traceparent/tracestate by default, read
// with the configured propagator), so a trace follows a message from the
// publisher to the handler. The handler's ctx carries the span: spans the
// handler starts from it are its children.
//
// Span: name "process <stream>", kind consumer, with the messaging
// semantic-convention attributes
//
//	messaging.system                   "nats"
//	messaging.operation.name           "process"
//	messaging.operation.type           "process"
//	messaging.consumer.group.name      the group
//	messaging.destination.name         the subject, partition token stripped
//	messaging.destination.partition.id the partition
//	messaging.message.id               the Nats-Msg-Id header, when set
//	messaging.message.body.size        the body's size in bytes
//
// and NATS/cg specific ones (the conventions name none for these):
//
//	messaging.nats.stream              the stream the member consumes
//	messaging.nats.consumer.name       the member consumer
//	messaging.nats.stream.sequence     the message's stream sequence
//	messaging.nats.message.delivery_count  deliveries, this one included
//	cg.member                          the member
//	cg.batch                           the batch number (batches only)
//	cg.result                          acked, failed, dead_lettered, parked
//
// A message that did not end acked gets an error status naming its result.
package cgotel

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/cg-dev/cg/pkg/cg"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/cg-dev/cg/pkg/cg/plugin/cgotel"

// Attribute keys the semantic conventions do not define.
const (
	AttrStream        = attribute.Key("messaging.nats.stream")
	AttrConsumer      = attribute.Key("messaging.nats.consumer.name")
	AttrStreamSeq     = attribute.Key("messaging.nats.stream.sequence")
	AttrDeliveryCount = attribute.Key("messaging.nats.message.delivery_count")
	AttrMember        = attribute.Key("cg.member")
	AttrBatch         = attribute.Key("cg.batch")
	AttrResult        = attribute.Key("cg.result")
)

// Tracer is an observer recording a span per handled message.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

var (
	_ cg.MessageStartHook = (*Tracer)(nil)
	_ cg.MessageDoneHook  = (*Tracer)(nil)
)

// Option tunes New.
type Option func(*config)

type config struct {
	tp   trace.TracerProvider
	prop propagation.TextMapPropagator
}

// TracerProvider sets where spans go (default otel.GetTracerProvider()).
func TracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// Propagator sets how the producer's trace context is read off the
// headers (default otel.GetTextMapPropagator(), or the W3C trace context
// propagator when none was set globally).
func Propagator(p propagation.TextMapPropagator) Option { return func(c *config) { c.prop = p } }

// New makes a Tracer.
func New(opts ...Option) *Tracer {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.prop == nil {
		c.prop = otel.GetTextMapPropagator()
		if len(c.prop.Fields()) == 0 { // the global no-op
			c.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	return &Tracer{tracer: c.tp.Tracer(ScopeName), prop: c.prop}
}

// OnMessageStart starts the message's span under the producer's context.
func (t *Tracer) OnMessageStart(ctx context.Context, info *cg.MessageInfo) context.Context {
	ctx = t.prop.Extract(ctx, HeaderCarrier(info.Header))
	attrs := []attribute.KeyValue{
		semconv.MessagingSystemKey.String("nats"),
		semconv.MessagingOperationName("process"),
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingConsumerGroupName(info.Group),
		semconv.MessagingDestinationName(info.Subject),
		semconv.MessagingDestinationPartitionID(strconv.Itoa(info.Partition)),
		semconv.MessagingMessageBodySize(info.Size),
		AttrStream.String(info.Stream),
		AttrConsumer.String(info.Consumer),
		AttrStreamSeq.Int64(int64(info.StreamSeq)),
		AttrDeliveryCount.Int64(int64(info.Delivered)),
		AttrMember.String(info.Member),
	}
	if info.MsgID != "" {
		attrs = append(attrs, semconv.MessagingMessageID(info.MsgID))
	}
	if info.Batch > 0 {
		attrs = append(attrs, AttrBatch.Int64(int64(info.Batch)))
	}
	ctx, _ = t.tracer.Start(ctx, "process "+info.Stream, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...))
	return ctx
}

// OnMessageDone ends the span with the message's result.
func (t *Tracer) OnMessageDone(ctx context.Context, _ *cg.MessageInfo, res cg.MessageResult, _ time.Duration) {
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(AttrResult.String(string(res)))
	if res != cg.ResultAcked {
		span.SetStatus(codes.Error, string(res))
	}
	span.End()
}

// HeaderCarrier adapts NATS headers to a propagation.TextMapCarrier, for
// reading a trace context off a message and for writing one onto a message
// before it is published. Keys are set as given (traceparent, lower case,
// as the W3C names it); Get finds a key whatever its case.
type HeaderCarrier nats.Header

var _ propagation.TextMapCarrier = HeaderCarrier(nil)

// Get returns the first value of key.
func (h HeaderCarrier) Get(key string) string {
	if v, ok := h[key]; ok && len(v) > 0 {
		return v[0]
	}
	for k, v := range h {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

// Set sets key to value.
func (h HeaderCarrier) Set(key, value string) { h[key] = []string{value} }

// Keys lists the keys.
func (h HeaderCarrier) Keys() []string {
	ks := make([]string, 0, len(h))
	for k := range h {
		ks = append(ks, k)
	}
	return ks
}

// Inject writes ctx's trace context onto h with the propagator p (nil:
// the global one, or W3C trace context when none was set), so a published
// message carries it to the member's span.
func Inject(ctx context.Context, h nats.Header, p propagation.TextMapPropagator) {
	if p == nil {
		p = otel.GetTextMapPropagator()
		if len(p.Fields()) == 0 {
			p = propagation.TraceContext{}
		}
	}
	p.Inject(ctx, HeaderCarrier(h))
}
