package group_test

// Golden files for the --json output of info, member-info, step-down and
// delete, static and elastic, unpinned and pinned: the exact bytes scripts read, so that the
// views the commands marshal keep their field names, order and encoding.
// go test ./cmd/group -run GoldenJSON -update rewrites them.

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
)

// jsonVolatile is what varies run to run in the JSON output, beyond
// clitest.Volatile: pin ids and lag ages in seconds.
var jsonVolatile = append([]clitest.Replacer{
	clitest.Replace(`"pin_id": "[^"]+"`, `"pin_id": "<PIN>"`),
	clitest.Replace(`"previous_pin_id": "[^"]+"`, `"previous_pin_id": "<PIN>"`),
	clitest.Replace(`"age_seconds": [0-9.e+-]+`, `"age_seconds": "<AGE>"`),
}, clitest.Volatile...)

// goldenJSON normalises a command's --json output and compares it with its golden file.
func goldenJSON(t *testing.T, name string, r clitest.Result) {
	t.Helper()
	if r.Err != "" {
		t.Errorf("%s: stderr %q", name, r.Err)
	}
	clitest.Golden(t, name, clitest.Normalize(r.Out, jsonVolatile...))
}

func TestGoldenJSONStatic(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.publishPerPartition(4, 2)

	goldenJSON(t, "static-info-unpinned-json", e.mustRun("static", "info", "ORDERS", "g", "--json"))
	goldenJSON(t, "static-member-info-unpinned-json", e.mustRun("static", "member-info", "ORDERS", "g", "m1", "--json"))
	goldenJSON(t, "static-step-down-nothing-pinned-json", e.mustRun("static", "step-down", "ORDERS", "g", "m1", "--json"))

	e.joinAll("static", "ORDERS", "g", "m1", "m2")
	e.settled("static", "ORDERS", "g", 2, 8)
	goldenJSON(t, "static-info-pinned-json", e.mustRun("static", "info", "ORDERS", "g", "--json"))
	goldenJSON(t, "static-member-info-pinned-json", e.mustRun("static", "member-info", "ORDERS", "g", "m1", "--json"))
	goldenJSON(t, "static-step-down-pinned-json", e.mustRun("static", "step-down", "ORDERS", "g", "m2", "--json"))
	goldenJSON(t, "static-delete-json", e.mustRun("static", "delete", "ORDERS", "g", "--force", "--json"))
}

func TestGoldenJSONElastic(t *testing.T) {
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

	// Sourcing is asynchronous: the unpinned views pin the sourced backlog.
	e.sourced("EVENTS", "e", 5)
	goldenJSON(t, "elastic-info-unpinned-json", e.mustRun("elastic", "info", "EVENTS", "e", "--json"))
	goldenJSON(t, "elastic-member-info-unpinned-json", e.mustRun("elastic", "member-info", "EVENTS", "e", "m1", "--json"))
	goldenJSON(t, "elastic-step-down-nothing-pinned-json", e.mustRun("elastic", "step-down", "EVENTS", "e", "m1", "--json"))

	e.joinAll("elastic", "EVENTS", "e", "m1", "m2")
	e.settled("elastic", "EVENTS", "e", 2, 5)
	goldenJSON(t, "elastic-info-pinned-json", e.mustRun("elastic", "info", "EVENTS", "e", "--json"))
	goldenJSON(t, "elastic-member-info-pinned-json", e.mustRun("elastic", "member-info", "EVENTS", "e", "m1", "--json"))
	goldenJSON(t, "elastic-step-down-pinned-json", e.mustRun("elastic", "step-down", "EVENTS", "e", "m2", "--json"))
	goldenJSON(t, "elastic-delete-json", e.mustRun("elastic", "delete", "EVENTS", "e", "--force", "--json"))
}
