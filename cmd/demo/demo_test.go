package demo_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/internal/clitest"
)

// The whole walkthrough, shortened by its flags: it must pass by counting
// and measure both failovers.
func TestDemoEndToEnd(t *testing.T) {
	start := time.Now()
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo",
		"--phase", "1s", "--ack-wait", "1s", "--keys", "8", "--rate", "100/s", "--sleep", "2ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.Verdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	if !v.OK || v.OrderViolations != 0 || v.Lost != 0 {
		t.Fatalf("verdict %+v\nstderr:\n%s", v, r.Err)
	}
	if v.Published == 0 || v.Processed != v.Published || v.Handled != v.Processed+v.Duplicates {
		t.Fatalf("counts: published %d processed %d handled %d duplicates %d", v.Published, v.Processed, v.Handled, v.Duplicates)
	}
	if v.Walkthrough != demo.Static || v.StepDown == nil || v.Kill == nil || len(v.Rebalances) != 0 {
		t.Fatalf("static verdict shape: %+v", v)
	}
	if !v.StepDown.Measured || !v.Kill.Measured || v.Kill.GapMS <= 0 || v.StepDown.GapMS <= 0 {
		t.Fatalf("failovers not measured: step-down %+v kill %+v", v.StepDown, v.Kill)
	}
	// The kill hands m1's work to the other instance.
	if v.Kill.From == v.Kill.To || !strings.HasPrefix(v.Kill.From, "m1/") || !strings.HasPrefix(v.Kill.To, "m1/") {
		t.Fatalf("kill handoff %+v", v.Kill)
	}
	var byM1, byM2 uint64
	for who, n := range v.ByInstance {
		if strings.HasPrefix(who, "m1/") {
			byM1 += n
		} else {
			byM2 += n
		}
	}
	if byM1 == 0 || byM2 == 0 {
		t.Fatalf("by instance %v", v.ByInstance)
	}
	// m2 runs concurrent lanes by default; order is still counted above.
	if v.M2Concurrency != 4 {
		t.Fatalf("m2 concurrency %d, want the default 4", v.M2Concurrency)
	}
	for _, want := range []string{"Started a NATS server", "Created stream ORDERS", "Created static group fulfillment",
		"m1 owns 0-4, m2 owns 5-9", "Stepping m1 down", "Killing m1/", "pinned (pin", "all ", "Status after the failover"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
	if el := time.Since(start); el > 40*time.Second {
		t.Fatalf("demo took %v", el)
	}
}

func TestDemoTextVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	r := clitest.Run(t, cmd.Run, clitest.Env(), "demo", "--phase", "500ms", "--ack-wait", "1s", "--keys", "4", "--rate", "100/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{"VERDICT: PASS", "published:", "order violations: 0", "lost:             0", "kill gap:", "m1/"} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("verdict lacks %q:\n%s", want, r.Out)
		}
	}
	if strings.Contains(r.Out, "==>") {
		t.Errorf("narration on stdout:\n%s", r.Out)
	}
}

func TestDemoUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"demo", "--phase", "30s"}, "--phase"},
		{[]string{"demo", "--ack-wait", "100ms"}, "--ack-wait"},
		{[]string{"demo", "--rate", "0"}, "--rate"},
		{[]string{"demo", "--rate", "50"}, "no unit"},
		{[]string{"demo", "--sleep", "5"}, "no unit"},
		{[]string{"demo", "--sleep", "2s"}, "--sleep"},
		{[]string{"demo", "--keys", "0"}, "below the minimum"},
		{[]string{"demo", "--concurrency", "0"}, "--concurrency"},
		{[]string{"demo", "extra"}, `unknown walkthrough "extra": use cg demo static, cg demo elastic, cg demo batches, cg demo poison or cg demo workers`},
		{[]string{"demo", "static", "elastic"}, "one walkthrough"},
		{[]string{"demo", "elastic", "--phase", "11s"}, "--phase"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), tc.args...)
		if r.Code != 2 || !strings.Contains(r.Err, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Err, tc.says)
		}
	}
}

// `cg demo static` is the default walkthrough, named.
func TestDemoStaticByName(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "static", "--phase", "500ms", "--ack-wait", "1s", "--keys", "4", "--rate", "100/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.Verdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	if v.Walkthrough != demo.Static || !v.OK || v.Kill == nil {
		t.Fatalf("verdict %+v", v)
	}
}

