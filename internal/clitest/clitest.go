// Package clitest runs the real cg command tree in tests: in process
// (Run, RunCtx, Start) or as a process of the test binary (Main, Exec),
// against an embedded server (Server), with one Eventually for polling.
package clitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/iostreams"
)

// RunFunc is cmd.Run; passed in to keep this package below cmd.
type RunFunc func(ctx context.Context, args []string, ios *iostreams.IOStreams, env func(string) string) int

// Result is what one invocation printed and returned, and (for Exec) how
// long it took.
type Result struct {
	Out, Err string
	Code     int
	Took     time.Duration
}

func (r Result) String() string {
	return fmt.Sprintf("exit %d after %s\nstdout: %q\nstderr: %q", r.Code, r.Took.Round(time.Millisecond), r.Out, r.Err)
}

// Env returns an environment lookup for the given KEY=VALUE pairs.
func Env(pairs ...string) func(string) string {
	m := map[string]string{}
	for _, p := range pairs {
		k, v, _ := strings.Cut(p, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// Run runs args with env and a 60s deadline.
func Run(t testing.TB, run RunFunc, env func(string) string, args ...string) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return RunCtx(ctx, run, env, args...)
}

// RunCtx runs args until done or ctx is cancelled (as a signal would).
func RunCtx(ctx context.Context, run RunFunc, env func(string) string, args ...string) Result {
	ios, _, out, errOut := iostreams.Test()
	code := run(ctx, args, ios, env)
	return Result{Out: out.String(), Err: errOut.String(), Code: code}
}

// SyncBuffer is a bytes.Buffer safe for a writer and a concurrent reader.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines decodes newline-delimited JSON into maps.
func Lines(t testing.TB, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// Async is an invocation running in the background.
type Async struct {
	Out, Err *SyncBuffer
	cancel   context.CancelFunc
	done     chan int
	code     int
}

// Start runs args in the background; Stop cancels it as SIGINT would.
func Start(run RunFunc, env func(string) string, args ...string) *Async {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	a := &Async{Out: &SyncBuffer{}, Err: &SyncBuffer{}, cancel: cancel, done: make(chan int, 1)}
	ios := &iostreams.IOStreams{In: &bytes.Buffer{}, Out: a.Out, ErrOut: a.Err}
	go func() { a.done <- run(ctx, args, ios, env) }()
	return a
}

// Stop interrupts the invocation and returns its exit code.
func (a *Async) Stop(t testing.TB) int {
	t.Helper()
	a.cancel()
	return a.Wait(t)
}

// Wait waits up to 30s for the invocation to end by itself.
func (a *Async) Wait(t testing.TB) int {
	t.Helper()
	if a.done == nil {
		return a.code
	}
	select {
	case a.code = <-a.done:
		a.done = nil
		return a.code
	case <-time.After(30 * time.Second):
		t.Fatalf("command did not end within 30s; stderr so far:\n%s", a.Err.String())
		return -1
	}
}
