// Package natstest runs real, in-process NATS servers with JetStream for
// tests: single servers and 3-node clusters on loopback, each with its own
// temporary store, shut down when the test ends.
package natstest

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Options returns server options for a JetStream server on a random
// loopback port storing in dir.
func Options(dir string) *server.Options {
	return &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  dir,
		NoLog:     true,
		NoSigs:    true,
	}
}

// Start starts a server with opts and waits until it accepts clients.
func Start(tb testing.TB, opts *server.Options) *server.Server {
	tb.Helper()
	s, err := server.NewServer(opts)
	if err != nil {
		tb.Fatalf("natstest: new server: %v", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		tb.Fatalf("natstest: server not ready in 10s")
	}
	tb.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s
}

// RunServer starts a single JetStream server for the test.
func RunServer(tb testing.TB) *server.Server {
	tb.Helper()
	return Start(tb, Options(tb.TempDir()))
}

// Connect connects to s and closes the connection when the test ends.
func Connect(tb testing.TB, s *server.Server, opts ...nats.Option) *nats.Conn {
	tb.Helper()
	nc, err := nats.Connect(s.ClientURL(), opts...)
	if err != nil {
		tb.Fatalf("natstest: connect: %v", err)
	}
	tb.Cleanup(nc.Close)
	return nc
}

// JetStream connects to s and returns a JetStream handle.
func JetStream(tb testing.TB, s *server.Server) (*nats.Conn, jetstream.JetStream) {
	tb.Helper()
	nc := Connect(tb, s)
	js, err := jetstream.New(nc)
	if err != nil {
		tb.Fatalf("natstest: jetstream: %v", err)
	}
	return nc, js
}

// Cluster is a set of clustered JetStream servers on loopback.
type Cluster struct {
	Servers []*server.Server
	Opts    []*server.Options
}

// URLs returns the client URLs of all servers, comma separated.
func (c *Cluster) URLs() string {
	u := ""
	for i, s := range c.Servers {
		if i > 0 {
			u += ","
		}
		u += s.ClientURL()
	}
	return u
}

func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("natstest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// RunCluster starts n clustered JetStream servers and waits until
// JetStream has a meta leader.
func RunCluster(tb testing.TB, n int) *Cluster {
	tb.Helper()
	ports := make([]int, n)
	for i := range ports {
		ports[i] = freePort(tb)
	}
	routes := ""
	for i, p := range ports {
		if i > 0 {
			routes += ","
		}
		routes += fmt.Sprintf("nats-route://127.0.0.1:%d", p)
	}
	c := &Cluster{}
	for i := 0; i < n; i++ {
		o := Options(tb.TempDir())
		o.ServerName = fmt.Sprintf("S-%d", i+1)
		o.Cluster.Name = "cgtest"
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = ports[i]
		o.Routes = server.RoutesFromStr(routes)
		c.Opts = append(c.Opts, o)
		c.Servers = append(c.Servers, Start(tb, o))
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			if s.JetStreamIsLeader() {
				return c
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	tb.Fatalf("natstest: cluster has no JetStream meta leader after 30s")
	return nil
}

// Eventually polls cond every 20ms until it returns true or timeout passes.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
