// Package chaos runs cg members as separate processes of the built binary
// while keyed traffic flows, disrupts them the ways production does — kill
// -9, SIGSTOP past the pinned TTL, a frozen or black-holed pinned instance
// (which must be replaced within a second), a kill just after a standby
// joined, SIGTERM, step-down loops, elastic add/drop storms, a server
// restart, the loss of a cluster node, CPU hogs that must not cause a
// failover, kill -9, SIGSTOP and SIGTERM on the partition layout (one pin
// per partition) — and checks by
// counting: every published message handled at least once, per-key order
// never broken, duplicates no more than what was in flight at each
// disruption, and no pin changes the scenario did not cause.
//
// CG_CHAOS_LAYOUT=partition (make chaos-partition) runs every scenario on
// the partition layout: "the pinned instance" is then the one holding the
// most of its member's partition pins, and each partition it held must
// resume within failoverLimit on its own.
//
// Each scenario runs its own server(s), bounds its traffic by count and its
// run by a deadline, waits on conditions (never on sleeps) and logs one
// summary line; TestMain prints them as a table at the end (go test -v).
package chaos

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
)

var (
	// cgBin is the cg binary under test, built once by TestMain.
	cgBin string
	// hasPinnedTTL: consume takes --pinned-ttl (else the TTL follows --ack-wait).
	hasPinnedTTL bool
	// hasLivenessCheck: consume takes --liveness-check (standbys replace a
	// dead pinned instance before the pinned TTL).
	hasLivenessCheck bool
	// concurrency is CG_CHAOS_CONCURRENCY: every member runs with
	// --concurrency N (cg's lanes, max ack pending 4 × N), so that the
	// whole suite's per-key order and loss counts cover concurrent members
	// (make chaos-concurrent). 0: serial, the default.
	concurrency int
	// raceBuilt: the binary was built with -race.
	raceBuilt bool
	// chaosLayout is CG_CHAOS_LAYOUT: the layout of every group a
	// scenario creates, "" (member, cg's default: no --layout flag) or
	// "partition".
	chaosLayout string
)

// layoutEnv names the environment variable that sets chaosLayout.
const layoutEnv = "CG_CHAOS_LAYOUT"

// parseLayout reads CG_CHAOS_LAYOUT: "" and "member" are the member
// layout, created as cg creates it by default.
func parseLayout(v string) (string, error) {
	switch v {
	case "", "member":
		return "", nil
	case "partition":
		return v, nil
	}
	return "", fmt.Errorf("chaos: %s=%q: want member (the default) or partition", layoutEnv, v)
}

func TestMain(m *testing.M) {
	if d, err := time.ParseDuration(os.Getenv(hogEnv)); err == nil {
		spin(d) // a CPU hog of TestNoFalseFailovers
		os.Exit(0)
	}
	flag.Parse()
	var err error
	if chaosLayout, err = parseLayout(os.Getenv(layoutEnv)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if testing.Short() {
		os.Exit(m.Run()) // the scenarios skip themselves
	}
	dir, err := os.MkdirTemp("", "cg-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// -race costs a few seconds of linking (the compile is cached by the
	// e2e build) and roughly doubles the members' CPU; CG_CHAOS_RACE=0
	// skips it on a machine that cannot afford it.
	raceBuilt = os.Getenv("CG_CHAOS_RACE") != "0"
	if v := os.Getenv("CG_CHAOS_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "chaos: CG_CHAOS_CONCURRENCY=%q: want a whole number, 1 or more, such as 8\n", v)
			os.Exit(2)
		}
		concurrency = n
		if n > 1 {
			failoverLimit += 300 * time.Millisecond
		}
	}
	start := time.Now()
	if cgBin, err = clitest.Build(dir, raceBuilt); err != nil {
		fmt.Fprintln(os.Stderr, "chaos: building cg:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	buildTook := time.Since(start)
	help, err := exec.Command(cgBin, "static", "consume", "--help").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chaos: cg static consume --help: %v\n%s", err, help)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	hasPinnedTTL = bytes.Contains(help, []byte("--pinned-ttl"))
	hasLivenessCheck = bytes.Contains(help, []byte("--liveness-check"))
	code := m.Run()
	printReport(buildTook)
	os.RemoveAll(dir)
	os.Exit(code)
}

// needBinary skips a scenario in -short mode.
func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || cgBin == "" {
		t.Skip("chaos scenarios run the built binary; skipped with -short")
	}
}
