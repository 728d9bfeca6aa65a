package partition

import "testing"

func BenchmarkMinimalMappings(b *testing.B) {
	before := BalancedAssignment(names("m", 19), 1024)
	members := names("m", 20)
	for b.Loop() {
		MinimalMappings(before, members)
	}
}
