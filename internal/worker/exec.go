package worker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"
)

// Exec starts argv once per message (or batch).
type Exec struct {
	Argv    []string
	Timeout time.Duration // > 0
	Out     *Output
}

// Run runs the command with stdin and env (MessageEnv, BatchEnv); its
// stdout and stderr go to e.Out, each line behind prefix. nil: it exited 0.
// Any other exit, a death by signal, or running past e.Timeout is an
// error; on a timeout the command's whole process group is killed. When
// the command exits, whatever it left running in its process group is
// killed too, so no process outlives its message.
func (e *Exec) Run(stdin []byte, env []string, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), e.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.Argv[0], e.Argv[1:]...)
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(stdin)
	stdout, stderr := e.Out.Prefixed(prefix), e.Out.Prefixed(prefix)
	defer stdout.Close()
	defer stderr.Close()
	cmd.Stdout, cmd.Stderr = stdout, stderr
	ownGroup(cmd)
	cmd.Cancel = func() error { return killGroup(cmd) }
	// A grandchild that keeps the output pipes open must not hold the
	// message: its group is killed below, and Wait stops waiting for it.
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	if cmd.Process != nil {
		_ = killGroup(cmd)
	}
	return exitError(err, errors.Is(ctx.Err(), context.DeadlineExceeded), e.Timeout)
}

// exitError words how a command ended.
func exitError(err error, timedOut bool, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	if timedOut {
		return fmt.Errorf("timed out after %s (--exec-timeout): its process group was killed", timeout)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return fmt.Errorf("killed by signal %s", ws.Signal())
		}
		if ee.ExitCode() >= 0 {
			return fmt.Errorf("exit status %d", ee.ExitCode())
		}
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited 0 but left output pipes open: the exit counts.
		return nil
	}
	return err
}

// BatchEnv is the environment of a command started for a batch: cg's own
// environment, the group's names and the batch's number, size and attempt.
func BatchEnv(stream, group, member string, number uint64, size, attempt int) []string {
	return append(baseEnv(), EnvStream+"="+stream, EnvGroup+"="+group, EnvMember+"="+member,
		fmt.Sprintf("%s=%d", EnvBatch, number), fmt.Sprintf("%s=%d", EnvBatchSize, size), fmt.Sprintf("%s=%d", EnvAttempt, attempt))
}

// BatchInput is a batch's stdin: one Line per message, in order.
func BatchInput(lines []Line) ([]byte, error) {
	var b bytes.Buffer
	for _, l := range lines {
		enc, err := encodeLine(l)
		if err != nil {
			return nil, err
		}
		b.Write(enc)
	}
	return b.Bytes(), nil
}
