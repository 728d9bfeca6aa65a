package check_test

// Golden files for cg check's human output: healthy, warnings, critical
// findings and a missing stream. go test ./cmd/check -run Golden -update
// rewrites them.

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
)

// golden runs cg check with args, wants exit code want, and compares the
// normalised output with testdata/<name>.golden.
func (e *env) golden(name string, want int, args ...string) {
	e.t.Helper()
	r := e.run(append([]string{"check"}, args...)...)
	if r.Code != want || r.Err != "" {
		e.t.Errorf("%s: cg check %v: exit %d (want %d), stderr %q", name, args, r.Code, want, r.Err)
	}
	clitest.Golden(e.t, name, clitest.NormalizeHuman(r.Out))
}

func TestGoldenCheckStatic(t *testing.T) {
	e := newEnv(t)
	e.partitioned("ORDERS", 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2") // m1 0-1, m2 2-3

	e.golden("check-static-never-joined", 1, "ORDERS", "g") // WARNING: a member with no instance, twice

	e.join("static", "ORDERS", "g", "m1")
	m2 := e.join("static", "ORDERS", "g", "m2")
	e.eventually(0, "", "", "ORDERS", "g")
	e.golden("check-static-ok", 0, "ORDERS", "g")

	m2.Stop()
	e.eventually(1, "member-no-instance", "m2", "ORDERS", "g")
	e.publishTo("orders", 2, 4)
	e.eventually(2, "partition-unserved", "m2", "ORDERS", "g")
	e.golden("check-static-critical", 2, "ORDERS", "g") // CRITICAL: m2's partitions wait with nobody serving

	e.golden("check-stream-missing", 2, "NOPE")
	e.golden("check-group-missing", 2, "ORDERS", "nope")
}

func TestGoldenCheckElastic(t *testing.T) {
	e := newEnv(t)
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*"}}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("elastic", "create", "EV", "eg", "4", "--filter", "ev.*:1")
	e.golden("check-elastic-unowned", 1, "EV", "eg")

	e.mustRun("elastic", "add", "EV", "eg", "m1", "m2")
	e.publishTo("ev", 3, 4)
	e.eventually(2, "partition-unserved", "m2", "EV", "eg")
	e.golden("check-elastic-critical", 2, "EV", "eg")

	e.join("elastic", "EV", "eg", "m1")
	e.join("elastic", "EV", "eg", "m2")
	e.eventually(0, "", "", "EV", "eg")
	e.golden("check-elastic-ok", 0, "EV", "eg")
}
