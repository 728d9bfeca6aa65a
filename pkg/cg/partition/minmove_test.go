package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// checkMinimal plans before → members the minimal way and checks what the
// mode promises: valid mappings (the contract's rules), shares of N/M
// rounded down or up, every partition once, exactly the theoretical
// minimum of moves, and the same plan for the same input in any order. It
// returns the new assignment, to chain changes on.
func checkMinimal(t *testing.T, desc func() string, before Assignment, members []string) Assignment {
	t.Helper()
	n := before.Partitions
	mms := MinimalMappings(before, members)
	ms := BalancedMembers(members, n)
	if len(ms) == 0 {
		if mms != nil {
			t.Fatalf("%s: mappings %v with no members", desc(), mms)
		}
		return BalancedAssignment(nil, n)
	}
	if err := validMappings(mms, n); err != nil {
		t.Fatalf("%s: invalid mappings %v: %v", desc(), mms, err)
	}
	after := MappedAssignment(mms, n)
	q := n / len(ms)
	lo, hi := n, 0
	for i, mm := range mms {
		if mm.Member != ms[i] {
			t.Fatalf("%s: entry %d is %q, want %q (entries in member order)", desc(), i, mm.Member, ms[i])
		}
		if !slices.IsSorted(mm.Partitions) {
			t.Fatalf("%s: %s's partitions not ascending: %v", desc(), mm.Member, mm.Partitions)
		}
		lo, hi = min(lo, len(mm.Partitions)), max(hi, len(mm.Partitions))
	}
	if hi-lo > 1 || lo < q || hi > q+1 {
		t.Fatalf("%s: shares %d..%d, want %d or %d", desc(), lo, hi, q, q+1)
	}
	for p, o := range after.Owner {
		if o == "" {
			t.Fatalf("%s: partition %d unowned", desc(), p)
		}
	}
	moves, minimum := len(Moves(before, after)), MinimumBalancedMoves(before, members)
	if moves != minimum {
		t.Fatalf("%s: moves %d, theoretical minimum %d", desc(), moves, minimum)
	}
	// Same members in another order, repeated: same plan.
	shuffled := append(slices.Clone(members), members...)
	rand.New(rand.NewPCG(uint64(n), uint64(len(members)))).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	if again := MinimalMappings(before, shuffled); !slices.EqualFunc(again, mms, func(a, b MemberMapping) bool {
		return a.Member == b.Member && slices.Equal(a.Partitions, b.Partitions)
	}) {
		t.Fatalf("%s: not deterministic:\n%v\n%v", desc(), mms, again)
	}
	return after
}

func TestMinimalMappings8To9Over256(t *testing.T) {
	eight, nine := names("m", 8), names("m", 9)
	before := BalancedAssignment(eight, 256)
	after := checkMinimal(t, label("8 to 9"), before, nine)
	if got := len(Moves(before, after)); got != 28 {
		t.Fatalf("8 to 9 over 256 moves %d, want 28", got)
	}
	if got := len(Moves(before, BalancedAssignment(nine, 256))); got != 144 {
		t.Fatalf("the balanced re-spread moves %d, want 144", got)
	}
	// The four that had the most (all 32; first by name) keep 29, the rest
	// 28, and the new member takes the 28 they gave up.
	for i, m := range nine {
		want := 28
		if i < 4 {
			want = 29
		}
		if got := len(after.MemberPartitions(m)); got != want {
			t.Errorf("%s owns %d, want %d", m, got, want)
		}
	}
	if got := after.MemberPartitions("m01"); !slices.Equal(got, seqInts(0, 29)) {
		t.Errorf("m01 keeps %v, want 0-28", got)
	}
	// And back: dropping m09 again is the minimum too.
	back := checkMinimal(t, label("9 to 8"), after, eight)
	if got := len(Moves(after, back)); got != 28 {
		t.Fatalf("9 to 8 moves %d, want 28", got)
	}
}

func label(s string) func() string { return func() string { return s } }

