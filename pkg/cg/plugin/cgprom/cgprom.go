// Package cgprom records a cg member's metrics in Prometheus, as an
// observer of the member runtime (cg.JoinOptions.Observers): what franz-go's
// plugin/kprom is to its client. The engine itself depends on no metrics
// library; this package is the only place cg's member metrics meet
// client_golang.
//
// The metrics (names under the namespace, "cg" by default):
//
//	cg_member_messages_total{stream,group,member,partition,result}   counter
//	    messages handed to the handler, by how they ended: acked, failed,
//	    dead_lettered, parked (cg.MessageResult)
//	cg_member_handler_duration_seconds{stream,group,member}          histogram
//	    how long the handler took (a batch's duration for each message)
//	cg_member_pinned{stream,group,member,partition}                   gauge
//	    1 while this process holds the pin of the partition, else 0
//	cg_member_pin_changes_total{stream,group,member,change}           counter
//	    pins taken (change="pinned") and let go of (change="lost")
//	cg_member_queue_depth{stream,group,member}                        gauge
//	    messages pulled that wait for the handler (cg.Member.QueueDepth),
//	    read at each scrape
package cgprom

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cg-dev/cg/pkg/cg"
)

// Metrics is an observer recording member metrics; give it to every
// member instance of the process (it may be shared).
type Metrics struct {
	messages   *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	pinned     *prometheus.GaugeVec
	pinChanges *prometheus.CounterVec
	depthDesc  *prometheus.Desc

	mu      sync.Mutex
	members map[*cg.Member]struct{}
}

// Option tunes New.
type Option func(*config)

type config struct {
	namespace string
	buckets   []float64
}

// Namespace sets the metric names' prefix (default "cg").
func Namespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// Buckets sets the handler duration histogram's buckets, in seconds
// (default prometheus.DefBuckets).
func Buckets(b []float64) Option { return func(c *config) { c.buckets = b } }

var (
	_ cg.MessageDoneHook = (*Metrics)(nil)
	_ cg.PinHook         = (*Metrics)(nil)
	_ cg.JoinHook        = (*Metrics)(nil)
	_ cg.StopHook        = (*Metrics)(nil)
)

// New makes the collectors and registers them on reg.
func New(reg prometheus.Registerer, opts ...Option) (*Metrics, error) {
	c := config{namespace: "cg", buckets: prometheus.DefBuckets}
	for _, o := range opts {
		o(&c)
	}
	member := []string{"stream", "group", "member"}
	m := &Metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: c.namespace, Subsystem: "member", Name: "messages_total",
			Help: "Messages handed to the handler, by result: acked, failed, dead_lettered, parked."},
			append(member, "partition", "result")),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: c.namespace, Subsystem: "member", Name: "handler_duration_seconds",
			Help: "How long the handler took per message (a batch's duration for each of its messages).", Buckets: c.buckets}, member),
		pinned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: c.namespace, Subsystem: "member", Name: "pinned",
			Help: "1 while this process holds the pin of the partition, else 0."}, append(member, "partition")),
		pinChanges: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: c.namespace, Subsystem: "member", Name: "pin_changes_total",
			Help: "Pins taken (change=pinned) and let go of (change=lost) by this process."}, append(member, "change")),
		depthDesc: prometheus.NewDesc(prometheus.BuildFQName(c.namespace, "member", "queue_depth"),
			"Messages pulled that wait for the handler.", member, nil),
		members: map[*cg.Member]struct{}{},
	}
	for _, col := range []prometheus.Collector{m.messages, m.duration, m.pinned, m.pinChanges, depthCollector{m}} {
		if err := reg.Register(col); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// OnMessageDone counts the message and its handler's duration.
func (m *Metrics) OnMessageDone(_ context.Context, info *cg.MessageInfo, res cg.MessageResult, took time.Duration) {
	m.messages.WithLabelValues(info.Stream, info.Group, info.Member, strconv.Itoa(info.Partition), string(res)).Inc()
	m.duration.WithLabelValues(info.Stream, info.Group, info.Member).Observe(took.Seconds())
}

// OnPin sets the pinned gauge of the changed partitions.
func (m *Metrics) OnPin(c cg.PinChange) {
	v, change := 0.0, "lost"
	if c.Pinned {
		v, change = 1, "pinned"
	}
	for _, p := range c.Partitions {
		m.pinned.WithLabelValues(c.Stream, c.Group, c.Member, strconv.Itoa(p)).Set(v)
	}
	m.pinChanges.WithLabelValues(c.Stream, c.Group, c.Member, change).Inc()
}

// OnJoin shows the member's partitions unpinned (a standby's stay at 0)
// and adds the instance to the queue depth gauge.
func (m *Metrics) OnJoin(mem *cg.Member) {
	for _, p := range mem.Partitions() {
		m.pinned.WithLabelValues(mem.Stream(), mem.Group(), mem.Name(), strconv.Itoa(p)).Add(0)
	}
	m.mu.Lock()
	m.members[mem] = struct{}{}
	m.mu.Unlock()
}

// OnStop takes the instance out of the queue depth gauge.
func (m *Metrics) OnStop(mem *cg.Member, _ cg.EventCause, _ error) {
	m.mu.Lock()
	delete(m.members, mem)
	m.mu.Unlock()
}

// depthCollector reads the queue depth of the running instances at each
// scrape (instances of one member in one process are summed).
type depthCollector struct{ m *Metrics }

func (d depthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- d.m.depthDesc }

func (d depthCollector) Collect(ch chan<- prometheus.Metric) {
	d.m.mu.Lock()
	mems := make([]*cg.Member, 0, len(d.m.members))
	for mem := range d.m.members {
		mems = append(mems, mem)
	}
	d.m.mu.Unlock()
	sum := map[[3]string]int{}
	for _, mem := range mems {
		sum[[3]string{mem.Stream(), mem.Group(), mem.Name()}] += mem.QueueDepth()
	}
	for k, n := range sum {
		ch <- prometheus.MustNewConstMetric(d.m.depthDesc, prometheus.GaugeValue, float64(n), k[0], k[1], k[2])
	}
}
