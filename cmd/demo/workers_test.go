//go:build unix

package demo_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/internal/clitest"
)

// cg demo workers, shortened: every message handled by one run of the
// shell worker, each run told the message's key, nothing lost, order kept,
// counted from the scripts' own record.
func TestDemoWorkers(t *testing.T) {
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "workers", "--phase", "2s", "--keys", "6", "--rate", "100/s")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.Verdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	w := v.Workers
	if !v.OK || w == nil || v.Lost != 0 || v.OrderViolations != 0 || v.Published == 0 || v.Processed != v.Published ||
		w.Runs < int(v.Published) || w.Runs != int(v.Handled) || w.KeyMismatches != 0 || len(w.Failed) != 0 {
		t.Fatalf("verdict %+v (workers %+v)\nstderr:\n%s", v, w, r.Err)
	}
	if v.ByInstance["m1"] == 0 || v.ByInstance["m2"] == 0 {
		t.Fatalf("handled by %v: both members' workers must run", v.ByInstance)
	}
	for _, want := range []string{"m1's script: [p", "m2's script: [p", "--exec"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
}
