package partition

import (
	"strconv"
	"strings"
)

// MemberMapping hands an explicit set of partitions to one member. Its JSON
// form is part of the on-server contract shared with the reference.
type MemberMapping struct {
	Member     string `json:"member"`
	Partitions []int  `json:"partitions"`
}

// FormatMappings renders mappings as the command line writes them.
func FormatMappings(mms []MemberMapping) string {
	var parts []string
	for _, mm := range mms {
		ps := make([]string, len(mm.Partitions))
		for i, p := range mm.Partitions {
			ps[i] = strconv.Itoa(p)
		}
		parts = append(parts, mm.Member+":"+strings.Join(ps, ","))
	}
	return strings.Join(parts, " ")
}

// Ranges renders partitions compactly: 0-4,7,9 (a run of two as 3,4).
func Ranges(ps []int) string {
	var parts []string
	for i := 0; i < len(ps); {
		j := i
		for j+1 < len(ps) && ps[j+1] == ps[j]+1 {
			j++
		}
		switch {
		case j == i:
			parts = append(parts, strconv.Itoa(ps[i]))
		case j == i+1:
			parts = append(parts, strconv.Itoa(ps[i]), strconv.Itoa(ps[j]))
		default:
			parts = append(parts, strconv.Itoa(ps[i])+"-"+strconv.Itoa(ps[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
