package elastic_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

// A consume whose work stream is deleted exits 1 within 5s with one line
// saying so and how to repair it (re-run create).
func TestConsumeWhenWorkStreamDeleted(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1")
	a := clitest.Start(cmd.Run, e.env, "elastic", "consume", "ORDERS", "g", "m1", "--sleep", "1ms")
	e.publish(3, "alice", "bob")
	a.WaitOut(t, 20*time.Second, "3 messages", func(out string) bool { return strings.Count(out, "acked") == 3 })
	if err := e.js.DeleteStream(context.Background(), "ORDERS-g"); err != nil {
		t.Fatal(err)
	}
	code, ended := a.Within(t, 5*time.Second)
	if !ended {
		t.Fatalf("consume still running 5s after its work stream was deleted:\n%s", a.Err.String())
	}
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, a.Err.String())
	}
	errLines := clitest.ErrorLines(a.Err.String())
	if len(errLines) != 1 || !strings.Contains(errLines[0], "work stream ORDERS-g of elastic group g was deleted") || !strings.Contains(errLines[0], "re-run `cg elastic create ORDERS g`") {
		t.Fatalf("want one error line naming the work stream and the repair, got %q\n%s", errLines, a.Err.String())
	}
}
