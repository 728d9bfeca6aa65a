package bench_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/internal/bench"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// systemReference is the reference library (pcgroups), here only: test
// files are not linked into the cg binary.
const systemReference = "reference"

// startReference runs the reference library's static group the way
// startCG runs cg's: the same members, partitions and max ack pending.
func startReference(ctx context.Context, connect func() (jetstream.JetStream, error), sc bench.Scenario, handle bench.Handle) (func(), error) {
	js, err := connect()
	if err != nil {
		return nil, err
	}
	members := bench.MemberNames(sc.Members)
	if _, err := pcgroups.CreateStatic(ctx, js, bench.Stream, bench.Group, uint(sc.Partitions), nil, members, nil); err != nil {
		return nil, err
	}
	var running []pcgroups.ConsumerGroupConsumeContext
	stop := func() {
		for _, cc := range running {
			cc.Stop()
		}
	}
	for _, name := range members {
		mjs, err := connect()
		if err != nil {
			stop()
			return nil, err
		}
		cc, err := pcgroups.StaticConsume(ctx, mjs, bench.Stream, bench.Group, name, func(msg jetstream.Msg) {
			bench.Work(sc, handle, msg.Headers())
			_ = msg.Ack()
		}, jetstream.ConsumerConfig{MaxAckPending: max(sc.MaxAckPending, 1), AckWait: 30 * time.Second, AckPolicy: jetstream.AckExplicitPolicy})
		if err != nil {
			stop()
			return nil, err
		}
		running = append(running, cc)
	}
	if err := bench.WaitPinned(ctx, js, members); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// matrix is the comparison's: 20000 messages over 1000 keys, 8 partitions, 1, 2
// and 8 members, handler 0 and 1 ms, max ack pending 1 (-short: 2000
// messages over 100 keys), published before the consumers start so that
// the rates are the consumers' alone.
func matrix() bench.Matrix {
	m := bench.Matrix{Members: []int{1, 2, 8}, Partitions: []int{8}, Handlers: []time.Duration{0, time.Millisecond}, MaxAckPending: []int{1}, Messages: 20000, Keys: 1000, Preload: true}
	if testing.Short() {
		m.Messages, m.Keys = 2000, 100
	}
	return m
}

func run(b *testing.B, env bench.Env, sc bench.Scenario, start bench.Starter) bench.Result {
	b.Helper()
	r, err := bench.Run(context.Background(), env, sc, start)
	if err != nil {
		b.Fatal(err)
	}
	if r.Violations > 0 {
		b.Fatalf("%s: %d per-key order violations", sc.Name(), r.Violations)
	}
	return r
}

// BenchmarkCompare runs every group scenario with cg and then the
// reference library, back to back on one server, and reports both rates
// and their ratio. Each b.N iteration is one whole run; use -benchtime 1x.
func BenchmarkCompare(b *testing.B) {
	s := natstest.RunServer(b)
	env := bench.Env{URL: s.ClientURL()}
	for _, sc := range matrix().Groups(bench.SystemCG) {
		ref := sc
		ref.System = systemReference
		b.Run(sc.Name()[len(bench.SystemCG)+1:], func(b *testing.B) {
			var cgRate, refRate float64
			var violations int
			for i := 0; i < b.N; i++ {
				c := run(b, env, sc, bench.StartCG)
				r := run(b, env, ref, startReference)
				cgRate += c.MsgsPerSec
				refRate += r.MsgsPerSec
				violations += c.Violations + r.Violations
			}
			b.ReportMetric(cgRate/float64(b.N), "cg-msgs/s")
			b.ReportMetric(refRate/float64(b.N), "ref-msgs/s")
			b.ReportMetric(cgRate/refRate, "cg/ref")
			b.ReportMetric(float64(violations), "violations")
		})
	}
}

// BenchmarkCompareConcurrent compares cg members with
// concurrency 8 and 32 (per-key order kept) against the reference, which
// is serial, in the same members × handler settings, back to back.
func BenchmarkCompareConcurrent(b *testing.B) {
	s := natstest.RunServer(b)
	env := bench.Env{URL: s.ClientURL()}
	m := matrix()
	m.Members, m.Concurrency = []int{1, 2}, []int{8, 32}
	for _, sc := range m.Groups(bench.SystemCG) {
		ref := sc
		ref.System, ref.Concurrency = systemReference, 0
		b.Run(sc.Name()[len(bench.SystemCG)+1:], func(b *testing.B) {
			var cgRate, refRate float64
			for i := 0; i < b.N; i++ {
				cgRate += run(b, env, sc, bench.StartCG).MsgsPerSec
				refRate += run(b, env, ref, startReference).MsgsPerSec
			}
			b.ReportMetric(cgRate/float64(b.N), "cg-msgs/s")
			b.ReportMetric(refRate/float64(b.N), "ref-msgs/s")
			b.ReportMetric(cgRate/refRate, "cg/ref")
		})
	}
}

// BenchmarkElastic measures an elastic group's
// preload-to-handled rate (its work stream sourcing the stream through the
// partitioning transforms while members consume), serial and concurrent,
// beside the server's sourcing ceiling in the same run: how fast the work
// stream fills with nobody consuming.
func BenchmarkElastic(b *testing.B) {
	s := natstest.RunServer(b)
	env := bench.Env{URL: s.ClientURL()}
	m := matrix()
	m.Members, m.Concurrency = []int{1, 8}, []int{1, 32}
	m.Handlers = []time.Duration{0}
	b.Run("sourcing-ceiling", func(b *testing.B) {
		var rate float64
		for i := 0; i < b.N; i++ {
			rate += sourcingRate(b, s.ClientURL(), m.Messages, 8)
		}
		b.ReportMetric(rate/float64(b.N), "msgs/s")
	})
	for _, sc := range m.Groups(bench.SystemElastic) {
		b.Run(sc.Name(), func(b *testing.B) {
			var rate float64
			for i := 0; i < b.N; i++ {
				rate += run(b, env, sc, bench.StartElastic).MsgsPerSec
			}
			b.ReportMetric(rate/float64(b.N), "msgs/s")
		})
	}
}

// sourcingRate preloads n messages into a fresh stream, creates an
// elastic group over it with nobody consuming and times how fast its work
// stream takes them in: the server's sourcing rate for the group's shape.
func sourcingRate(b *testing.B, url string, n, partitions int) float64 {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	nc, err := nats.Connect(url)
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	c := cg.New(js)
	_, _ = c.Delete(ctx, cg.KindElastic, "SRC", "ceiling")
	_ = js.DeleteStream(ctx, "SRC")
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "SRC", Subjects: []string{"src.*"}}); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_, _ = c.Delete(context.Background(), cg.KindElastic, "SRC", "ceiling")
		_ = js.DeleteStream(context.Background(), "SRC")
	}()
	for i := 0; i < n; i++ {
		if _, err := js.PublishAsync("src.k"+strconv.Itoa(i%1000), nil); err != nil {
			<-js.PublishAsyncComplete()
			i--
		}
	}
	<-js.PublishAsyncComplete()
	if _, err := c.CreateElastic(ctx, "SRC", "ceiling", cg.ElasticConfig{MaxMembers: partitions, Members: []string{"m1"}}); err != nil {
		b.Fatal(err)
	}
	ws, err := js.Stream(ctx, cg.WorkStreamName("SRC", "ceiling"))
	if err != nil {
		b.Fatal(err)
	}
	// Clocked from the first message sourced to the last, as a preloaded
	// group run is clocked from its first message handled.
	var begin time.Time
	var first uint64
	for {
		si, err := ws.Info(ctx)
		if err == nil && si.State.Msgs > 0 && begin.IsZero() {
			begin, first = time.Now(), si.State.Msgs
		}
		if err == nil && si.State.Msgs >= uint64(n) {
			return float64(uint64(n)-first) / time.Since(begin).Seconds()
		}
		select {
		case <-ctx.Done():
			b.Fatalf("work stream took in %d of %d messages", si.State.Msgs, n)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// BenchmarkPlain is the server's side of the comparison: a plain pull
// consumer with 1 and 8 filters, max ack pending 1 and 1000, handler 0.
func BenchmarkPlain(b *testing.B) {
	s := natstest.RunServer(b)
	env := bench.Env{URL: s.ClientURL()}
	m := matrix()
	m.Handlers, m.MaxAckPending = []time.Duration{0}, []int{1, 1000}
	for _, sc := range m.Plain() {
		b.Run(sc.Name()[len(bench.SystemPlain)+1:], func(b *testing.B) {
			var rate float64
			var violations int
			for i := 0; i < b.N; i++ {
				r := run(b, env, sc, bench.StartPlain)
				rate += r.MsgsPerSec
				violations += r.Violations
			}
			b.ReportMetric(rate/float64(b.N), "msgs/s")
			b.ReportMetric(float64(violations), "violations")
		})
	}
}

// TestRunCounts checks the harness itself on a tiny run of every system:
// every message handled once, in per-key order, and a rate measured.
func TestRunCounts(t *testing.T) {
	s := natstest.RunServer(t)
	env := bench.Env{URL: s.ClientURL(), Limit: time.Minute}
	for _, tc := range []struct {
		sc    bench.Scenario
		start bench.Starter
	}{
		{bench.Scenario{System: bench.SystemCG, Members: 2, Partitions: 4}, bench.StartCG},
		{bench.Scenario{System: systemReference, Members: 2, Partitions: 4}, startReference},
		{bench.Scenario{System: bench.SystemPlain, Members: 1, Partitions: 4, Filters: 4, MaxAckPending: 100}, bench.StartPlain},
		{bench.Scenario{System: bench.SystemCG, Members: 1, Partitions: 4, Preload: true}, bench.StartCG},
		{bench.Scenario{System: systemReference, Members: 4, Partitions: 4, Preload: true}, startReference},
		{bench.Scenario{System: bench.SystemPlain, Members: 1, Partitions: 4, Filters: 1, MaxAckPending: 100, WorkQueue: true, Preload: true}, bench.StartPlain},
		{bench.Scenario{System: bench.SystemElastic, Members: 2, Partitions: 4, Concurrency: 4, Layout: bench.LayoutPartition, Filled: true, Preload: true}, bench.StartElastic},
	} {
		tc.sc.Messages, tc.sc.Keys = 300, 30
		r, err := bench.Run(context.Background(), env, tc.sc, tc.start)
		if err != nil {
			t.Fatal(err)
		}
		if r.Handled != 300 || r.Violations != 0 || r.MsgsPerSec <= 0 || r.PublishPerSec <= 0 {
			t.Fatalf("%s: %+v", tc.sc.Name(), r)
		}
		// Latency is measured live only: preloaded, it would be the
		// time spent waiting in the stream.
		if live := !tc.sc.Preload; live && (r.P99 < r.P50 || r.P50 <= 0) || !live && r.P50 != 0 {
			t.Fatalf("%s latency: %+v", tc.sc.Name(), r)
		}
	}
}

// BenchmarkKeys is the key-count matrix: 100 000 messages preloaded over
// 1 000, 10 000 and 100 000 keys, 8 partitions, handler 0, drained by a
// plain consumer on ">" (max ack pending 1000) and by one cg member owning
// all 8 partitions with concurrency 32, static and elastic, in each group
// layout this build can create. The elastic member starts once its work
// stream holds the whole backlog, and is set beside a plain consumer
// draining a work-queue stream of the same backlog (plain-workqueue): the
// drain of a work stream against the drain of a work stream. Every run is
// bounded (100 s; -short: 10 000 messages over at most 10 000 keys, 20 s):
// one that does not drain in time reports the rate it reached and
// drained=0 instead of failing, since a slow layout is what the matrix is
// there to show.
func BenchmarkKeys(b *testing.B) {
	s := natstest.RunServer(b)
	limit, msgs := 100*time.Second, 100000
	keyCounts := []int{1000, 10000, 100000}
	if testing.Short() {
		limit, msgs, keyCounts = 20*time.Second, 10000, []int{1000, 10000}
	}
	env := bench.Env{URL: s.ClientURL(), Limit: limit}
	layouts := []string{bench.LayoutMember}
	if bench.CheckLayout(bench.LayoutPartition) == nil {
		layouts = append(layouts, bench.LayoutPartition)
	}
	bounded := func(b *testing.B, sc bench.Scenario, start bench.Starter) {
		var rate float64
		drained := 1.0
		for range b.N {
			r, err := bench.Run(context.Background(), env, sc, start)
			switch {
			case err == nil:
				rate += r.MsgsPerSec / float64(b.N)
			case r.Handled > 0 && r.Handled < sc.Messages:
				drained = 0
				rate += float64(r.Handled) / limit.Seconds() / float64(b.N)
			default:
				b.Fatal(err)
			}
			if r.Violations > 0 {
				b.Fatalf("%s: %d per-key order violations", sc.Name(), r.Violations)
			}
		}
		b.ReportMetric(rate, "msgs/s")
		b.ReportMetric(drained, "drained")
	}
	for _, keys := range keyCounts {
		base := bench.Scenario{Members: 1, Partitions: 8, Messages: msgs, Keys: keys, Preload: true}
		plain := base
		plain.System, plain.Filters, plain.MaxAckPending = bench.SystemPlain, 1, 1000
		b.Run(fmt.Sprintf("keys=%d/plain", keys), func(b *testing.B) { bounded(b, plain, bench.StartPlain) })
		wq := plain
		wq.WorkQueue = true
		b.Run(fmt.Sprintf("keys=%d/plain-workqueue", keys), func(b *testing.B) { bounded(b, wq, bench.StartPlain) })
		for _, layout := range layouts {
			for _, system := range []string{bench.SystemCG, bench.SystemElastic} {
				sc := base
				sc.System, sc.Concurrency, sc.Layout = system, 32, layout
				start := bench.StartCG
				if system == bench.SystemElastic {
					start, sc.Filled = bench.StartElastic, true
				}
				b.Run(fmt.Sprintf("keys=%d/%s/layout=%s/concurrency=32", keys, system, layout), func(b *testing.B) { bounded(b, sc, start) })
			}
		}
	}
}
