package cg_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestLayoutCost measures what one partition-layout group costs the
// server as its partitions grow: one member, two instances (so every
// partition consumer has two pull requests waiting), idle. It prints, per
// partition count, the time to join, the consumers and waiting pull
// requests the server holds, the messages per second the idle group
// sends the server (re-pulls, liveness checks), the CPU the process
// (servers and instances, all in this process) burns per second idle, and
// the heap it holds. A measurement, not a check: it runs only with
// CG_LAYOUT_COST set ("1" single server, "3" an R3 cluster too).
// docs/layouts.md has the figures.
func TestLayoutCost(t *testing.T) {
	mode := os.Getenv("CG_LAYOUT_COST")
	if mode == "" {
		t.Skip("set CG_LAYOUT_COST=1 (single server) or 3 (and an R3 cluster) to measure")
	}
	sizes := []int{8, 64, 256, 512}
	if s := os.Getenv("CG_LAYOUT_COST_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, _ := strconv.Atoi(f)
			sizes = append(sizes, n)
		}
	}
	t.Logf("%-8s %-9s %9s %9s %8s %12s %12s %10s", "servers", "partitions", "join", "consumers", "waiting", "idle msgs/s", "idle cpu %", "heap MB")
	for _, n := range sizes {
		layoutCost(t, 1, n)
		if mode == "3" {
			layoutCost(t, 3, n)
		}
	}
}

func layoutCost(t *testing.T, replicas, n int) {
	var servers []*server.Server
	if replicas == 1 {
		servers = []*server.Server{natstest.RunServer(t)}
	} else {
		servers = natstest.RunCluster(t, replicas).Servers
	}
	nc := natstest.Connect(t, servers[0])
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	stream := fmt.Sprintf("S%d_%d", replicas, n)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{stream + ".*"}, Replicas: replicas,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: stream + ".*", Destination: fmt.Sprintf("{{partition(%d,1)}}.%s.{{wildcard(1)}}", n, stream)}}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, stream, "g", cg.StaticConfig{MaxMembers: n, Members: []string{"m1"}, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var ms []*cg.Member
	for i := range 2 {
		cl, _ := cg.NewFromConn(natstest.Connect(t, servers[i%len(servers)], nats.MaxReconnects(-1)), "")
		m, err := cl.JoinStatic(ctx, stream, "g", "m1", func(_ context.Context, msg *cg.Msg) { _ = msg.Ack() }, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	joined := time.Since(start)
	waiting := func() (cons, waiting int) {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return 0, 0 // a cluster busy electing: asked again
		}
		for ci := range s.ListConsumers(ctx).Info() {
			cons++
			waiting += ci.NumWaiting
		}
		return
	}
	natstest.Eventually(t, 2*time.Minute, "every partition consumer with two pull requests", func() bool {
		_, w := waiting()
		return w >= 2*n
	})
	cons, w := waiting()
	in0 := inMsgs(servers)
	cpu0, wall0 := cpuTime(), time.Now()
	time.Sleep(3 * time.Second) // the idle interval measured, not synchronisation
	rate := float64(inMsgs(servers)-in0) / time.Since(wall0).Seconds()
	cpu := (cpuTime() - cpu0).Seconds() / time.Since(wall0).Seconds() * 100
	runtime.GC()
	var mst runtime.MemStats
	runtime.ReadMemStats(&mst)
	t.Logf("%-8d %-9d %9s %9d %8d %12.0f %12.1f %10.1f", replicas, n, joined.Round(time.Millisecond), cons, w, rate, cpu, float64(mst.HeapAlloc)/(1<<20))
	for _, m := range ms {
		m.Stop()
	}
	for _, s := range servers {
		s.Shutdown()
	}
}

func inMsgs(servers []*server.Server) int64 {
	var n int64
	for _, s := range servers {
		v, _ := s.Varz(nil)
		n += v.InMsgs
	}
	return n
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestLayoutDrain measures one member over 8 partitions draining a
// preloaded backlog spread over many keys (handler 0), through each
// layout, in one run: the partition layout's point. A measurement, run
// only with CG_LAYOUT_DRAIN set (messages,keys; default 20000,10000).
func TestLayoutDrain(t *testing.T) {
	spec := os.Getenv("CG_LAYOUT_DRAIN")
	if spec == "" {
		t.Skip("set CG_LAYOUT_DRAIN=messages,keys to measure")
	}
	msgs, keys := 20000, 10000
	if a, b, ok := strings.Cut(spec, ","); ok {
		msgs, _ = strconv.Atoi(a)
		keys, _ = strconv.Atoi(b)
	}
	for _, conc := range []int{1, 32} {
		for _, l := range []cg.Layout{cg.LayoutMember, cg.LayoutPartition} {
			s := natstest.RunServer(t)
			_, js := natstest.JetStream(t, s)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
			ordersStream(t, js, "ORDERS", 8)
			for i := range msgs {
				if _, err := js.PublishAsync(fmt.Sprintf("orders.k%d", i%keys), nil); err != nil {
					t.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			c := cg.New(js)
			if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}, Layout: l}); err != nil {
				t.Fatal(err)
			}
			var n atomic.Int64
			done := make(chan struct{})
			start := time.Now()
			m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
				_ = msg.Ack()
				if n.Add(1) == int64(msgs) {
					close(done)
				}
			}, cg.JoinOptions{Concurrency: conc})
			if err != nil {
				t.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(3 * time.Minute):
			}
			took := time.Since(start)
			t.Logf("layout %-9s concurrency %2d: %d of %d messages over %d keys in %s: %.0f msgs/s", l, conc, n.Load(), msgs, keys, took.Round(time.Millisecond), float64(n.Load())/took.Seconds())
			m.Stop()
			cancel()
			s.Shutdown()
		}
	}
}
