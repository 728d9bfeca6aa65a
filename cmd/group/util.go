package group

import (
	"errors"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

var errGroupNotFound = cg.ErrGroupNotFound

// Ranges renders partitions compactly: 0-4,7,9.
func Ranges(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
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

// shortPin shows a pin id's tail: ids from one server share their prefix.
func shortPin(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
