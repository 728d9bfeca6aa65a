package bench_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/bench"
	"github.com/cg-dev/cg/internal/clitest"
)

// runBench runs a bench matrix. Its runs are bounded one by one by the
// bench's own --run-limit, so that a slow machine fails a run by name
// rather than the whole matrix by clitest.Run's 60 s, which the runs of a
// matrix together may pass on a loaded machine (8 runs took 60 s at a
// load of 25 on 2 cores).
func runBench(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	return clitest.RunCtx(ctx, cmd.Run, clitest.Env(), append(args, "--run-limit", "40s")...)
}

// A tiny matrix end to end: every run listed, every message handled once
// in per-key order, and the groups set beside the plain consumer.
func TestBenchJSON(t *testing.T) {
	r := runBench(t, "--json", "bench",
		"--messages", "200", "--keys", "20", "--members", "1,2", "--partitions", "2", "--max-ack-pending", "1,100")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, r.Out)
	}
	// plain: (1 filter, 2 filters) × 2 max ack pendings; cg: 2 members × 2.
	var plain, groups int
	for _, row := range rep.Results {
		if row.Handled != 200 || row.Violations != 0 || row.MsgsPerSec <= 0 || row.Error != "" || row.P99MS < row.P50MS {
			t.Errorf("run %+v", row)
		}
		switch row.System {
		case "plain":
			plain++
		case "cg":
			groups++
			if row.VsPlain <= 0 {
				t.Errorf("no ratio to the plain consumer: %+v", row)
			}
		}
	}
	if !rep.OK || plain != 4 || groups != 4 || !strings.HasPrefix(rep.Server, "nats://127.0.0.1:") {
		t.Fatalf("report ok=%v plain=%d groups=%d server=%s", rep.OK, plain, groups, rep.Server)
	}
}

func TestBenchTable(t *testing.T) {
	r := runBench(t, "bench", "--messages", "200", "--keys", "20", "--members", "2", "--partitions", "2")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	lines := strings.Split(strings.TrimSpace(r.Out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "SYSTEM") || !strings.Contains(lines[0], "VIOLATIONS") {
		t.Fatalf("table:\n%s", r.Out)
	}
	for i, want := range []string{"plain", "plain", "cg"} {
		f := strings.Fields(lines[i+1])
		// SYSTEM LAYOUT MEMBERS PARTITIONS FILTERS KEYS HANDLER MAX-ACK-PENDING CONCURRENCY MSGS/S PUBLISH/S P50 P99 VIOLATIONS VS
		layout := map[string]string{"plain": "-", "cg": "member"}[want]
		if len(f) != 15 || f[0] != want || f[1] != layout || f[5] != "20" || f[8] != "1" || f[13] != "0" || f[9] == "failed" || !strings.HasSuffix(f[11], "ms") {
			t.Errorf("row %d: %q", i+1, lines[i+1])
		}
	}
}

// --concurrency: each cg run once per value, concurrent members with cg's
// own max ack pending, per-key order kept.
func TestBenchConcurrency(t *testing.T) {
	r := runBench(t, "--json", "bench", "--messages", "400", "--keys", "20", "--members", "1", "--partitions", "4", "--concurrency", "1,8")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	seen := map[int]bench.Row{}
	for _, row := range rep.Results {
		if row.System == "cg" {
			seen[row.Concurrency] = row
		}
	}
	serial, conc := seen[1], seen[8]
	if len(seen) != 2 || serial.MaxAckPending != 1 || conc.MaxAckPending != 32 || conc.Handled != 400 || conc.Violations != 0 || conc.Duplicates != 0 {
		t.Fatalf("cg rows by concurrency: %+v", seen)
	}
	bad := clitest.Run(t, cmd.Run, clitest.Env(), "bench", "--concurrency", "0")
	if bad.Code != 2 || !strings.Contains(bad.Err, "--concurrency") {
		t.Fatalf("--concurrency 0: exit %d: %s", bad.Code, bad.Err)
	}
}

// --preload: the rate alone, no latency columns.
func TestBenchPreload(t *testing.T) {
	r := runBench(t, "--json", "bench", "--preload", "--messages", "200", "--keys", "20", "--members", "2", "--partitions", "2")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("stdout is not the JSON report: %v\n%s", err, r.Out)
	}
	if !rep.OK || len(rep.Results) != 3 {
		t.Fatalf("report %+v", rep)
	}
	for _, row := range rep.Results {
		if !row.Preload || row.Handled != 200 || row.Violations != 0 || row.MsgsPerSec <= 0 || row.P50MS != 0 {
			t.Errorf("run %+v", row)
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--members", "0"},
		{"--members", "1,x"},
		{"--handler", "5"},
		{"--handler", "1s"},
		{"--members", "4", "--partitions", "2"},
		{"--run-limit", "0s"},
		{"--layout", "members"},
		{"--layout", "member,"},
		{"extra"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), append([]string{"bench"}, args...)...)
		if r.Code != 2 || r.Out != "" || !strings.HasPrefix(r.Err, "error: ") {
			t.Errorf("%v: exit %d\nstdout:%s\nstderr:%s", args, r.Code, r.Out, r.Err)
		}
	}
}

