package cg_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
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
	sizes := []int{8, 64, 256, 1024}
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
			t.Fatal(err)
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
