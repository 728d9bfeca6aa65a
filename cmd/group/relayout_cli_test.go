package group_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Bad input is refused in one line, exit 2 (a missing group, exit 1),
// changing nothing; the plan prints and changes nothing; the move runs
// with --force, both ways; a second run has nothing to do.
func TestRelayoutCLI(t *testing.T) {
	e := resetEnv(t)
	before := e.consState("g-m1", "g-m2")
	natstest.Eventually(t, 20*time.Second, "the stopped members' pulls expired", func() bool {
		return e.run("static", "relayout", "ORDERS", "g", "--to", "partition", "--dry-run").Code == 0
	})
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"static", "relayout", "ORDERS", "g"}, 2, "no layout to move to: give --to member or --to partition"},
		{[]string{"static", "relayout", "ORDERS", "g", "--to", "sideways"}, 2, `--to "sideways" is not a layout: use member or partition`},
		{[]string{"static", "relayout", "ORDERS", "g", "--to", ""}, 2, `--to "" is not a layout`},
		{[]string{"static", "relayout", "ORDERS", "nope", "--to", "partition", "--force"}, 1, "group not found"},
		{[]string{"static", "relayout", "ORDERS", "g", "--to", "partition"}, 2, "not moved: standard input is not a terminal; add --force"},
	}
	for _, tc := range cases {
		r := e.run(tc.args...)
		if r.Code != tc.code || !strings.Contains(firstLine(r.Err), tc.want) {
			t.Fatalf("cg %v:\n%s\nwant exit %d and %q on the first line", tc.args, r, tc.code, tc.want)
		}
	}
	r := e.mustRun("static", "relayout", "ORDERS", "g", "--to", "partition", "--dry-run", "--json")
	var v group.RelayoutView
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("%v: %s", err, r.Out)
	}
	if !v.DryRun || v.From != "member" || v.To != "partition" || len(v.New) != 4 || len(v.Old) != 2 {
		t.Fatalf("plan: %+v", v)
	}
	for _, n := range v.New {
		if !n.Create || n.Start != before["g-"+n.Member].floor+1 {
			t.Fatalf("new consumer %+v: want made at its owner's ack floor %d + 1", n, before["g-"+n.Member].floor)
		}
	}
	if got := e.consState("g-m1", "g-m2"); got["g-m1"] != before["g-m1"] || got["g-m2"] != before["g-m2"] || strings.Join(e.consumerNames(), ",") != "g-m1,g-m2" {
		t.Fatalf("the refusals and the plan changed the consumers: %v, %+v (before %+v)", e.consumerNames(), got, before)
	}
	r = e.mustRun("static", "relayout", "ORDERS", "g", "--to", "partition", "--force")
	if !strings.Contains(r.Out, "NEW CONSUMER") || !strings.Contains(r.Err, "moved static group g on ORDERS to the partition layout: 4 new consumer(s), 2 old removed") ||
		!strings.Contains(r.Err, "--layout partition --partitions 4") {
		t.Fatalf("relayout:\n%s", r)
	}
	if got := strings.Join(e.consumerNames(), ","); got != "g-p0,g-p1,g-p2,g-p3" {
		t.Fatalf("consumers after the move: %s", got)
	}
	if r := e.mustRun("static", "info", "ORDERS", "g", "--json"); !strings.Contains(r.Out, `"layout": "partition"`) {
		t.Fatalf("info after the move: %s", r.Out)
	}
	if r := e.mustRun("static", "relayout", "ORDERS", "g", "--to", "partition", "--force"); !strings.Contains(r.Err, "on the partition layout already: nothing to do") {
		t.Fatalf("second run: %s", r)
	}
	e.mustRun("static", "relayout", "ORDERS", "g", "--to", "member", "--force")
	if got := strings.Join(e.consumerNames(), ","); got != "g-m1,g-m2" {
		t.Fatalf("consumers after moving back: %s", got)
	}
	if got := e.consState("g-m1", "g-m2"); got["g-m1"].pending != 0 || got["g-m2"].pending != 0 {
		t.Fatalf("moved back with messages to handle again: %+v", got)
	}
}

// An elastic group moves too: the plan names no start (its place is the
// work stream), the move removes nothing the members had not made, and
// info shows the new layout.
func TestRelayoutCLIElastic(t *testing.T) {
	e := newEnv(t, 4)
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1")
	r := e.mustRun("elastic", "relayout", "PLAIN", "e", "--to", "partition", "--dry-run")
	if !strings.Contains(r.Out, "work stream") || !strings.Contains(r.Out, "by the member") || !strings.Contains(r.Err, "dry run: nothing changed") {
		t.Fatalf("elastic plan:\n%s", r)
	}
	r = e.mustRun("elastic", "relayout", "PLAIN", "e", "--to", "partition", "--force")
	if !strings.Contains(r.Err, "moved elastic group e on PLAIN to the partition layout: 4 new consumer(s)") {
		t.Fatalf("elastic relayout:\n%s", r)
	}
	if r := e.mustRun("elastic", "info", "PLAIN", "e", "--json"); !strings.Contains(r.Out, `"layout": "partition"`) {
		t.Fatalf("info after the move: %s", r.Out)
	}
}
