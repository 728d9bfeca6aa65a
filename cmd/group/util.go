package group

import (
	"errors"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

var errGroupNotFound = cg.ErrGroupNotFound

// Ranges renders partitions compactly (0-4,7,9), "-" for none.
func Ranges(ps []int) string {
	if len(ps) == 0 {
		return "-"
	}
	return partition.Ranges(ps)
}

// shortPin shows a pin id's tail: ids from one server share their prefix.
func shortPin(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
