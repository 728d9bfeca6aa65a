// Package cliproc runs the real cg command tree as a separate process for
// test packages that sit outside cmd/ (and so cannot reach cmd/internal's
// in-process helpers): the test binary re-runs itself as cg, giving real
// exit codes and a standard input that is not a terminal.
package cliproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
)

// childEnv marks a run of the test binary as a cg invocation.
const childEnv = "CG_TEST_RUN_CLI"

// Main is a test package's TestMain: it runs cg when the binary was
// started as cg, and the tests otherwise.
func Main(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cmd.Main())
	}
	os.Exit(m.Run())
}

// Result is what one cg process printed and returned.
type Result struct {
	Out, Err string
	Code     int
	Took     time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout: %q\nstderr: %q", r.Code, r.Took.Round(time.Millisecond), r.Out, r.Err)
}

// Run runs cg with args and env as its whole environment (plus a private
// HOME, so no real NATS context is read); it fails the test if cg has not
// ended within 20s.
func Run(t testing.TB, env []string, args ...string) Result {
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
