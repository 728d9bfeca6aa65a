package group_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

type cliConsState struct {
	delivered, floor, pending uint64
	ackPending                int
	paused                    bool
}

func (e *env) consState(names ...string) map[string]cliConsState {
	e.t.Helper()
	out := map[string]cliConsState{}
	for _, n := range names {
		cons, err := e.js.Consumer(context.Background(), "ORDERS", n)
		if err != nil {
			e.t.Fatal(err)
		}
		ci := cons.CachedInfo()
		out[n] = cliConsState{ci.Delivered.Stream, ci.AckFloor.Stream, ci.NumPending, ci.NumAckPending, ci.Paused}
	}
	return out
}

// resetEnv makes a static group g (m1, m2) on ORDERS, 40 messages handled
// and acked by both members, now stopped.
func resetEnv(t *testing.T) *env {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.publishPerPartition(4, 10)
	c := cg.New(e.js)
	for _, m := range []string{"m1", "m2"} {
		mem, err := c.Join(context.Background(), cg.KindStatic, "ORDERS", "g", m, func(_ context.Context, m *cg.Msg) { _ = m.Ack() }, cg.JoinOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer mem.Stop()
	}
	natstest.Eventually(t, 20*time.Second, "40 acked", func() bool {
		st := e.consState("g-m1", "g-m2")
		return st["g-m1"].floor+st["g-m2"].floor > 0 && st["g-m1"].ackPending+st["g-m2"].ackPending == 0 &&
			st["g-m1"].pending+st["g-m2"].pending == 0
	})
	return e
}

func TestResetCLIBadInputChangesNothing(t *testing.T) {
	e := resetEnv(t)
	before := e.consState("g-m1", "g-m2")
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"static", "reset", "ORDERS", "g"}, 2, "no target: give one of --to-start"},
		{[]string{"static", "reset", "ORDERS", "g", "--to-start", "--to-seq", "3"}, 2, "--to-start and --to-seq given together"},
		{[]string{"static", "reset", "ORDERS", "g", "--to-time", future}, 2, "is in the future"},
		{[]string{"static", "reset", "ORDERS", "g", "--to-time", "yesterday"}, 2, "is not an RFC 3339 time; write one such as 2026-12-01T10:00:00.250Z"},
		{[]string{"static", "reset", "ORDERS", "g", "--to-seq", "0"}, 2, "stream sequences start at 1"},
		{[]string{"static", "reset", "ORDERS", "g", "--to-seq", "42", "--force"}, 2, "sequence 42 is past the end of stream ORDERS (its last message is 40; 41 means after it)"},
		{[]string{"static", "reset", "ORDERS", "g", "m1", "m9", "--to-start", "--force"}, 1, `"m9" is not a member of static group "g"`},
		{[]string{"static", "reset", "ORDERS", "nope", "--to-start", "--force"}, 1, "group not found"},
		{[]string{"elastic", "reset", "ORDERS", "g", "--to-seq", "3"}, 2, "an elastic group can only skip its backlog (--to-end)"},
		// No terminal and no --force: the plan is printed, nothing reset.
		{[]string{"static", "reset", "ORDERS", "g", "--to-start"}, 2, "not reset: standard input is not a terminal; add --force"},
	}
	for _, tc := range cases {
		r := e.run(tc.args...)
		if r.Code != tc.code || !strings.Contains(firstLine(r.Err), tc.want) {
			t.Fatalf("cg %v:\n%s\nwant exit %d and %q on the first line", tc.args, r, tc.code, tc.want)
		}
		if after := e.consState("g-m1", "g-m2"); after["g-m1"] != before["g-m1"] || after["g-m2"] != before["g-m2"] {
			t.Fatalf("cg %v changed consumers: %+v -> %+v", tc.args, before, after)
		}
	}
}

func TestResetCLIDryRunAndReset(t *testing.T) {
	e := resetEnv(t)
	before := e.consState("g-m1", "g-m2")
	r := e.mustRun("--json", "static", "reset", "ORDERS", "g", "--to-seq", "21", "--dry-run")
	var v struct {
		DryRun  bool   `json:"dry_run"`
		Seq     uint64 `json:"seq"`
		Members []struct {
			Member string `json:"member"`
			From   uint64 `json:"from_seq"`
			To     uint64 `json:"to_seq"`
			Again  uint64 `json:"handled_again"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("%v: %s", err, r.Out)
	}
	var again uint64
	for _, m := range v.Members {
		again += m.Again
	}
	if !v.DryRun || v.Seq != 21 || len(v.Members) != 2 || again != 20 {
		t.Fatalf("dry run plan: %+v", v)
	}
	if after := e.consState("g-m1", "g-m2"); after["g-m1"] != before["g-m1"] || after["g-m2"] != before["g-m2"] {
		t.Fatalf("dry run changed consumers: %+v -> %+v", before, after)
	}
	r = e.mustRun("--json", "static", "reset", "ORDERS", "g", "--by-duration", "1h", "--dry-run")
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil || v.Seq != 1 {
		t.Fatalf("--by-duration 1h: %v %s", err, r.Out)
	}
	// The human plan, then the reset of m1 alone.
	r = e.mustRun("static", "reset", "ORDERS", "g", "m1", "--to-seq", "21", "--force")
	if !strings.Contains(r.Out, "MEMBER") || !strings.Contains(r.Out, "g-m1") || strings.Contains(r.Out, "g-m2") {
		t.Fatalf("plan table:\n%s", r.Out)
	}
	if !strings.Contains(r.Err, "m1: next handles sequence 21") {
		t.Fatalf("result:\n%s", r.Err)
	}
	after := e.consState("g-m1", "g-m2")
	if after["g-m1"].floor != 20 || after["g-m1"].pending == 0 || after["g-m1"].paused || after["g-m2"] != before["g-m2"] {
		t.Fatalf("after the reset of m1: %+v (before %+v)", after, before)
	}
	// Its saved position moved with it.
	kv, err := e.js.KeyValue(context.Background(), cg.PositionsBucket)
	if err != nil {
		t.Fatal(err)
	}
	ent, err := kv.Get(context.Background(), "ORDERS.g.m1")
	if err != nil {
		t.Fatal(err)
	}
	var p cg.Position
	if err := json.Unmarshal(ent.Value(), &p); err != nil || p.AckFloor != 20 {
		t.Fatalf("saved position %s: %v", ent.Value(), err)
	}
}
