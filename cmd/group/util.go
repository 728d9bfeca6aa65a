package group

import (
	"errors"

	"github.com/cg-dev/cg/pkg/cg"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

var errGroupNotFound = cg.ErrGroupNotFound

// shortPin shows a pin id's tail: ids from one server share their prefix.
func shortPin(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}
