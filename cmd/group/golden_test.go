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

// joinAll joins one instance of each member, acking everything; stopped
// at cleanup. The ack wait (and so the pinned TTL and the pull expiry it
// sets) is long so that the pinned views hold still once settled: no
// redelivery of a message whose ack a loaded machine was slow to send, and
// no moment between an expired pull and the next in which a member shows
// no waiting request.
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
			m, err = c.JoinStatic(context.Background(), stream, group, name, h, cg.JoinOptions{AckWait: goldenAckWait})
		} else {
			m, err = c.JoinElastic(context.Background(), stream, group, name, h, cg.JoinOptions{AckWait: goldenAckWait})
		}
		if err != nil {
			e.t.Fatalf("join %s %s: %v", kind, name, err)
		}
		e.t.Cleanup(m.Stop)
	}
}

// goldenAckWait: see joinAll.
const goldenAckWait = time.Minute

// settled waits until info --json shows what the pinned goldens pin: every
// member pinned with its one waiting pull, and all of the group's messages
// delivered once and acked.
func (e *env) settled(kind, stream, group string, members int, messages uint64) {
	e.t.Helper()
	var last string
	ok := clitest.Poll(nil, 20*time.Second, func() bool {
		r := e.mustRun(kind, "info", stream, group, "--json")
		last = r.Out
		var v struct {
			Members []struct {
				PinID        string `json:"pin_id"`
				Waiting      int    `json:"waiting"`
				Pending      uint64 `json:"pending"`
				AckPending   int    `json:"ack_pending"`
				Delivered    uint64 `json:"delivered_consumer_seq"`
				AckFloor     uint64 `json:"ack_floor_consumer_seq"`
				DeliveredSeq uint64 `json:"delivered_stream_seq"`
				AckFloorSeq  uint64 `json:"ack_floor_stream_seq"`
			} `json:"members"`
		}
		if json.Unmarshal([]byte(r.Out), &v) != nil || len(v.Members) != members {
			return false
		}
		var delivered uint64
		for _, m := range v.Members {
			if m.PinID == "" || m.Waiting != 1 || m.Pending != 0 || m.AckPending != 0 ||
				m.AckFloor != m.Delivered || m.AckFloorSeq != m.DeliveredSeq {
				return false
			}
			delivered += m.Delivered
		}
		return delivered == messages
	})
	if !ok {
		e.t.Fatalf("timed out waiting for %d members pinned and %d messages delivered once and acked; last info:\n%s", members, messages, last)
	}
}

// sourced waits until the work stream of an elastic group holds n
// messages and its sources report no lag: sourcing is asynchronous, so the
// unpinned views show the backlog once it is all there, not a race with it.
func (e *env) sourced(stream, group string, n uint64) {
	e.t.Helper()
	natstest.Eventually(e.t, 20*time.Second, "work stream sourced", func() bool {
		ws, err := e.js.Stream(context.Background(), cg.WorkStreamName(stream, group))
		if err != nil || ws.CachedInfo().State.Msgs != n {
			return false
		}
		for _, si := range ws.CachedInfo().Sources {
			if si.Lag != 0 {
				return false
			}
		}
		return true
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
	e.settled("static", "ORDERS", "g", 2, 8)
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

	e.sourced("EVENTS", "e", 5)
	goldenOut(t, "elastic-ls", e.mustRun("elastic", "ls", "EVENTS"))
	goldenOut(t, "elastic-info-unpinned", e.mustRun("elastic", "info", "EVENTS", "e"))
	goldenOut(t, "elastic-watch-unpinned", e.mustRun("elastic", "watch", "EVENTS", "e", "--count", "1"))

	e.joinAll("elastic", "EVENTS", "e", "m1", "m2")
	e.settled("elastic", "EVENTS", "e", 2, 5)
	goldenOut(t, "elastic-info-pinned", e.mustRun("elastic", "info", "EVENTS", "e"))
	goldenOut(t, "elastic-watch-pinned", e.mustRun("elastic", "watch", "EVENTS", "e", "--count", "1"))
}
