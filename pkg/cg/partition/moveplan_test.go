package partition

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return out
}

func TestMinimumBalancedMoves(t *testing.T) {
	tests := []struct {
		name          string
		n             int
		before, after []string
		// min is the theoretical minimum; actual is what the balanced
		// assignment moves, for comparison.
		min, actual int
	}{
		{"grow 8 to 9 over 256", 256, names("m", 8), names("m", 9), 28, 144},
		{"shrink 9 to 8 over 256", 256, names("m", 9), names("m", 8), 28, 144},
		{"grow 1 to 2 over 10", 10, names("m", 1), names("m", 2), 5, 5},
		{"grow 2 to 3 over 10", 10, names("m", 2), names("m", 3), 3, 6},
		{"add in front by name", 10, []string{"b", "c"}, []string{"a", "b", "c"}, 3, 5},
		{"from none", 6, nil, names("m", 2), 6, 6},
		{"to none", 6, names("m", 2), nil, 6, 6},
		{"unchanged", 12, names("m", 3), names("m", 3), 0, 0},
		{"replace one", 9, []string{"a", "b", "c"}, []string{"a", "b", "d"}, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := BalancedAssignment(tt.before, tt.n)
			after := BalancedAssignment(tt.after, tt.n)
			got := MinimumBalancedMoves(before, tt.after)
			if got != tt.min {
				t.Errorf("minimum = %d, want %d", got, tt.min)
			}
			if a := len(Moves(before, after)); a != tt.actual {
				t.Errorf("balanced assignment moves %d, want %d", a, tt.actual)
			}
			if len(Moves(before, after)) < got {
				t.Errorf("actual moves %d below the minimum %d", len(Moves(before, after)), got)
			}
		})
	}
}

func TestMinimumMoves(t *testing.T) {
	before := BalancedAssignment([]string{"a", "b"}, 6) // a: 0-2, b: 3-5
	tests := []struct {
		name string
		mms  []MemberMapping
		want int
	}{
		{"same", []MemberMapping{{"a", []int{0, 1, 2}}, {"b", []int{3, 4, 5}}}, 0},
		{"swapped", []MemberMapping{{"b", []int{0, 1, 2}}, {"a", []int{3, 4, 5}}}, 0},
		{"whale", []MemberMapping{{"a", []int{0, 1}}, {"b", []int{2, 3, 4}}, {"w", []int{5}}}, 1},
		{"all new", []MemberMapping{{"x", []int{0, 1, 2, 3, 4, 5}}}, 6},
		{"partial", []MemberMapping{{"a", []int{0}}}, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			after := MappedAssignment(tt.mms, 6)
			if got := MinimumMoves(before, after); got != tt.want {
				t.Errorf("MinimumMoves = %d, want %d", got, tt.want)
			}
		})
	}
}

// The minimum is never above what any balanced assignment moves, and for
// a balanced target MinimumMoves over the counts agrees with it when the
// target's larger shares go to the members that had more.
func TestMinimumBalancedMovesBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 500; i++ {
		n := 1 + rng.IntN(64)
		all := names("m", 1+rng.IntN(12))
		var b, a []string
		for _, m := range all {
			if rng.IntN(2) == 0 {
				b = append(b, m)
			}
			if rng.IntN(2) == 0 {
				a = append(a, m)
			}
		}
		if len(a) == 0 {
			continue
		}
		before, after := BalancedAssignment(b, n), BalancedAssignment(a, n)
		minimum := MinimumBalancedMoves(before, a)
		if got := len(Moves(before, after)); got < minimum {
			t.Fatalf("n=%d %v -> %v: moves %d below minimum %d", n, b, a, got, minimum)
		}
		if mm := MinimumMoves(before, after); mm < minimum {
			t.Fatalf("n=%d %v -> %v: counts minimum %d below balanced minimum %d", n, b, a, mm, minimum)
		}
	}
}
