//go:build unix

package worker

import (
	"bytes"
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"cat", []string{"cat"}},
		{"  python3   worker.py  -v ", []string{"python3", "worker.py", "-v"}},
		{`sh -c 'echo "$X" | wc -l'`, []string{"sh", "-c", `echo "$X" | wc -l`}},
		{`a "b c" d`, []string{"a", "b c", "d"}},
		{`a "b \"c\" \\ \$ \x"`, []string{"a", `b "c" \ $ \x`}},
		{`a\ b c\'d`, []string{"a b", "c'd"}},
		{`''`, []string{""}},
		{`x'y'"z"w`, []string{"xyzw"}},
		{"a \\\nb", []string{"a", "b"}},
		{"a\tb\nc", []string{"a", "b", "c"}},
		{`'it''s'`, []string{"its"}},
		{`*.txt ~ a=b`, []string{"*.txt", "~", "a=b"}},
	} {
		got, err := Split(c.in)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"", "no command"},
		{" \t\n", "no command"},
		{"sh -c 'x", "unbalanced single quote"},
		{`sh -c "x`, "unbalanced double quote"},
		{`sh "x\"`, "unbalanced double quote"},
		{`cat \`, "lone backslash"},
		{"cat | wc", "shell syntax"},
		{"a; b", "shell syntax"},
		{"a > f", "shell syntax"},
		{"echo $HOME", "shell syntax"},
		{"a && b", "shell syntax"},
		{"echo `x`", "shell syntax"},
	} {
		if got, err := Split(c.in); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Split(%q) = %q, %v; want an error with %q", c.in, got, err, c.want)
		}
	}
}

// Header names to variable names and back, for every byte and at random.
func TestHeaderNameRoundTrip(t *testing.T) {
	for _, c := range []struct{ name, enc string }{
		{"Cg-Key", "Cg_2DKey"},
		{"traceparent", "traceparent"},
		{"X_Y", "X_5FY"},
		{"a.b c", "a_2Eb_20c"},
		{"é", "_C3_A9"},
	} {
		if got := EncodeHeaderName(c.name); got != c.enc {
			t.Errorf("EncodeHeaderName(%q) = %q, want %q", c.name, got, c.enc)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	names := []string{""}
	for b := range 256 {
		names = append(names, string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"_")
	}
	for range 2000 {
		n := make([]byte, r.IntN(12))
		for i := range n {
			n[i] = byte(r.IntN(256))
		}
		names = append(names, string(n))
	}
	seen := map[string]string{}
	for _, name := range names {
		enc := EncodeHeaderName(name)
		for i := 0; i < len(enc); i++ {
			c := enc[i]
			if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
				t.Fatalf("EncodeHeaderName(%q) = %q: byte %q cannot be in a variable name", name, enc, c)
			}
		}
		if strings.Contains(enc, envHdrIndexed) {
			t.Fatalf("EncodeHeaderName(%q) = %q holds the index separator", name, enc)
		}
		if other, ok := seen[enc]; ok && other != name {
			t.Fatalf("%q and %q both encode to %q", name, other, enc)
		}
		seen[enc] = name
		if back, ok := DecodeHeaderName(enc); !ok || back != name {
			t.Fatalf("DecodeHeaderName(%q) = %q, %v; want %q", enc, back, ok, name)
		}
	}
	for _, bad := range []string{"_", "_4", "_4g", "_4a", "a-b", "a__2"} {
		if got, ok := DecodeHeaderName(bad); ok {
			t.Errorf("DecodeHeaderName(%q) = %q: not something EncodeHeaderName writes", bad, got)
		}
	}
}

// Headers, several values included, survive the trip through variables.
func TestHeaderEnvRoundTrip(t *testing.T) {
	h := map[string][]string{
		"Cg-Key":      {"k7"},
		"multi":       {"1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11"},
		"X_Y.z":       {"a=b", ""},
		"traceparent": {"00-abc-def-01"},
	}
	env := append([]string{"PATH=/bin", "CG_STREAM=S"}, HeaderEnv(h)...)
	slices.Reverse(env) // any order
	got := HeadersFromEnv(env)
	if !maps.EqualFunc(got, h, slices.Equal) {
		t.Fatalf("round trip: %v, want %v", got, h)
	}
	if !slices.Contains(env, "CG_HDR_multi__11=11") || !slices.Contains(env, "CG_HDR_Cg_2DKey=k7") {
		t.Fatalf("variables %q", env)
	}
}

func TestMessageEnv(t *testing.T) {
	t.Setenv("CG_HDR_Stale", "from a parent cg")
	t.Setenv("CG_KEY", "parent key")
	env := MessageEnv(Meta{Stream: "ORDERS", Group: "g", Member: "m1", Subject: "orders.k7", Partition: 3, Seq: 42, Delivered: 2,
		Headers: map[string][]string{"A": {"x"}}})
	for _, want := range []string{"CG_STREAM=ORDERS", "CG_GROUP=g", "CG_MEMBER=m1", "CG_SUBJECT=orders.k7", "CG_PARTITION=3", "CG_STREAM_SEQ=42", "CG_DELIVERED=2", "CG_HDR_A=x"} {
		if !slices.Contains(env, want) {
			t.Errorf("no %s in %q", want, env)
		}
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "CG_HDR_Stale=") || strings.HasPrefix(kv, "CG_KEY=") {
			t.Errorf("%s: inherited, or a key that cannot be read", kv)
		}
	}
	if !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "PATH=") }) {
		t.Errorf("cg's own environment not passed on")
	}
}

func TestExecOutcomes(t *testing.T) {
	var out bytes.Buffer
	o := NewOutput(&out)
	e := &Exec{Argv: []string{"sh", "-c", `cat; echo; echo "to err $CG_X" >&2; printf 'no newline'; exit "$CODE"`}, Timeout: 10 * time.Second, Out: o}
	if err := e.Run([]byte("body"), []string{"CODE=0", "CG_X=1"}, "[p1 seq 2] "); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[p1 seq 2] body\n", "[p1 seq 2] to err 1\n", "[p1 seq 2] no newline\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
	if err := e.Run(nil, []string{"CODE=3"}, ""); err == nil || err.Error() != "exit status 3" {
		t.Errorf("exit 3: %v", err)
	}
	k := &Exec{Argv: []string{"sh", "-c", "kill -TERM $$"}, Timeout: 10 * time.Second, Out: o}
	if err := k.Run(nil, nil, ""); err == nil || !strings.Contains(err.Error(), "signal terminated") {
		t.Errorf("killed: %v", err)
	}
	h := &Exec{Argv: []string{"sleep", "1000"}, Timeout: 100 * time.Millisecond, Out: o}
	start := time.Now()
	if err := h.Run(nil, nil, ""); err == nil || !strings.Contains(err.Error(), "timed out after 100ms") || time.Since(start) > 5*time.Second {
		t.Errorf("hung: %v after %s", err, time.Since(start))
	}
}

func TestPoisonError(t *testing.T) {
	if !IsPoison(&PoisonError{Err: errors.New("x")}) || IsPoison(errors.New("x")) {
		t.Fatal("IsPoison")
	}
}

func TestLineBody(t *testing.T) {
	for _, body := range [][]byte{[]byte("héllo"), {0xff, 0, 1}, nil} {
		l := NewLine(1, Meta{}, body)
		if got, err := l.Body(); err != nil || !bytes.Equal(got, body) || l.Base64 == (string(body) == "héllo" || body == nil) {
			t.Errorf("body %q: line %+v gives %q, %v", body, l, got, err)
		}
	}
}

// A long-lived worker that dies, stops answering or stops reading fails
// the messages it holds, within the timeout, and the next message gets a
// new one.
func TestLongFailures(t *testing.T) {
	var out bytes.Buffer
	o := NewOutput(&syncWriter{w: &out})
	for _, c := range []struct {
		name, script string
		data         []byte
		want         string
	}{
		{"dies", "read l; echo going >&2; exit 3", []byte("x"), "the worker ended (exit status 3) before answering"},
		{"silent", "cat > /dev/null", []byte("x"), "no result within 300ms"},
		{"deaf", "sleep 1000", bytes.Repeat([]byte("x"), 1<<20), "read no message within 300ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &Long{Argv: []string{"sh", "-c", c.script}, Timeout: 300 * time.Millisecond, Out: o}
			defer l.Close(time.Second)
			start := time.Now()
			if err := l.Do(Meta{}, c.data); err == nil || !strings.Contains(err.Error(), c.want) || time.Since(start) > 5*time.Second {
				t.Fatalf("Do: %v after %s, want %q", err, time.Since(start), c.want)
			}
			// A new run takes the next message (and fails it the same way).
			if err := l.Do(Meta{}, c.data); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("second Do: %v", err)
			}
			l.mu.Lock()
			runs := l.runs
			l.mu.Unlock()
			if runs != 2 {
				t.Fatalf("%d runs, want 2 (restarted once)", runs)
			}
		})
	}
	if !strings.Contains(out.String(), "[worker #1] going") {
		t.Fatalf("stderr not prefixed: %q", out.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
