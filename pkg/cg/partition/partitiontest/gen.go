// Package partitiontest draws random subjects, filters, transforms and
// member lists for the tests of package partition and of the engine. Every
// generator takes the test's *rand.Rand, so one logged seed reproduces a
// run.
package partitiontest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Seed returns the seed a randomized test uses: CG_TEST_SEED when set (to
// replay a failure), otherwise the clock. It is logged either way.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CG_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CG_TEST_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d (replay with CG_TEST_SEED=%d)", seed, seed)
	return seed
}

// Rand returns the generator a seed stands for.
func Rand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// tokenRunes are the pools a random token draws from: ASCII letters and
// digits, punctuation that is legal inside a NATS token, and non-ASCII
// runes of 2, 3 and 4 UTF-8 bytes. None is '.', '*', '>' or white space.
var tokenRunes = [][]rune{
	[]rune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
	[]rune("0123456789"),
	[]rune("-_=+!@#$%^&()[]{}|:;'\",<?/~`\\"),
	[]rune("éüßøΩπжЖ"),
	[]rune("日本語中文한국"),
	[]rune("🚀🙂𝄞"),
}

// Token returns a valid, non-empty NATS subject token: mostly short
// (one or two characters is common, to hit near-empty keys), sometimes long.
func Token(r *rand.Rand) string {
	var n int
	switch r.IntN(10) {
	case 0, 1, 2:
		n = 1
	case 3:
		n = 2
	case 9:
		n = 10 + r.IntN(30)
	default:
		n = 1 + r.IntN(9)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		pool := tokenRunes[0]
		switch x := r.IntN(20); {
		case x < 4:
			pool = tokenRunes[1]
		case x < 6:
			pool = tokenRunes[2]
		case x < 8:
			pool = tokenRunes[3]
		case x < 9:
			pool = tokenRunes[4]
		case x < 10:
			pool = tokenRunes[5]
		}
		b.WriteRune(pool[r.IntN(len(pool))])
	}
	return b.String()
}

// Literal returns a short lower-case literal token for a filter.
func Literal(r *rand.Rand) string {
	const letters = "abcdefghijklmnopqrstuvwxyz"
	n := 1 + r.IntN(5)
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return string(b)
}

// Filter returns a source filter with exactly wild '*' tokens, literal
// tokens mixed in at random, and a trailing '>' one time in five. With
// prefix set, the first token is that literal.
func Filter(r *rand.Rand, wild int, prefix string) string {
	var toks []string
	if prefix != "" {
		toks = append(toks, prefix)
	}
	for placed := 0; placed < wild; {
		if r.IntN(3) == 0 {
			toks = append(toks, Literal(r))
			continue
		}
		toks = append(toks, "*")
		placed++
	}
	if r.IntN(5) == 0 {
		toks = append(toks, ">")
	}
	return strings.Join(toks, ".")
}

// Subject returns a subject matching filter: each '*' becomes a random
// token and a trailing '>' one to three random tokens.
func Subject(r *rand.Rand, filter string) string {
	var toks []string
	for _, ft := range strings.Split(filter, ".") {
		switch ft {
		case "*":
			toks = append(toks, Token(r))
		case ">":
			for n := 1 + r.IntN(3); n > 0; n-- {
				toks = append(toks, Token(r))
			}
		default:
			toks = append(toks, ft)
		}
	}
	return strings.Join(toks, ".")
}

// Wildcards returns a random non-empty selection of the 1-based
// indexes 1..wild in random order; once in a while an index is repeated,
// which the server accepts and hashes twice.
func Wildcards(r *rand.Rand, wild int) []int {
	idx := r.Perm(wild)
	out := make([]int, 0, wild+1)
	for _, i := range idx[:1+r.IntN(wild)] {
		out = append(out, i+1)
	}
	if r.IntN(20) == 0 {
		out = append(out, out[r.IntN(len(out))])
	}
	return out
}

// N returns a partition count from 1 to 1024, favouring small ones.
func N(r *rand.Rand) int {
	switch r.IntN(4) {
	case 0:
		return 1 + r.IntN(8)
	case 1:
		return 1 + r.IntN(64)
	default:
		return 1 + r.IntN(1024)
	}
}

// TransformDest writes a {{partition()}} destination for filter by hand,
// independently of ElasticTransformDestination, with the spellings the
// server accepts: partition/Partition, wildcard/Wildcard, optional spaces.
func TransformDest(r *rand.Rand, n int, filter string, wildcards []int) string {
	pname, wname, sep := "partition", "wildcard", ","
	if r.IntN(2) == 0 {
		pname = "Partition"
	}
	if r.IntN(2) == 0 {
		wname = "Wildcard"
	}
	if r.IntN(4) == 0 {
		sep = ", "
	}
	args := []string{strconv.Itoa(n)}
	for _, w := range wildcards {
		args = append(args, strconv.Itoa(w))
	}
	toks := []string{"{{" + pname + "(" + strings.Join(args, sep) + ")}}"}
	k := 0
	for _, ft := range strings.Split(filter, ".") {
		if ft == "*" {
			k++
			toks = append(toks, "{{"+wname+"("+strconv.Itoa(k)+")}}")
			continue
		}
		toks = append(toks, ft)
	}
	return strings.Join(toks, ".")
}

// TransformCase is one randomly drawn partitioning transform.
type TransformCase struct {
	Filter    string
	N         int
	Wildcards []int // empty: the whole-subject partition(N) shorthand
}

// Transform draws a filter with 1 to 4 wildcards, N from 1 to 1024
// and a wildcard selection, or (one time in six) the whole-subject shorthand.
func Transform(r *rand.Rand, prefix string) TransformCase {
	wild := 1 + r.IntN(4)
	tc := TransformCase{Filter: Filter(r, wild, prefix), N: N(r)}
	if r.IntN(6) != 0 {
		tc.Wildcards = Wildcards(r, wild)
	}
	return tc
}

// Members returns 0 to maxM names drawn from a small pool, so that
// duplicates and byte-order surprises (m1 < m10 < m2, B < a) are common.
func Members(r *rand.Rand, maxM int) []string {
	pool := []string{"m0", "m1", "m2", "m10", "m11", "m20", "a", "B", "b", "é", "Ω", "w-1", "w_1", "z"}
	var out []string
	for m := r.IntN(maxM + 1); m > 0; m-- {
		if r.IntN(4) == 0 {
			out = append(out, fmt.Sprintf("w%d", r.IntN(400)))
		} else {
			out = append(out, pool[r.IntN(len(pool))])
		}
	}
	return out
}
