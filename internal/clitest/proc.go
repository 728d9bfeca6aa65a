package clitest

// The re-exec runner: the test binary re-runs itself as cg, giving a real
// process with real exit codes and a standard input that is not a terminal.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// childEnv marks a run of the test binary as a cg invocation.
const childEnv = "CG_TEST_RUN_CLI"

// Main is a test package's TestMain: it runs cg (cgMain is cmd.Main,
// passed in to keep this package below cmd) when the binary was started
// as cg by Exec, and the tests otherwise.
func Main(m *testing.M, cgMain func() int) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cgMain())
	}
	os.Exit(m.Run())
}

// Exec runs cg, as a process of the test binary (see Main), with args and env as its whole environment (plus a private
// HOME, so no real NATS context is read); it fails the test if cg has not
// ended within 20s.
func Exec(t testing.TB, env []string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append([]string{childEnv + "=1", "HOME=" + t.TempDir(), "NO_COLOR=1"}, env...)
	if v := os.Getenv("GORACE"); v != "" {
		c.Env = append(c.Env, "GORACE="+v)
	}
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	start := time.Now()
	err := c.Run()
	r := Result{Out: out.String(), Err: errOut.String(), Took: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("cg %q hung: killed after %s\nstderr: %s", args, r.Took, r.Err)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("cg %q: %v", args, err)
	}
	r.Code = c.ProcessState.ExitCode()
	return r
}

// Build builds the cg binary (by its import path, so it works from any
// package of the module) into dir, with the race detector if race, for
// suites that run the real binary and signal it; it returns the binary's
// path.
func Build(dir string, race bool) (string, error) {
	bin := filepath.Join(dir, "cg")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, "github.com/cg-dev/cg")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	return bin, build.Run()
}