// --cli: each group run drained again through the consume command, one
// command per member told its share; every message handled (nothing left
// pending or unacknowledged on the server) and a rate set beside the
// plain consumer's.
func TestBenchCLI(t *testing.T) {
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "bench", "--cli", "--messages", "300", "--keys", "30", "--members", "1,2", "--partitions", "2", "--concurrency", "1,4")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	cli := map[[2]int]bench.Row{}
	for _, row := range rep.Results {
		if !row.Preload {
			t.Errorf("--cli runs preloaded: %+v", row)
		}
		if row.System == "cli" {
			cli[[2]int{row.Members, row.Concurrency}] = row
			if row.Handled != 300 || row.MsgsPerSec <= 0 || row.VsPlain <= 0 || row.Error != "" || row.Layout != "member" {
				t.Errorf("cli run %+v", row)
			}
		}
	}
	if !rep.OK || len(cli) != 4 {
		t.Fatalf("ok=%v, cli runs by members and concurrency: %+v", rep.OK, cli)
	}
}

// --layout member,partition runs every scenario on both layouts, through
// the engine and through the consume command: each row names its layout,
// every message is handled, in order.
func TestBenchLayouts(t *testing.T) {
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "bench", "--cli", "--layout", "member,partition", "--messages", "200", "--keys", "40", "--members", "2", "--partitions", "4")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	seen := map[string]int{}
	for _, row := range rep.Results {
		seen[row.Layout]++
		if row.Handled != 200 || row.Violations != 0 || row.Error != "" {
			t.Errorf("run %+v", row)
		}
	}
	if !rep.OK || seen["member"] == 0 || seen["partition"] != seen["member"] {
		t.Fatalf("ok=%v, rows by layout %v: %+v", rep.OK, seen, rep.Results)
	}
}

// --elastic: each group run drained again by an elastic group from its
// filled work stream, through the engine and (--cli) through 'cg elastic
// consume', each set beside the plain consumer on a work queue of the same
// backlog, which drains every message too.
func TestBenchElastic(t *testing.T) {
	r := runBench(t, "--json", "bench", "--cli", "--elastic", "--layout", "partition", "--messages", "300", "--keys", "30", "--members", "1,2", "--partitions", "4", "--concurrency", "4")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	var wq float64
	rows := map[string]int{}
	for _, row := range rep.Results {
		if row.Handled != 300 || row.Violations != 0 || row.Error != "" || !row.Preload {
			t.Errorf("run %+v", row)
		}
		if row.System == "plain" && row.WorkQueue {
			wq = row.MsgsPerSec
		}
		if row.System == "elastic" || row.System == "cli-elastic" {
			rows[row.System]++
			if row.Layout != "partition" || row.MsgsPerSec <= 0 || row.VsPlain <= 0 {
				t.Errorf("elastic run %+v", row)
			}
		}
	}
	for _, row := range rep.Results {
		if (row.System == "elastic" || row.System == "cli-elastic") && wq > 0 && math.Abs(row.VsPlain-row.MsgsPerSec/wq) > 1e-9 {
			t.Errorf("%s members=%d: vs plain %v, not against the work-queue consumer's %v msgs/s", row.System, row.Members, row.VsPlain, wq)
		}
	}
	if !rep.OK || wq <= 0 || rows["elastic"] != 2 || rows["cli-elastic"] != 2 {
		t.Fatalf("ok=%v, work-queue plain %v msgs/s, elastic rows %v: %+v", rep.OK, wq, rows, rep.Results)
	}
}

// --paired: each group run is set beside a plain run made right before it,
// whose rate the row carries.
func TestBenchPaired(t *testing.T) {
	r := runBench(t, "--json", "bench", "--paired", "--cli", "--messages", "200", "--keys", "20", "--members", "1", "--partitions", "2")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.Out)
	}
	groups := 0
	for _, row := range rep.Results {
		if row.System == "plain" {
			if row.PlainMsgsPerSec != 0 {
				t.Errorf("plain row with a baseline: %+v", row)
			}
			continue
		}
		groups++
		if row.PlainMsgsPerSec <= 0 || math.Abs(row.VsPlain-row.MsgsPerSec/row.PlainMsgsPerSec) > 1e-9 {
			t.Errorf("group row not set beside its own plain run: %+v", row)
		}
	}
	if !rep.OK || groups != 2 {
		t.Fatalf("ok=%v, %d group rows: %+v", rep.OK, groups, rep.Results)
	}
}
