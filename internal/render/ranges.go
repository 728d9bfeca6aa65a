package render

import "github.com/cg-dev/cg/pkg/cg/partition"

// Ranges renders partitions compactly (0-4,7,9), "-" for none.
func Ranges(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
	return partition.Ranges(ps)
}
