package clitest

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Server starts an in-process JetStream server (random loopback port,
// t.TempDir() store, stopped at cleanup) and returns it with a JetStream
// connection to it and the environment that points cg at it.
func Server(t testing.TB) (*server.Server, jetstream.JetStream, func(string) string) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	return s, js, Env("NATS_URL=" + s.ClientURL())
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Eventually polls cond until it holds, failing the test after timeout;
// it is natstest.Eventually, named here so the suites need one import.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, timeout, what, cond)
}

// Poll calls cond every 20ms until it holds (true), or timeout passes or
// ctx ends (false): for a wait that words its own failure from the state
// it sees then. A nil ctx never ends.
func Poll(ctx context.Context, timeout time.Duration, cond func() bool) bool {
	if ctx == nil {
		ctx = context.Background()
	}
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}