// The elastic walkthrough, shortened by its flags: members wait before
// they are added, every change is timed, a dynamic member adds itself on
// its start and drops itself on its clean stop, and the count holds.
func TestDemoElasticEndToEnd(t *testing.T) {
	start := time.Now()
	// 16 keys reach all 10 partitions, so every rebalance has work to time.
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "elastic",
		"--phase", "1s", "--ack-wait", "1s", "--keys", "16", "--rate", "200/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.Verdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	if !v.OK || v.OrderViolations != 0 || v.Lost != 0 || v.Walkthrough != demo.Elastic {
		t.Fatalf("verdict %+v\nstderr:\n%s", v, r.Err)
	}
	if v.Published == 0 || v.Processed != v.Published || v.Handled != v.Processed+v.Duplicates {
		t.Fatalf("counts: published %d processed %d handled %d duplicates %d", v.Published, v.Processed, v.Handled, v.Duplicates)
	}
	if v.StepDown != nil || v.Kill != nil {
		t.Fatalf("static failovers in the elastic verdict: %+v", v)
	}
	var changes []string
	for _, rb := range v.Rebalances {
		changes = append(changes, rb.Change)
		if !rb.Measured || rb.LatencyMS <= 0 || len(rb.Moves) == 0 {
			t.Errorf("rebalance not measured: %+v", rb)
		}
	}
	if got := strings.Join(changes, "; "); got != "add m1 m2; add m3; drop m1; add m1; start m4; stop m4" {
		t.Fatalf("changes %q", got)
	}
	for i, want := range []string{"m1 m2", "m3", "", "m1", "m4", ""} {
		var got []string
		for _, ml := range v.Rebalances[i].Members {
			if ml.Measured {
				got = append(got, ml.Member)
			}
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%s: measured members %v, want %q", v.Rebalances[i].Change, got, want)
		}
	}
	// Dropping m1 (0-2,9) orphans 0, 1, 2 to m2 and 9 to m3.
	drop := v.Rebalances[2]
	var orphaned []string
	for _, pl := range drop.Partitions {
		if !pl.Measured || pl.From != "m1" {
			t.Errorf("orphaned partition %+v", pl)
		}
		orphaned = append(orphaned, fmt.Sprintf("%d>%s", pl.Partition, pl.To))
	}
	if got := strings.Join(orphaned, " "); got != "0>m2 1>m2 2>m2 9>m3" {
		t.Errorf("orphaned %q", got)
	}
	// Only m4's own changes are dynamic, and each says how long the
	// member's own write took.
	for i, rb := range v.Rebalances {
		if dyn := i >= 4; rb.Dynamic != dyn || (rb.ChangeMS > 0) != dyn {
			t.Errorf("%s: dynamic %v, change %vms", rb.Change, rb.Dynamic, rb.ChangeMS)
		}
	}
	// m4 adds itself with the fewest moves, taking 9 from m1 (0-2,9) and
	// 8 from m3 (6-8), and its clean stop gives them back.
	moves := func(rb demo.Rebalance) string {
		var out []string
		for _, mv := range rb.Moves {
			out = append(out, fmt.Sprintf("%d:%s>%s", mv.Partition, mv.From, mv.To))
		}
		return strings.Join(out, " ")
	}
	if got := moves(v.Rebalances[4]); got != "8:m3>m4 9:m1>m4" {
		t.Errorf("m4's join moved %q", got)
	}
	if got := moves(v.Rebalances[5]); got != "8:m4>m3 9:m4>m1" {
		t.Errorf("m4's leave moved %q", got)
	}
	orphaned = nil
	for _, pl := range v.Rebalances[5].Partitions {
		if !pl.Measured || pl.From != "m4" {
			t.Errorf("partition m4 left %+v", pl)
		}
		orphaned = append(orphaned, fmt.Sprintf("%d>%s", pl.Partition, pl.To))
	}
	if got := strings.Join(orphaned, " "); got != "8>m3 9>m1" {
		t.Errorf("m4 left %q", got)
	}
	for _, who := range []string{"m1/a", "m2/a", "m3/a", "m4/a"} {
		if v.ByInstance[who] == 0 {
			t.Errorf("%s handled nothing: %v", who, v.ByInstance)
		}
	}
	for _, want := range []string{"Created stream ORDERS on orders.*, plain", "cg elastic create ORDERS fulfillment 10 --filter 'orders.*:1'",
		"m1/a waiting: not a member of the group; waiting to be added", "m3/a waiting: not a member",
		"Status before any member is added", "moves 0-4 none -> m1, 5-9 none -> m2",
		"moves 3,4 m1 -> m2, 6-8 m2 -> m3, 9 m2 -> m1", "rebalanced: consumer m3 now pulls partitions 6-8",
		"every orphaned partition served by its new owner", "Status after drop m1", "(running, waiting to be added)",
		"BACKLOG", "sourcing lag", "Status after add m1", "all ",
		"Starting m4 with --dynamic", "m4/a added member m4 to the group (dynamic", "m4 added itself", "m4 handled its first message",
		"m4 (dynamic)", "Stopping m4 cleanly", "m4/a dropped member m4 from the group", "m4 stopped and dropped itself",
		"after m4's stop began", "Status after m4 stopped", "(stopped: it dropped itself)"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
	if el := time.Since(start); el > 30*time.Second {
		t.Fatalf("demo took %v", el)
	}
}

func TestDemoElasticTextVerdict(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo")
	}
	r := clitest.Run(t, cmd.Run, clitest.Env(), "demo", "elastic", "--phase", "500ms", "--ack-wait", "1s", "--keys", "16", "--rate", "200/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{"VERDICT: PASS", "order violations: 0", "rebalances:", "add m1 m2:", "m1 first message after",
		"drop m1:", "orphaned 0-2 -> m2, 9 -> m3: all served within", "m3/a=",
		"start m4:", "m4 added itself", "after its start, first message after", "stop m4:", "m4 dropped itself",
		"orphaned 8 -> m3, 9 -> m1: all served within", "m4/a="} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("verdict lacks %q:\n%s", want, r.Out)
		}
	}
	if strings.Contains(r.Out, "==>") || strings.Contains(r.Out, "kill gap") {
		t.Errorf("narration or static lines on stdout:\n%s", r.Out)
	}
}
