package cgprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgprom"
)

// sum adds the values of the samples of metric name whose labels include
// want, gathered from reg.
func sum(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			total += value(mf.GetType(), m)
		}
	}
	return total
}

func value(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}

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

func setup(t *testing.T) (*cg.Client, jetstream.JetStream, func() *cg.Client) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	return c, js, func() *cg.Client {
		c, _ := cg.NewFromConn(natstest.Connect(t, s), "")
		return c
	}
}

func publish(t *testing.T, js jetstream.JetStream, n int) {
	t.Helper()
	for i := range n {
		if _, err := js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%10), nil); err != nil {
			t.Fatal(err)
		}
	}
}

// On real registries: the pinned instance's messages counted by result and
// partition, its handler durations, its pinned gauge at 1 on every
// partition while the standby's stays 0, and a pin change counted each way.
func TestMetrics(t *testing.T) {
	const n = 50
	c, js, fresh := setup(t)
	reg1, reg2 := prometheus.NewRegistry(), prometheus.NewRegistry()
	m1, err := cgprom.New(reg1)
	if err != nil {
		t.Fatal(err)
	}
	m2, err := cgprom.New(reg2)
	if err != nil {
		t.Fatal(err)
	}
	ack := func(_ context.Context, m *cg.Msg) { _ = m.Ack() }
	ctx := context.Background()
	i1, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", ack, cg.JoinOptions{Observers: []cg.Observer{m1}})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, 1)
	eventually(t, "instance 1 pinned", func() bool { return sum(t, reg1, "cg_member_pinned", nil) == 4 })
	i2, err := fresh().JoinStatic(ctx, "ORDERS", "g", "m1", ack, cg.JoinOptions{Observers: []cg.Observer{m2}})
	if err != nil {
		t.Fatal(err)
	}
	defer i2.Stop()
	publish(t, js, n-1)
	acked := map[string]string{"stream": "ORDERS", "group": "g", "member": "m1", "result": "acked"}
	eventually(t, fmt.Sprintf("%d acked", n), func() bool { return sum(t, reg1, "cg_member_messages_total", acked) == n })
	if d := sum(t, reg1, "cg_member_handler_duration_seconds", nil); d != n {
		t.Errorf("%v handler durations observed, want %d", d, n)
	}
	for p := range 4 {
		part := map[string]string{"partition": fmt.Sprint(p)}
		if v := sum(t, reg1, "cg_member_pinned", part); v != 1 {
			t.Errorf("pinned instance: cg_member_pinned{partition=%d} = %v, want 1", p, v)
		}
		if v := sum(t, reg2, "cg_member_pinned", part); v != 0 {
			t.Errorf("standby: cg_member_pinned{partition=%d} = %v, want 0", p, v)
		}
	}
	if got := sum(t, reg2, "cg_member_messages_total", nil); got != 0 {
		t.Errorf("standby counted %v messages, want 0", got)
	}
	mfs, _ := reg2.Gather()
	series := 0
	for _, mf := range mfs {
		if mf.GetName() == "cg_member_pinned" {
			series = len(mf.GetMetric())
		}
	}
	if series != 4 {
		t.Errorf("standby shows %d cg_member_pinned series, want 4 (one per partition, at 0)", series)
	}
	if v := sum(t, reg1, "cg_member_queue_depth", nil); v != 0 {
		t.Errorf("queue depth %v with nothing left, want 0", v)
	}
	i1.Stop() // hands the pin over
	if v := sum(t, reg1, "cg_member_pinned", nil); v != 0 {
		t.Errorf("stopped instance: pinned gauges sum to %v, want 0", v)
	}
	if v := sum(t, reg1, "cg_member_pin_changes_total", map[string]string{"change": "pinned"}); v != 1 {
		t.Errorf("%v pins taken, want 1", v)
	}
	if v := sum(t, reg1, "cg_member_pin_changes_total", map[string]string{"change": "lost"}); v != 1 {
		t.Errorf("%v pins lost, want 1", v)
	}
	publish(t, js, 1)
	eventually(t, "the standby pinned after the handover", func() bool { return sum(t, reg2, "cg_member_pinned", nil) == 4 })
}

// Under a retry policy a message that always fails shows as failed for
// its first deliveries and dead_lettered for the last.
func TestMetricsPoison(t *testing.T) {
	c, js, _ := setup(t)
	reg := prometheus.NewRegistry()
	met, err := cgprom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, js, 10)
	h := func(_ context.Context, m *cg.Msg) {
		if md, _ := m.Metadata(); md.Sequence.Stream == 3 {
			m.Fail(errors.New("boom"))
			return
		}
		_ = m.Ack()
	}
	i, err := c.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, cg.JoinOptions{Observers: []cg.Observer{met},
		Retry: &cg.RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer i.Stop()
	eventually(t, "one dead-lettered", func() bool {
		return sum(t, reg, "cg_member_messages_total", map[string]string{"result": "dead_lettered"}) == 1
	})
	eventually(t, "9 acked", func() bool {
		return sum(t, reg, "cg_member_messages_total", map[string]string{"result": "acked"}) == 9
	})
	if v := sum(t, reg, "cg_member_messages_total", map[string]string{"result": "failed"}); v != 1 {
		t.Errorf("%v failed, want 1 (the first delivery of the poison message)", v)
	}
}

// Registering twice on one registry is refused, not a panic.
func TestMetricsRegisteredTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := cgprom.New(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := cgprom.New(reg); err == nil {
		t.Fatal("a second New on one registry succeeded")
	}
}
