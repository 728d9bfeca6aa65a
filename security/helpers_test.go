package security

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

// childEnv marks a run of this test binary as a cg invocation: the
// packages here sit outside cmd/, so cmd/internal's in-process helpers are
// out of reach and each command runs as a real process, with real exit
// codes and a standard input that is not a terminal.
const childEnv = "CG_SECURITY_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		os.Exit(cmd.Main())
	}
	os.Exit(m.Run())
}

type result struct {
	Out, Err string
	Code     int
	Took     time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout: %s\nstderr: %s", r.Code, r.Took.Round(time.Millisecond), r.Out, r.Err)
}

// run runs cg with args and env as its whole environment (plus a private
// HOME, so no real NATS context is read); it fails the test if cg has not
// ended within 20s.
func run(t *testing.T, env []string, args ...string) result {
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
	r := result{Out: out.String(), Err: errOut.String(), Took: time.Since(start)}
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
