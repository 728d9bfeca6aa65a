package clitest

// What the command suites share to set up a server's state and read it
// back: stored group keys, an inventory of everything on the server, and
// the shape of a command's error output.

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// Inventory lists every stream, consumer and stored group key (static and
// elastic buckets), sorted, one a line: compare two to show a refused
// command changed nothing on the server.
func Inventory(t testing.TB, js jetstream.JetStream) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for name := range js.StreamNames(ctx).Name() {
		out = append(out, "stream "+name)
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for c := range s.ConsumerNames(ctx).Name() {
			out = append(out, "consumer "+name+"/"+c)
		}
	}
	for _, b := range []string{cg.StaticBucket, cg.ElasticBucket, cg.StaticPartitionBucket, cg.ElasticPartitionBucket} {
		kv, err := js.KeyValue(ctx, b)
		if err != nil {
			continue
		}
		keys, _ := kv.Keys(ctx)
		for _, k := range keys {
			out = append(out, "key "+b+"/"+k)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// Store writes stored group configs as another tool would: bucket (made
// if missing) gets each key, value pair of kv, raw.
func Store(t testing.TB, js jetstream.JetStream, bucket string, kv ...string) {
	t.Helper()
	if len(kv)%2 != 0 {
		t.Fatalf("Store: %d arguments, want key, value pairs", len(kv))
	}
	ctx := context.Background()
	b, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(kv); i += 2 {
		if _, err := b.Put(ctx, kv[i], []byte(kv[i+1])); err != nil {
			t.Fatal(err)
		}
	}
}

// OneLine fails the test unless stderr is one line mentioning every word.
func OneLine(t testing.TB, what, stderr string, words ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) != 1 {
		t.Errorf("%s: stderr has %d lines, want one: %q", what, len(lines), stderr)
	}
	for _, w := range words {
		if !strings.Contains(stderr, w) {
			t.Errorf("%s: stderr %q does not mention %q", what, stderr, w)
		}
	}
}

// ErrorLines returns the lines of s that start with "error: ".
func ErrorLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "error: ") {
			out = append(out, l)
		}
	}
	return out
}

// WaitOut polls until cond holds for what the invocation printed on
// stdout so far, failing the test (named what) after timeout.
// The failure shows the end of both streams: what the command said
// instead tells why.
func (a *Async) WaitOut(t testing.TB, timeout time.Duration, what string, cond func(out string) bool) {
	t.Helper()
	if !Poll(nil, timeout, func() bool { return cond(a.Out.String()) }) {
		t.Fatalf("timed out after %v waiting for %s\nstdout (end):\n%s\nstderr (end):\n%s", timeout, what, tail(a.Out.String()), tail(a.Err.String()))
	}
}

// WaitErr is WaitOut for stderr.
func (a *Async) WaitErr(t testing.TB, timeout time.Duration, what string, cond func(errOut string) bool) {
	t.Helper()
	if !Poll(nil, timeout, func() bool { return cond(a.Err.String()) }) {
		t.Fatalf("timed out after %v waiting for %s\nstdout (end):\n%s\nstderr (end):\n%s", timeout, what, tail(a.Out.String()), tail(a.Err.String()))
	}
}

// tail is the last 4 KB of s.
func tail(s string) string {
	const n = 4096
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// Within waits up to d for the invocation to end by itself and returns its
// exit code, or false when it is still running (the caller words the
// failure: it knows what should have ended it).
func (a *Async) Within(t testing.TB, d time.Duration) (int, bool) {
	t.Helper()
	done := make(chan int, 1)
	go func() { done <- a.Wait(t) }()
	select {
	case code := <-done:
		return code, true
	case <-time.After(d):
		return 0, false
	}
}
