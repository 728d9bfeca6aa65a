package elastic_test

// Golden files for the --json output of add (also --minimal and
// --dry-run), drop, create-mapping and delete-mapping: the exact bytes
// scripts read, so that the views these commands marshal keep their field
// names, order and encoding.
// go test ./cmd/elastic -run GoldenJSON -update rewrites them.

import (
	"testing"

	"github.com/cg-dev/cg/internal/clitest"
)

// goldenJSON normalises a command's --json output and compares it with its golden file.
func goldenJSON(t *testing.T, name string, r clitest.Result) {
	t.Helper()
	if r.Err != "" {
		t.Errorf("%s: stderr %q", name, r.Err)
	}
	clitest.Golden(t, name, clitest.Normalize(r.Out, clitest.Volatile...))
}

func TestGoldenJSONMembership(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1")

	goldenJSON(t, "add-json", e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2", "--json"))
	goldenJSON(t, "add-unchanged-json", e.mustRun("elastic", "add", "ORDERS", "g", "m2", "m3", "--json"))
	goldenJSON(t, "drop-json", e.mustRun("elastic", "drop", "ORDERS", "g", "m3", "--json"))
	goldenJSON(t, "add-dry-run-json", e.mustRun("elastic", "add", "ORDERS", "g", "m5", "--dry-run", "--json"))
	goldenJSON(t, "add-minimal-dry-run-json", e.mustRun("elastic", "add", "ORDERS", "g", "m5", "--minimal", "--dry-run", "--json"))
	goldenJSON(t, "add-minimal-json", e.mustRun("elastic", "add", "ORDERS", "g", "m4", "--minimal", "--json"))
	goldenJSON(t, "create-mapping-json", e.mustRun("elastic", "create-mapping", "ORDERS", "g", "a:0,1", "b:2,3", "--json"))
	goldenJSON(t, "delete-mapping-json", e.mustRun("elastic", "delete-mapping", "ORDERS", "g", "--json"))
}
