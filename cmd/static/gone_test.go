package static_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
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
	a.WaitOut(t, 20*time.Second, "3 messages", func(out string) bool { return strings.Count(out, "acked") == 3 })
	ctx := context.Background()
	if err := e.js.DeleteConsumer(ctx, "ORDERS", "g-m1"); err != nil {
		t.Fatal(err)
	}
	a.WaitErr(t, 20*time.Second, "recreated", func(errOut string) bool { return strings.Contains(errOut, "recreated it") })
	e.publish(2, "alice", "bob")
	a.WaitOut(t, 10*time.Second, "2 more messages", func(out string) bool { return strings.Count(out, "acked") >= 5 })

	if err := e.js.DeleteStream(ctx, "ORDERS"); err != nil {
		t.Fatal(err)
	}
	code, ended := a.Within(t, 20*time.Second)
	if !ended {
		t.Fatalf("consume still running 20s after its stream was deleted:\n%s", a.Err.String())
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, a.Err.String())
	}
	errLines := clitest.ErrorLines(a.Err.String())
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
