package clitest

// Golden files: a test's human output kept in testdata/<name>.golden next
// to the test, compared on every run and rewritten with -update.

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// update is the -update flag of every test binary that imports clitest:
// go test ./cmd/group -run Golden -update rewrites the golden files.
var update = flag.Bool("update", false, "rewrite testdata/*.golden with the output the tests see")

// Replacer rewrites one thing that varies run to run (a time, an age, a
// pin id, a port) into a fixed placeholder before a golden comparison.
type Replacer struct {
	Re   *regexp.Regexp
	With string
}

// Replace returns a Replacer of what matches pattern by with.
func Replace(pattern, with string) Replacer {
	return Replacer{Re: regexp.MustCompile(pattern), With: with}
}

// Normalize applies the replacers in order.
func Normalize(s string, rs ...Replacer) string {
	for _, r := range rs {
		s = r.Re.ReplaceAllString(s, r.With)
	}
	return s
}

// Volatile is what varies run to run in cg's human output, each replaced
// by a fixed placeholder: RFC 3339 times, wall-clock times, ages and
// durations, pin ids (the 8 characters shown before "for <age>"),
// loopback ports and the embedded server's version.
var Volatile = []Replacer{
	Replace(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`, "<TIME>"),
	Replace(`\b\d\d:\d\d:\d\d(\.\d+)?\b`, "<CLOCK>"),
	Replace(`\b\d+(\.\d+)?(ns|µs|ms|s|m|h)(\d+(\.\d+)?(ms|s|m))*\b`, "<DUR>"),
	Replace(`\b[A-Za-z0-9]{8} for <DUR>`, "<PIN> for <DUR>"),
	Replace(`127\.0\.0\.1:\d+`, "127.0.0.1:<PORT>"),
	Replace(`nats-server v?\d+\.\d+\.\d+\S*`, "nats-server <VERSION>"),
}

var spaces = regexp.MustCompile(`  +`)

// NormalizeHuman applies Volatile; where that replaced anything, a table
// column holding it may be padded differently from run to run, so runs of
// two or more spaces then become two (output with nothing volatile keeps
// its exact alignment).
func NormalizeHuman(s string) string {
	n := Normalize(s, Volatile...)
	if n != s {
		n = spaces.ReplaceAllString(n, "  ")
	}
	return n
}

// Golden compares got with testdata/<name>.golden (after no change:
// normalise before calling) and fails the test with a line diff when they
// differ; with -update it writes got there instead.
func Golden(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden %s: %v (run go test with -update to write it)", path, err)
	}
	if string(want) != got {
		t.Errorf("output differs from %s (- golden, + now; go test -update rewrites it):\n%s", path, Diff(string(want), got))
	}
}

// Diff is a line diff of want and got (longest common subsequence):
// unchanged lines start with two spaces, removed with "- ", added with "+ ".
func Diff(want, got string) string {
	a, b := strings.Split(want, "\n"), strings.Split(got, "\n")
	// lcs[i][j]: length of the common subsequence of a[i:] and b[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintf(&sb, "  %s\n", a[i])
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] > lcs[i+1][j]):
			fmt.Fprintf(&sb, "+ %q\n", b[j])
			j++
		default:
			fmt.Fprintf(&sb, "- %q\n", a[i])
			i++
		}
	}
	return sb.String()
}
