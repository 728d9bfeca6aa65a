package cg

import (
	"errors"
	"fmt"
)

// Every sentinel error of the engine. Callers test them with errors.Is
// (each is returned wrapped, with the context) and word them for their
// users.

// Groups, streams, members and their consumers.
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
	// ErrUnknownKind is returned, wrapped, for a Kind that is neither
	// KindStatic nor KindElastic.
	ErrUnknownKind = errors.New("unknown group kind")
	// ErrLayout is returned, wrapped, for an unknown layout or a
	// configuration the layout cannot have.
	ErrLayout = errors.New("invalid layout")
	// ErrNoMatchingSubjects: a group filter matches none of the subjects
	// the stream stores, so the group would never receive a message
	// through it.
	ErrNoMatchingSubjects = errors.New("group filter matches none of the stream's subjects")
	// ErrUnknownRole is returned, wrapped, for a role Permissions does not
	// know.
	ErrUnknownRole = errors.New("unknown role")
)

// Limits.
var (
	// ErrTooManyPartitions is wrapped by the refusals of the ceiling.
	ErrTooManyPartitions = fmt.Errorf("more partitions than cg supports (at most %d)", MaxPartitions)
	// ErrAboveCeiling is wrapped by the refusal of an option above its
	// ceiling (MaxConcurrency, MaxAckPendingMax, MaxBatchSize,
	// MaxDeliverMax, MaxBackoffSteps, MaxBackoffDelay).
	ErrAboveCeiling = errors.New("above cg's ceiling")
)

// Delivery: batches and poison messages.
var (
	// ErrInvalidBatch: JoinOptions.Batch (or its combination with the
	// other options) cannot work; nothing was joined.
	ErrInvalidBatch = errors.New("invalid batch options")
	// ErrBatchFailed: a batch's handler failed MaxAttempts times; the
	// instance stopped, leaving the batch unacked for the next one.
	ErrBatchFailed = errors.New("batch handler kept failing")
	// ErrBatchAck is what settling a batch's message from the handler
	// returns: in batch mode cg acks the batch by the handler's result.
	ErrBatchAck = errors.New("messages of a batch are settled by the batch handler's result, not one by one")
	// ErrPoison is wrapped by the *PoisonError a member stops with under
	// PoisonStop.
	ErrPoison = errors.New("poison message")
	// ErrNoPoisonState: the KV bucket PoisonBucket does not exist; it is
	// made when a group is created (or re-created identically), not by
	// members.
	ErrNoPoisonState = errors.New("poison state bucket missing")
	// ErrNotParked: a release named a message (or a member) with nothing
	// parked.
	ErrNotParked = errors.New("no parked message")
	// ErrNoDeadLetter: a release asked to skip a parked message to the
	// dead-letter subject, but its member was joined without one.
	ErrNoDeadLetter = errors.New("no dead-letter subject")
)

// Resets.
var (
	// ErrResetTarget: the wanted position is not one the stream has (a
	// time in the future, a sequence past the end) or none or several
	// were given.
	ErrResetTarget = errors.New("invalid reset target")
	// ErrResetUnsupported: the reset asked for cannot be done for this
	// group (an elastic rewind) or by this server.
	ErrResetUnsupported = errors.New("reset not supported")
)

// described is a sentinel with its own full wording: Error is the message
// alone, errors.Is still finds the sentinel.
type described struct {
	msg  string
	kind error
}

func (e described) Error() string { return e.msg }
func (e described) Unwrap() error { return e.kind }
