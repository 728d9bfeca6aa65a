package partition

// This file is pure math about membership changes: how many partitions a
// change must move at the least, to compare with what the assignment
// actually moves.

// ownedCounts counts the partitions each member owns in a.
func ownedCounts(a Assignment) map[string]int {
	out := map[string]int{}
	for _, m := range a.Owner {
		if m != "" {
			out[m]++
		}
	}
	return out
}

// MinimumBalancedMoves is the fewest partitions that must change owner to
// go from before to any balanced assignment over members (shares that
// differ by at most one): N minus the most partitions that can keep their
// owner. With q = N/M and r = N%M, every member may keep up to q of its
// partitions, and r of them (best: those owning more than q) one more;
// unowned partitions always move. With no members, every owned partition
// moves to none.
func MinimumBalancedMoves(before Assignment, members []string) int {
	n := before.Partitions
	ms := BalancedMembers(members, n)
	if n <= 0 {
		return 0
	}
	counts := ownedCounts(before)
	if len(ms) == 0 {
		// No one to own them: every owned partition goes to none.
		owned := 0
		for _, c := range counts {
			owned += c
		}
		return owned
	}
	q, r := n/len(ms), n%len(ms)
	keep, over := 0, 0
	for _, m := range ms {
		c := counts[m]
		keep += min(c, q)
		if c > q {
			over++
		}
	}
	keep += min(r, over)
	return n - keep
}

// MinimumMoves is the fewest partitions that must change owner to go from
// before to an assignment giving each member as many partitions as after
// does (such as explicit mappings): a member keeps at most as many of its
// partitions as it will own. Unowned partitions count as one more owner.
func MinimumMoves(before, after Assignment) int {
	n := min(len(before.Owner), len(after.Owner))
	bc, ac := map[string]int{}, map[string]int{}
	for p := 0; p < n; p++ {
		bc[before.Owner[p]]++
		ac[after.Owner[p]]++
	}
	keep := 0
	for m, c := range ac {
		keep += min(c, bc[m])
	}
	return n - keep
}

// Move is one partition changing owner ("" for none).
type Move struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// Moves lists the partitions whose owner differs between two assignments.
func Moves(before, after Assignment) []Move {
	var out []Move
	for p := 0; p < len(after.Owner) && p < len(before.Owner); p++ {
		if before.Owner[p] != after.Owner[p] {
			out = append(out, Move{Partition: p, From: before.Owner[p], To: after.Owner[p]})
		}
	}
	return out
}
