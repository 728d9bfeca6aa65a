package demo_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/internal/clitest"
)

// The batches walkthrough, shortened: the pinned instance is killed
// between a batch's sink write and its acks, and the verdict must count
// the standby writing that whole batch again, first and in order, with
// nothing lost and no more duplicates than that batch.
func TestDemoBatchesEndToEnd(t *testing.T) {
	start := time.Now()
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "batches",
		"--phase", "1s", "--ack-wait", "1s", "--keys", "8", "--batch", "8", "--sleep", "2ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.Verdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	if !v.OK || v.Walkthrough != demo.Batches || v.Lost != 0 || v.OrderViolations != 0 {
		t.Fatalf("verdict %+v\nstderr:\n%s", v, r.Err)
	}
	if v.Published == 0 || v.Processed != v.Published || v.Handled != v.Processed+v.Duplicates {
		t.Fatalf("counts: published %d processed %d handled %d duplicates %d", v.Published, v.Processed, v.Handled, v.Duplicates)
	}
	bv := v.Batches
	if bv == nil || bv.Killed == nil {
		t.Fatalf("no batch verdict or no kill: %+v", v)
	}
	k := bv.Killed
	if bv.Size != 8 || k.Size < 1 || k.Size > 8 || k.LastSeq-k.FirstSeq+1 != uint64(k.Size) {
		t.Fatalf("killed batch %+v (size %d)", k, bv.Size)
	}
	// The killed batch was written by the victim and again by the standby:
	// exactly its messages are the duplicates.
	if !bv.RedeliveredInOrder || bv.Redelivered != k.Size || v.Duplicates != uint64(k.Size) {
		t.Fatalf("redelivered %d in order %v, duplicates %d; killed %+v", bv.Redelivered, bv.RedeliveredInOrder, v.Duplicates, k)
	}
	if bv.BatchOrderViolations != 0 || bv.Oversized != 0 || bv.Written != int(v.Handled) || bv.Batches < 2 {
		t.Fatalf("batch verdict %+v, handled %d", bv, v.Handled)
	}
	if bv.Failover == nil || !bv.Failover.Measured || bv.Failover.From == bv.Failover.To || bv.Failover.From != k.Instance {
		t.Fatalf("failover %+v, killed %s", bv.Failover, k.Instance)
	}
	for _, want := range []string{"Starting m1/a and m1/b, each consuming in batches of up to 8", "Killing m1's pinned instance",
		"and before its acks", "wrote its first batch", "Status after the failover", "all "} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
	if el := time.Since(start); el > 40*time.Second {
		t.Fatalf("demo took %v", el)
	}
}

func TestDemoBatchesTextVerdictAndUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"demo", "batches", "--batch", "0"}, "--batch"},
		{[]string{"demo", "batches", "--batch", "101"}, "at most 100"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), tc.args...)
		if r.Code != 2 || !strings.Contains(r.Err, tc.says) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", tc.args, r.Code, r.Err, tc.says)
		}
	}
	if testing.Short() {
		t.Skip("runs the demo")
	}
	r := clitest.Run(t, cmd.Run, clitest.Env(), "demo", "batches", "--phase", "500ms", "--ack-wait", "1s", "--keys", "4", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{"VERDICT: PASS", "lost:              0", "killed batch:", "redelivered batch:", "in the same order, before anything later",
		"member order:      0 writes out of stream order", "kill gap:"} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("verdict lacks %q:\n%s", want, r.Out)
		}
	}
}
