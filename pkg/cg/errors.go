package cg

import "errors"

// Sentinel errors; wrap-checked with errors.Is so callers can word them.
var (
	ErrGroupNotFound    = errors.New("group not found")
	ErrStreamNotFound   = errors.New("stream not found")
	ErrMemberNotFound   = errors.New("member not in group")
	ErrGroupExists      = errors.New("group exists with a different configuration")
	ErrServerTooOld     = errors.New("server too old")
	ErrStreamNotReady   = errors.New("stream is not partitioned for this group")
	ErrConfigChanged    = errors.New("group configuration changed")
	ErrInvalidConfig    = errors.New("stored group configuration is invalid")
	ErrNoConsumer       = errors.New("member has no consumer")
	ErrNotPinned        = errors.New("member has no pinned instance")
	ErrMappedGroup      = errors.New("group uses member mappings")
	ErrNotMapped        = errors.New("group has no member mappings")
	ErrConsumerConflict = errors.New("member consumer in use with other filters")
	ErrFenced           = errors.New("instance fenced: it can no longer be sure it holds its pin")
	// ErrNotOwned: a stream or consumer with the name cg would use exists
	// but was not made by cg (or the reference) for that very group.
	ErrNotOwned = errors.New("object not made by cg for this group")
	// ErrNameClash: two groups would share a server name.
	ErrNameClash = errors.New("group names clash")
	// ErrConsumerGone: a running member's consumer (or its stream) was
	// deleted and the member could not safely recreate it.
	ErrConsumerGone = errors.New("member consumer deleted")
	// ErrWorkStreamGone: an elastic group's work stream was deleted under
	// a running member; only re-running create can rebuild it.
	ErrWorkStreamGone = errors.New("work stream deleted")
	// ErrPermission: the server refused a subject to the user (a
	// permissions violation); PermissionError says which.
	ErrPermission = errors.New("permission denied")
)

// described is a sentinel with its own full wording: Error is the message
// alone, errors.Is still finds the sentinel.
type described struct {
	msg  string
	kind error
}

func (e described) Error() string { return e.msg }
func (e described) Unwrap() error { return e.kind }
