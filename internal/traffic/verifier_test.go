package traffic

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
)

func observeAll(v *Verifier, key string, who string, seqs ...uint64) []Check {
	out := make([]Check, len(seqs))
	for i, s := range seqs {
		out[i] = v.Observe(key, s, 0, who)
	}
	return out
}

func TestVerifierInOrder(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	for _, c := range observeAll(v, "a", "w", 1, 2, 3, 4, 5) {
		if c.Outcome != Fresh || c.Gap != 0 || c.Baseline {
			t.Fatalf("in-order message: %+v", c)
		}
	}
	s := v.Stats()
	if s.Processed != 5 || s.Handled != 5 || s.Duplicates+s.Violations+s.Gaps+s.Missing != 0 || s.Keys != 1 {
		t.Fatalf("stats %+v", s)
	}
	if got := v.Lost(map[string]uint64{"a": 5}); got != 0 {
		t.Fatalf("lost %d, want 0", got)
	}
	if got := v.Lost(map[string]uint64{"a": 7, "b": 3}); got != 2+3 {
		t.Fatalf("lost %d, want 5 (2 of a, all 3 of b)", got)
	}
}

func TestVerifierDuplicates(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	checks := observeAll(v, "a", "w", 1, 2, 2, 3, 1, 3)
	want := []Outcome{Fresh, Fresh, Duplicate, Fresh, Duplicate, Duplicate}
	for i, c := range checks {
		if c.Outcome != want[i] {
			t.Fatalf("message %d: %s, want %s", i, c.Outcome, want[i])
		}
	}
	s := v.Stats()
	if s.Processed != 3 || s.Handled != 6 || s.Duplicates != 3 || s.Violations != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestVerifierViolationsAndGaps(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	// 1, then 4 (gap of 2: 2 and 3 missing), then 3 (late: a violation
	// that fills a hole), then 2 (another), then 3 again (a duplicate).
	checks := observeAll(v, "a", "w", 1, 4, 3, 2, 3, 5)
	want := []Outcome{Fresh, Fresh, OutOfOrder, OutOfOrder, Duplicate, Fresh}
	for i, c := range checks {
		if c.Outcome != want[i] {
			t.Fatalf("message %d (seq %d): %s, want %s", i, c.KeySeq, c.Outcome, want[i])
		}
	}
	if checks[1].Gap != 2 {
		t.Fatalf("gap %d, want 2", checks[1].Gap)
	}
	s := v.Stats()
	if s.Processed != 5 || s.Violations != 2 || s.Duplicates != 1 || s.Gaps != 1 || s.Missing != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestVerifierMissingAndLost(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	observeAll(v, "a", "w", 1, 3, 6)
	s := v.Stats()
	if s.Gaps != 2 || s.Missing != 3 { // 2, 4, 5
		t.Fatalf("stats %+v", s)
	}
	if got := v.Lost(map[string]uint64{"a": 6}); got != 3 {
		t.Fatalf("lost %d, want 3", got)
	}
	// Published up to 4 only counts holes up to 4: 2 and 4.
	if got := v.Lost(map[string]uint64{"a": 4}); got != 2 {
		t.Fatalf("lost up to 4: %d, want 2", got)
	}
	if got := v.Distinct("a"); got != 3 {
		t.Fatalf("distinct %d", got)
	}
	observeAll(v, "a", "w", 2, 4, 5)
	if s := v.Stats(); s.Missing != 0 || s.Violations != 3 {
		t.Fatalf("after filling holes: %+v", s)
	}
	if got := v.Lost(map[string]uint64{"a": 6}); got != 0 {
		t.Fatalf("lost %d after filling", got)
	}
}

func TestVerifierGapFromStart(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	c := v.Observe("a", 3, 10, "w")
	if c.Outcome != Fresh || c.Gap != 2 || c.Baseline {
		t.Fatalf("first message at 3 from start: %+v", c)
	}
	if s := v.Stats(); s.Missing != 2 {
		t.Fatalf("missing %d, want 2", s.Missing)
	}
}

func TestVerifierMidStreamBaseline(t *testing.T) {
	v := NewVerifier(VerifierOptions{MidStream: true})
	c := v.Observe("a", 100, 1000, "w")
	if c.Outcome != Fresh || c.Gap != 0 || !c.Baseline {
		t.Fatalf("first message mid-stream: %+v", c)
	}
	observeAll(v, "a", "w", 101, 102)
	if s := v.Stats(); s.Processed != 3 || s.Gaps+s.Missing+s.Violations != 0 {
		t.Fatalf("stats %+v", s)
	}
	// Messages before the baseline are not lost for a mid-stream consumer.
	if got := v.Lost(map[string]uint64{"a": 102}); got != 0 {
		t.Fatalf("lost %d, want 0", got)
	}
	if got := v.Lost(map[string]uint64{"a": 105}); got != 3 {
		t.Fatalf("lost %d, want 3", got)
	}
	if got := v.Lost(map[string]uint64{"a": 50}); got != 0 {
		t.Fatalf("published below the baseline: lost %d, want 0", got)
	}
	// An earlier message after the baseline is out of order, and seen twice
	// is a duplicate.
	if c := v.Observe("a", 99, 999, "w"); c.Outcome != OutOfOrder {
		t.Fatalf("seq below baseline: %+v", c)
	}
	if c := v.Observe("a", 99, 999, "w"); c.Outcome != Duplicate {
		t.Fatalf("seq below baseline again: %+v", c)
	}
	if got := v.Distinct("a"); got != 4 {
		t.Fatalf("distinct %d, want 4", got)
	}
	// Each key has its own baseline.
	if c := v.Observe("b", 7, 1001, "w"); !c.Baseline || c.Gap != 0 {
		t.Fatalf("second key: %+v", c)
	}
	if s := v.Stats(); s.Keys != 2 || s.Violations != 1 || s.Duplicates != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestVerifierKeysAreIndependent(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	v.Observe("a", 1, 1, "x")
	v.Observe("b", 1, 2, "y")
	v.Observe("a", 2, 3, "x")
	v.Observe("b", 2, 4, "x")
	s := v.Stats()
	if s.Processed != 4 || s.Duplicates+s.Violations+s.Gaps != 0 {
		t.Fatalf("stats %+v", s)
	}
	if s.ByWho["x"] != 3 || s.ByWho["y"] != 1 {
		t.Fatalf("by who %v", s.ByWho)
	}
	if v.LastStreamSeq("x") != 4 || v.LastStreamSeq("y") != 2 {
		t.Fatalf("last stream seqs x=%d y=%d", v.LastStreamSeq("x"), v.LastStreamSeq("y"))
	}
	if got := v.Keys(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("keys %v", got)
	}
}

func TestVerifierUnkeyed(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	if c := v.Observe("", 1, 1, "w"); c.Outcome != Unkeyed {
		t.Fatalf("no key: %+v", c)
	}
	if c := v.Observe("a", 0, 2, "w"); c.Outcome != Unkeyed {
		t.Fatalf("seq 0: %+v", c)
	}
	if s := v.Stats(); s.Unkeyed != 2 || s.Processed != 0 || s.Handled != 2 || s.Keys != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A shuffled delivery with duplicates agrees with a naive model that keeps
// every key-seq seen.
func TestVerifierMatchesModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		mid := round%2 == 1
		v := NewVerifier(VerifierOptions{MidStream: mid})
		n := 1 + rng.IntN(40)
		var seqs []uint64
		for s := uint64(1); s <= uint64(n); s++ {
			if rng.IntN(5) != 0 { // some never arrive
				seqs = append(seqs, s)
			}
			if rng.IntN(6) == 0 { // some arrive twice
				seqs = append(seqs, s)
			}
		}
		// Swap a few neighbours.
		for i := 0; i+1 < len(seqs); i++ {
			if rng.IntN(8) == 0 {
				seqs[i], seqs[i+1] = seqs[i+1], seqs[i]
			}
		}
		seen := map[uint64]bool{}
		var high, base uint64
		var dups, viol, gaps uint64
		for i, s := range seqs {
			if i == 0 {
				base = 1
				if mid {
					base = s
				}
				high = base - 1
			}
			switch {
			case seen[s]:
				dups++
			case s < high:
				viol++
			case s > high+1:
				gaps++
			}
			seen[s] = true
			high = max(high, s)
			v.Observe("k", s, 0, "w")
		}
		var missing, lost uint64
		if len(seqs) > 0 {
			for s := base; s <= high; s++ {
				if !seen[s] {
					missing++
				}
			}
			for s := base; s <= uint64(n); s++ {
				if !seen[s] {
					lost++
				}
			}
		} else {
			lost = uint64(n)
		}
		st := v.Stats()
		if st.Processed != uint64(len(seen)) || st.Duplicates != dups || st.Violations != viol || st.Gaps != gaps || st.Missing != missing {
			t.Fatalf("round %d (mid=%v) seqs %v: stats %+v, model processed=%d dups=%d viol=%d gaps=%d missing=%d",
				round, mid, seqs, st, len(seen), dups, viol, gaps, missing)
		}
		if got := v.Lost(map[string]uint64{"k": uint64(n)}); got != lost {
			t.Fatalf("round %d (mid=%v) seqs %v: lost %d, model %d", round, mid, seqs, got, lost)
		}
	}
}

func TestVerifierConcurrent(t *testing.T) {
	v := NewVerifier(VerifierOptions{})
	const keys, perKey, workers = 16, 500, 8
	var wg sync.WaitGroup
	// Each key is fed in order by one goroutine; a second feeds duplicates
	// of it concurrently.
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%02d", k)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for s := uint64(1); s <= perKey; s++ {
				v.Observe(key, s, s, "main")
			}
		}()
		go func() {
			defer wg.Done()
			for s := uint64(1); s <= perKey; s++ {
				for v.Distinct(key) < s { // wait until the original is in
					runtime.Gosched()
				}
				v.Observe(key, s, s, "dup")
			}
		}()
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				_ = v.Stats()
				_ = v.Lost(map[string]uint64{"k00": perKey})
				_ = v.Keys()
			}
		}()
	}
	wg.Wait()
	s := v.Stats()
	if s.Processed != keys*perKey || s.Duplicates != keys*perKey || s.Violations != 0 || s.Gaps != 0 {
		t.Fatalf("stats %+v", s)
	}
	published := map[string]uint64{}
	for k := 0; k < keys; k++ {
		published[fmt.Sprintf("k%02d", k)] = perKey
	}
	if lost := v.Lost(published); lost != 0 {
		t.Fatalf("lost %d", lost)
	}
}
