package partition

import (
	"cmp"
	"slices"
)

// This file is pure math for the minimal-move mode of membership changes:
// rather than re-spreading a member list in contiguous blocks (which moves
// about half the partitions when a group grows by one member), hand out
// explicit mappings with even shares that move no more partitions than
// MinimumBalancedMoves says any even split must.

// MinimalMappings returns mappings over members (normalised as
// BalancedMembers does: de-duplicated, sorted, at most N) in which every
// member owns floor(N/M) or ceil(N/M) partitions, every partition is
// mapped exactly once, and exactly MinimumBalancedMoves(before, members)
// partitions change owner. before may be any assignment: a balanced one,
// earlier mappings (even uneven ones), or partly unowned. Entries are in
// member order with partitions ascending, and the result depends only on
// before and the set of members, so the same change always plans the same.
// With no members (or no partitions) it returns nil.
//
// Why it is minimal: with q = N/M and r = N%M, r members get q+1
// partitions and the rest q. A member that owned c partitions can keep at
// most min(c, its share). Giving the r larger shares to the members that
// own the most (ties by name) makes sum(min(c, share)) as large as any
// even split allows: sum(min(c, q)) + min(r, members owning more than q),
// the keep count MinimumBalancedMoves subtracts from N. Each member keeps
// that many of its own partitions (its lowest-numbered ones) and only the
// rest (partitions of members leaving, unowned ones, and the excess of
// members above their share) move, each to a member below its share, so
// nothing moves that did not have to.
func MinimalMappings(before Assignment, members []string) []MemberMapping {
	n := before.Partitions
	ms := BalancedMembers(members, n)
	if n <= 0 || len(ms) == 0 {
		return nil
	}
	held := make(map[string][]int, len(ms))
	for _, m := range ms {
		held[m] = nil
	}
	for p := 0; p < n && p < len(before.Owner); p++ {
		if o := before.Owner[p]; o != "" {
			if _, ok := held[o]; ok {
				held[o] = append(held[o], p)
			}
		}
	}

	// The larger shares go to the members that own the most now.
	q, r := n/len(ms), n%len(ms)
	byHeld := slices.Clone(ms)
	slices.SortStableFunc(byHeld, func(a, b string) int { return cmp.Compare(len(held[b]), len(held[a])) })
	share := make(map[string]int, len(ms))
	for i, m := range byHeld {
		share[m] = q
		if i < r {
			share[m] = q + 1
		}
	}

	kept := make([]bool, n)
	out := make(map[string][]int, len(ms))
	for _, m := range ms {
		keep := held[m][:min(len(held[m]), share[m])]
		out[m] = slices.Clone(keep)
		for _, p := range keep {
			kept[p] = true
		}
	}
	var free []int
	for p := 0; p < n; p++ {
		if !kept[p] {
			free = append(free, p)
		}
	}

	// The least loaded take first, each a run of the lowest free
	// partitions; every member ends at its share whatever the order, so
	// the order only decides which free partitions go where.
	short := slices.Clone(ms)
	slices.SortStableFunc(short, func(a, b string) int { return cmp.Compare(len(out[a]), len(out[b])) })
	for _, m := range short {
		need := share[m] - len(out[m])
		if need <= 0 {
			continue
		}
		out[m] = append(out[m], free[:need]...)
		free = free[need:]
	}

	mms := make([]MemberMapping, 0, len(ms))
	for _, m := range ms {
		ps := out[m]
		slices.Sort(ps)
		mms = append(mms, MemberMapping{Member: m, Partitions: ps})
	}
	return mms
}
