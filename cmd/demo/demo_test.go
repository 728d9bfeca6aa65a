package demo_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/cmd/internal/clitest"
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
	if !v.StepDown.Measured || !v.Kill.Measured || v.Kill.GapMS <= 0 || v.StepDown.GapMS <= 0 {
		t.Fatalf("failovers not measured: step-down %+v kill %+v", v.StepDown, v.Kill)
	}
	// The kill hands m1's work to the other instance, after the pinned TTL.
	if v.Kill.From == v.Kill.To || !strings.HasPrefix(v.Kill.From, "m1/") || !strings.HasPrefix(v.Kill.To, "m1/") {
		t.Fatalf("kill handoff %+v", v.Kill)
	}
	if v.Kill.GapMS < 500 {
		t.Fatalf("kill gap %vms is shorter than any pinned TTL", v.Kill.GapMS)
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
		{[]string{"demo", "extra"}, "unknown command"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), tc.args...)
		if r.Code != 2 || !strings.Contains(r.Err, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Err, tc.says)
		}
	}
}
