package chaos

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Scenario 5: the server restarts (same port, same store) twice under
// traffic; the members reconnect and carry on, nothing is lost.
func TestServerRestart(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	port := clitest.FreePort(t)
	opts := func() *server.Options {
		o := natstest.Options(dir)
		o.Port = port
		return o
	}
	s, err := startServer(t, opts())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "server-restart", s.ClientURL(), envOpts{kind: "static", limit: 120 * time.Second})
	e.setupStatic(4, 1, "m1", "m2")
	e.startJoined("m1")
	e.startJoined("m1")
	e.startJoined("m2")
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1", "m2")
	e.steady(time.Now(), 20, "m1", "m2")
	for range 2 {
		d := e.disrupt("server restart", 2*e.maxAckPending, "m1", "m2")
		s.Shutdown()
		s.WaitForShutdown()
		s = restartServer(t, opts())
		up := time.Now()
		e.waitHandled("members handling after the restart", up, 5, 30*time.Second, "m1", "m2")
		e.recovered(d)
		e.steady(d.end, 50, "m1", "m2")
	}
	e.finish([]string{"m1", "m2"}, nil)
}

// Scenario 6: a 3-node cluster, the stream and the group's KV replicated
// three times, members given every node's URL. The node leading the stream
// is shut down, then brought back with the same options; then the same for
// the node leading m1's consumer. The members ride it all out and nothing
// is lost.
func TestClusterStreamLeaderLoss(t *testing.T) {
	needBinary(t)
	c := startCluster(t, 3)
	e := newEnv(t, "cluster-leader", c.URLs(), envOpts{kind: "static", limit: 150 * time.Second})
	e.setupStatic(4, 3, "m1", "m2")
	e.startJoined("m1")
	e.startJoined("m1")
	e.startJoined("m2")
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1", "m2")
	e.steady(time.Now(), 20, "m1", "m2")

	// Round 1 takes down the node leading the stream; round 2 the node
	// leading m1's consumer, which holds the pin.
	for round := range 2 {
		var leader string
		e.waitFor("a stream leader", 20*time.Second, func() bool {
			leader, _ = e.streamCluster()
			if round == 1 {
				leader = ""
				if ci, err := e.consumerInfo("m1"); err == nil && ci.Cluster != nil {
					leader = ci.Cluster.Leader
				}
			}
			return leader != ""
		})
		i := -1
		for j, s := range c.Servers {
			if s.Name() == leader {
				i = j
			}
		}
		if i < 0 {
			t.Fatalf("leader %q is none of the cluster's servers", leader)
		}
		port := c.Servers[i].Addr().(*net.TCPAddr).Port
		what := map[int]string{0: "stream", 1: "m1's consumer"}[round]

		d := e.disrupt("shut down "+leader+", leading the "+what, 2*e.maxAckPending, "m1", "m2")
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
		down := time.Now()
		e.waitFor("a new stream leader", 30*time.Second, func() bool {
			l, _ := e.streamCluster()
			return l != "" && l != leader
		})
		e.waitHandled("members handling without "+leader, down, 5, 30*time.Second, "m1", "m2")
		e.recovered(d)
		e.steady(d.end, 30, "m1", "m2")

		d2 := e.disrupt("restart "+leader, 2*e.maxAckPending, "m1", "m2")
		o := c.Opts[i].Clone()
		o.Port = port
		c.Servers[i] = restartServer(t, o)
		e.waitFor(leader+" back and current", 30*time.Second, func() bool {
			l, current := e.streamCluster()
			return l != "" && current == 2
		})
		e.waitHandled("members handling with "+leader+" back", d2.start, 5, 30*time.Second, "m1", "m2")
		e.recovered(d2)
		e.steady(d2.end, 30, "m1", "m2")
	}
	e.finish([]string{"m1", "m2"}, nil)
}

// streamCluster is the stream's leader and how many followers are current.
func (e *env) streamCluster() (leader string, current int) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, streamName)
	if err != nil {
		return "", 0
	}
	ci := s.CachedInfo().Cluster
	if ci == nil {
		return "", 0
	}
	for _, r := range ci.Replicas {
		if r.Current && !r.Offline {
			current++
		}
	}
	return ci.Leader, current
}
