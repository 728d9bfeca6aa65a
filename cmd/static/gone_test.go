package static_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// A consume whose member consumer is deleted goes on (recreated); one
// whose stream is deleted exits 1 with one line saying what happened and
// how to repair it, instead of "waiting" forever.
func TestConsumeWhenConsumerOrStreamDeleted(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	a := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--sleep", "1ms")
	e.publish(3, "alice", "bob")
	natstest.Eventually(t, 20*time.Second, "3 messages", func() bool { return strings.Count(a.Out.String(), "acked") == 3 })
	ctx := context.Background()
	if err := e.js.DeleteConsumer(ctx, "ORDERS", "g-m1"); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 5*time.Second, "recreated", func() bool { return strings.Contains(a.Err.String(), "recreated it") })
	e.publish(2, "alice", "bob")
	natstest.Eventually(t, 10*time.Second, "2 more messages", func() bool { return strings.Count(a.Out.String(), "acked") >= 5 })

	if err := e.js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() { done <- a.Wait(t) }()
	var code int
	select {
	case code = <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("consume still running 5s after its stream was deleted:\n%s", a.Err.String())
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, a.Err.String())
	}
	var errLines []string
	for _, l := range strings.Split(a.Err.String(), "\n") {
		if strings.HasPrefix(l, "error: ") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "stream ORDERS was deleted") || !strings.Contains(errLines[0], "cg static delete ORDERS g") {
		t.Fatalf("want one error line naming the stream and the repair, got %q\n%s", errLines, a.Err.String())
	}
}

func TestConsumeRefusesTooShortLivenessCheck(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	r := e.run("static", "consume", "ORDERS", "g", "m1", "--liveness-check", "10ms")
	if r.Code != 2 || !strings.Contains(r.Err, "--liveness-check 10ms is too short") || !strings.Contains(r.Err, "use 50ms or more") {
		t.Fatalf("consume --liveness-check 10ms: exit %d, %q", r.Code, r.Err)
	}
}
