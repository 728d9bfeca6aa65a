package cmd

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// buildCG builds the cg binary into a temporary directory with the given
// -ldflags, as a release build stamps it.
func buildCG(t *testing.T, ldflags string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the cg binary; skipped with -short")
	}
	bin := filepath.Join(t.TempDir(), "cg")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	build := exec.Command("go", "build", "-o", bin, "-ldflags", ldflags, "github.com/cg-dev/cg")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestVersionStampedByLinker checks the linker flags that .goreleaser.yaml
// and the Makefile use still land in `cg version`.
func TestVersionStampedByLinker(t *testing.T) {
	bin := buildCG(t, "-X github.com/cg-dev/cg/cmd.Version=1.2.3 -X github.com/cg-dev/cg/cmd.Commit=abc1234")
	run := func(args ...string) string {
		t.Helper()
		c := exec.Command(bin, args...)
		c.Env = append(os.Environ(), "NO_COLOR=1")
		out, err := c.Output()
		if err != nil {
			t.Fatalf("cg %s: %v", strings.Join(args, " "), err)
		}
		return string(out)
	}

	want := "cg version 1.2.3 (commit abc1234, " + runtime.Version() + ")\n"
	if got := run("version"); got != want {
		t.Errorf("cg version = %q, want %q", got, want)
	}
	if got := run("--version"); got != want {
		t.Errorf("cg --version = %q, want %q", got, want)
	}

	var v map[string]string
	out := run("version", "--json")
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("cg version --json: %v: %q", err, out)
	}
	if v["version"] != "1.2.3" || v["commit"] != "abc1234" || v["go"] != runtime.Version() {
		t.Errorf("cg version --json = %v, want version 1.2.3, commit abc1234, go %s", v, runtime.Version())
	}
}
