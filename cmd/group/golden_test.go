package group_test

// Golden files for the human output of ls, info and watch, static and
// elastic, run through the real command tree against an in-process
// server. go test ./cmd/group -run Golden -update rewrites them.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// goldenOut normalises a command's output and compares it with its golden file.
func goldenOut(t *testing.T, name string, r clitest.Result) {
	t.Helper()
	if r.Err != "" {
		t.Errorf("%s: stderr %q", name, r.Err)
	}
	clitest.Golden(t, name, clitest.NormalizeHuman(r.Out))
}

// joinAll joins one instance of each member, on its own connection,
// acking everything; stopped at cleanup.
func (e *env) joinAll(kind, stream, group string, members ...string) {
	e.t.Helper()
	c := cg.New(e.js)
	h := func(_ context.Context, m *cg.Msg) { _ = m.Ack() }
	for _, name := range members {
		var (
			m   *cg.Member
			err error
		)
		if kind == "static" {
			m, err = c.JoinStatic(context.Background(), stream, group, name, h, cg.JoinOptions{AckWait: time.Second})
		} else {
			m, err = c.JoinElastic(context.Background(), stream, group, name, h, cg.JoinOptions{AckWait: time.Second})
		}
		if err != nil {
			e.t.Fatalf("join %s %s: %v", kind, name, err)
		}
		e.t.Cleanup(m.Stop)
	}
}

// settled waits until info --json shows every member pinned and nothing pending.
func (e *env) settled(kind, stream, group string, members int) {
	e.t.Helper()
	clitest.Eventually(e.t, 20*time.Second, "members pinned and nothing pending", func() bool {
		r := e.mustRun(kind, "info", stream, group, "--json")
		var v struct {
			Pending int `json:"pending"`
			Members []struct {
				PinID string `json:"pin_id"`
			} `json:"members"`
		}
		_ = json.Unmarshal([]byte(r.Out), &v)
		pinned := 0
		for _, m := range v.Members {
			if m.PinID != "" {
				pinned++
			}
		}
		return pinned == members && v.Pending == 0
	})
}

func TestGoldenStatic(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.mustRun("static", "create", "mapped", "ORDERS", "h", "4", "a:0,1,2", "b:3")
	e.publishPerPartition(4, 2)

	goldenOut(t, "static-ls", e.mustRun("static", "ls", "ORDERS"))
	goldenOut(t, "static-info-unpinned", e.mustRun("static", "info", "ORDERS", "g"))
	goldenOut(t, "static-watch-unpinned", e.mustRun("static", "watch", "ORDERS", "g", "--count", "1"))

	e.joinAll("static", "ORDERS", "g", "m1", "m2")
	e.settled("static", "ORDERS", "g", 2)
	goldenOut(t, "static-info-pinned", e.mustRun("static", "info", "ORDERS", "g"))
	goldenOut(t, "static-watch-pinned", e.mustRun("static", "watch", "ORDERS", "g", "--count", "1"))
}

func TestGoldenElastic(t *testing.T) {
	e := newEnv(t, 4)
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.*"}}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("elastic", "create", "EVENTS", "e", "4", "--filter", "events.*:1")
	e.mustRun("elastic", "add", "EVENTS", "e", "m1", "m2")
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		if _, err := e.js.Publish(context.Background(), "events."+k, nil); err != nil {
			t.Fatal(err)
		}
	}

	// Sourcing into the work stream is asynchronous: the unpinned views
	// show the backlog once it is all there, not a race with it.
	natstest.Eventually(t, 20*time.Second, "work stream sourced", func() bool {
		ws, err := e.js.Stream(context.Background(), cg.WorkStreamName("EVENTS", "e"))
		return err == nil && ws.CachedInfo().State.Msgs == 5
	})
	goldenOut(t, "elastic-ls", e.mustRun("elastic", "ls", "EVENTS"))
	goldenOut(t, "elastic-info-unpinned", e.mustRun("elastic", "info", "EVENTS", "e"))
	goldenOut(t, "elastic-watch-unpinned", e.mustRun("elastic", "watch", "EVENTS", "e", "--count", "1"))

	e.joinAll("elastic", "EVENTS", "e", "m1", "m2")
	e.settled("elastic", "EVENTS", "e", 2)
	goldenOut(t, "elastic-info-pinned", e.mustRun("elastic", "info", "EVENTS", "e"))
	goldenOut(t, "elastic-watch-pinned", e.mustRun("elastic", "watch", "EVENTS", "e", "--count", "1"))
}