func seqInts(from, to int) []int {
	out := make([]int, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestMinimalMappingsEdges(t *testing.T) {
	tests := []struct {
		name    string
		before  Assignment
		members []string
		moves   int
	}{
		{"from no owner", BalancedAssignment(nil, 7), names("m", 3), 7},
		{"to no member", BalancedAssignment(names("m", 3), 7), nil, 7},
		{"one partition", BalancedAssignment([]string{"a"}, 1), []string{"a", "b"}, 0},
		{"as many members as partitions", BalancedAssignment(names("m", 4), 5), names("m", 5), 1},
		{"more members than partitions", BalancedAssignment(names("m", 2), 3), names("m", 5), 1},
		{"replace one", BalancedAssignment([]string{"a", "b", "c"}, 9), []string{"a", "b", "d"}, 3},
		{"add in front by name", BalancedAssignment([]string{"b", "c"}, 10), []string{"a", "b", "c"}, 3},
		{"unchanged", BalancedAssignment(names("m", 3), 12), names("m", 3), 0},
		{"uneven mappings", MappedAssignment([]MemberMapping{{Member: "a", Partitions: []int{0}}, {Member: "b", Partitions: []int{1, 2, 3, 4, 5, 6, 7, 8}}, {Member: "whale", Partitions: []int{9}}}, 10), []string{"a", "b", "whale"}, 4},
		{"partly unowned", Assignment{Partitions: 4, Owner: []string{"a", "", "a", ""}}, []string{"a", "b"}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := checkMinimal(t, label(tt.name), tt.before, tt.members)
			if got := len(Moves(tt.before, after)); got != tt.moves {
				t.Fatalf("moves %d, want %d", got, tt.moves)
			}
		})
	}
}

// MinimumBalancedMoves is a formula; check it, and the plan, against every
// even split of small groups, found by brute force.
func TestMinimalMappingsMatchBruteForce(t *testing.T) {
	pool := []string{"", "a", "b", "x"} // "" unowned, x leaves, c is new
	for n := 1; n <= 5; n++ {
		for _, members := range [][]string{{"a"}, {"a", "b"}, {"a", "b", "c"}, {"b", "c"}} {
			ms := BalancedMembers(members, n)
			owners := make([]string, n)
			var each func(p int)
			each = func(p int) {
				if p == n {
					before := Assignment{Partitions: n, Owner: slices.Clone(owners)}
					best := bruteMinimum(before, ms)
					if got := MinimumBalancedMoves(before, members); got != best {
						t.Fatalf("N=%d %v -> %v: formula %d, brute force %d", n, owners, members, got, best)
					}
					checkMinimal(t, func() string { return fmt.Sprintf("N=%d %v -> %v", n, owners, members) }, before, members)
					return
				}
				for _, o := range pool {
					owners[p] = o
					each(p + 1)
				}
			}
			each(0)
		}
	}
}

// bruteMinimum tries every assignment of before's partitions to ms whose
// shares differ by at most one.
func bruteMinimum(before Assignment, ms []string) int {
	n := before.Partitions
	if len(ms) == 0 {
		return len(Moves(before, BalancedAssignment(nil, n)))
	}
	ceil := (n + len(ms) - 1) / len(ms)
	best := n + 1
	count := map[string]int{}
	var try func(p, moved int)
	try = func(p, moved int) {
		if p == n {
			lo, hi := n, 0
			for _, m := range ms {
				lo, hi = min(lo, count[m]), max(hi, count[m])
			}
			if hi-lo <= 1 {
				best = min(best, moved)
			}
			return
		}
		for _, m := range ms {
			if count[m] == ceil {
				continue
			}
			count[m]++
			if before.Owner[p] != m {
				try(p+1, moved+1)
			} else {
				try(p+1, moved)
			}
			count[m]--
		}
	}
	try(0, 0)
	return best
}

// Every size from 1 to 40 partitions and 80 more up to 300, adds and drops
// of one or more members from a balanced start, then chains of minimal
// changes, each starting from the mappings the one before left.
func TestMinimalMappingsManySizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	pool := names("w", 24)
	sizes := seqInts(1, 41)
	for range 80 {
		sizes = append(sizes, 41+rng.IntN(260))
	}
	sizes = append(sizes, 256, 300)
	changes := 0
	for _, n := range sizes {
		m := 1 + rng.IntN(min(20, n))
		start := pool[:m]
		before := BalancedAssignment(start, n)
		// Add one, add several, drop one, drop several.
		for _, k := range []int{1, 1 + rng.IntN(4)} {
			if m+k <= min(20, n) {
				checkMinimal(t, func() string { return fmt.Sprintf("N=%d add %d to %d", n, k, m) }, before, pool[:m+k])
				changes++
			}
			if m-k >= 0 {
				checkMinimal(t, func() string { return fmt.Sprintf("N=%d drop %d of %d", n, k, m) }, before, pool[k:m])
				changes++
			}
		}
		// A chain: random adds and drops, each from the last plan.
		cur, a := slices.Clone(start), before
		for step := 0; step < 8; step++ {
			next := slices.Clone(cur)
			if len(next) > 0 && (rng.IntN(2) == 0 || len(next) >= min(20, n)) {
				for drop := 1 + rng.IntN(min(3, len(next))); drop > 0; drop-- {
					i := rng.IntN(len(next))
					next = slices.Delete(next, i, i+1)
				}
			} else {
				for add := 1 + rng.IntN(3); add > 0 && len(next) < min(20, n); add-- {
					if w := pool[rng.IntN(len(pool))]; !slices.Contains(next, w) {
						next = append(next, w)
					}
				}
			}
			a = checkMinimal(t, func() string { return fmt.Sprintf("N=%d chain step %d %v -> %v", n, step, cur, next) }, a, next)
			cur = next
			changes++
		}
	}
	t.Logf("%d minimal changes checked", changes)
}

// From a group that is mapped already, however unevenly: the plan evens
// the shares out with the fewest moves.
func TestMinimalMappingsFromRandomMappings(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	pool := names("w", 12)
	for i := 0; i < 400; i++ {
		n := 1 + rng.IntN(300)
		before := Assignment{Partitions: n, Owner: make([]string, n)}
		owners := pool[:1+rng.IntN(len(pool))]
		for p := range before.Owner {
			before.Owner[p] = owners[rng.IntN(len(owners))]
		}
		var members []string
		for _, w := range pool {
			if rng.IntN(2) == 0 && len(members) < n {
				members = append(members, w)
			}
		}
		checkMinimal(t, func() string { return fmt.Sprintf("N=%d random owners %v -> %v", n, owners, members) }, before, members)
	}
}

// validMappings checks mappings against the contract's rules: member names
// unique, 1 to n entries, every partition 0..n-1 exactly once and none out
// of range.
func validMappings(mms []MemberMapping, n int) error {
	if len(mms) < 1 || len(mms) > n {
		return fmt.Errorf("%d entries for %d partitions", len(mms), n)
	}
	member := map[string]bool{}
	owned := make([]bool, n)
	for _, mm := range mms {
		if member[mm.Member] {
			return fmt.Errorf("member %q twice", mm.Member)
		}
		member[mm.Member] = true
		for _, p := range mm.Partitions {
			if p < 0 || p >= n {
				return fmt.Errorf("partition %d out of range", p)
			}
			if owned[p] {
				return fmt.Errorf("partition %d twice", p)
			}
			owned[p] = true
		}
	}
	for p, ok := range owned {
		if !ok {
			return fmt.Errorf("partition %d unowned", p)
		}
	}
	return nil
}
