package publish_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgotel"
)

func traceparents(t *testing.T, js jetstream.JetStream, n uint64) []string {
	t.Helper()
	s, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for seq := uint64(1); seq <= n; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m.Header.Get(traffic.TraceparentHeader))
	}
	return out
}

// --trace: a fresh trace on every message, its id on stderr and in the
// JSON summary; a member's OpenTelemetry spans (cgotel) continue it.
func TestPublishTraceFresh(t *testing.T) {
	js, env := setup(t)
	r := clitest.Run(t, cmd.Run, env, "--json", "publish", "orders.{key}", "--count", "5", "--rate", "0", "--trace")
	if r.Code != 0 {
		t.Fatalf("publish: %s", r)
	}
	var sum struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.Unmarshal([]byte(r.Out), &sum); err != nil || len(sum.TraceID) != 32 {
		t.Fatalf("summary %q: trace id %q (%v)", r.Out, sum.TraceID, err)
	}
	if !strings.Contains(r.Err, "trace: "+sum.TraceID) {
		t.Errorf("stderr does not name the trace %s: %q", sum.TraceID, r.Err)
	}
	for i, tp := range traceparents(t, js, 5) {
		if id, err := traffic.ParseTraceparent(tp); err != nil || id != sum.TraceID {
			t.Errorf("message %d: traceparent %q (%v), want trace %s", i+1, tp, err, sum.TraceID)
		}
	}

	// End to end: a member recording spans continues the publisher's trace.
	c := cg.New(js)
	ctx := context.Background()
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(ctx) }()
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, m *cg.Msg) { _ = m.Ack() },
		cg.JoinOptions{Observers: []cg.Observer{cgotel.New(cgotel.TracerProvider(tp))}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	clitest.Eventually(t, 30*time.Second, "5 consumer spans", func() bool { return len(rec.Ended()) == 5 })
	for _, s := range rec.Ended() {
		if got := s.SpanContext().TraceID().String(); got != sum.TraceID {
			t.Errorf("consumer span in trace %s, want the publisher's %s", got, sum.TraceID)
		}
	}
}

// --trace with TRACEPARENT set continues that trace (TRACESTATE rides
// along); a malformed one is a usage error and nothing is published.
func TestPublishTraceFromEnv(t *testing.T) {
	js, env := setup(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	withTP := func(v string) func(string) string {
		return func(k string) string {
			switch k {
			case "TRACEPARENT":
				return v
			case "TRACESTATE":
				return "cg=1"
			}
			return env(k)
		}
	}
	r := clitest.Run(t, cmd.Run, withTP(tp), "publish", "orders.{key}", "--count", "3", "--rate", "0", "--trace")
	if r.Code != 0 || !strings.Contains(r.Err, "trace: 4bf92f3577b34da6a3ce929d0e0e4736") {
		t.Fatalf("publish: %s", r)
	}
	for i, got := range traceparents(t, js, 3) {
		if got != tp {
			t.Errorf("message %d: traceparent %q, want %q", i+1, got, tp)
		}
	}
	s, _ := js.Stream(context.Background(), "ORDERS")
	if m, err := s.GetMsg(context.Background(), 1); err != nil || m.Header.Get(traffic.TracestateHeader) != "cg=1" {
		t.Errorf("tracestate %q (%v), want cg=1", m.Header.Get(traffic.TracestateHeader), err)
	}
	before := streamMsgs(t, js)
	for _, bad := range []string{"junk", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"} {
		r := clitest.Run(t, cmd.Run, withTP(bad), "publish", "orders.{key}", "--count", "3", "--rate", "0", "--trace")
		errs := clitest.ErrorLines(r.Err)
		if r.Code != 2 || len(errs) != 1 {
			t.Errorf("TRACEPARENT=%q: exit %d, stderr %q; want exit 2 with one error line", bad, r.Code, r.Err)
			continue
		}
		clitest.OneLine(t, bad, errs[0], "TRACEPARENT", "--trace")
	}
	if after := streamMsgs(t, js); after != before {
		t.Errorf("a refused publish published %d messages", after-before)
	}
}
