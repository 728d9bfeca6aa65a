package cg

// EventCause says, in a form code can test, why an instance stopped, lost
// or gave up its pin. Event.Reason keeps the words for people; the cause
// is what to branch on. It is empty for events that have no cause to tell
// (joined, pinned, waiting, rebalanced, and most warnings).
type EventCause string

// The causes an Event (and Member.StopCause) reports.
const (
	// Why an instance stopped (EventStopped).

	// CauseStopRequested: Stop was called, or the join's context ended.
	CauseStopRequested EventCause = "stop_requested"
	// CauseGroupDeleted: the group was deleted; a clean stop.
	CauseGroupDeleted EventCause = "group_deleted"
	// CauseConfigChanged: the stored configuration changed in a way a
	// live member cannot follow (ErrConfigChanged).
	CauseConfigChanged EventCause = "config_changed"
	// CauseConfigInvalid: the stored configuration of a static group does
	// not parse or validate.
	CauseConfigInvalid EventCause = "config_invalid"
	// CauseStreamGone: the stream of a static group (and the member
	// consumer with it) was deleted (ErrConsumerGone).
	CauseStreamGone EventCause = "stream_gone"
	// CauseConsumerGone: a static member consumer was deleted and could
	// not be recreated (ErrConsumerGone).
	CauseConsumerGone EventCause = "consumer_gone"
	// CauseWorkStreamGone: the work stream of an elastic group was
	// deleted (ErrWorkStreamGone).
	CauseWorkStreamGone EventCause = "work_stream_gone"

	// Why an instance lost its pin (EventPinLost).

	// CauseReleasedOnStop: the pinned instance handed its pin over while
	// stopping, so a standby takes over at once.
	CauseReleasedOnStop EventCause = "released_on_stop"
	// CauseReleasedToRebalance: the pinned instance of an elastic member
	// deleted the member consumer to take up its new partitions.
	CauseReleasedToRebalance EventCause = "released_to_rebalance"
	// CauseOtherPinned: the server pinned another instance (a pull under
	// this instance's pin id was refused).
	CauseOtherPinned EventCause = "other_pinned"

	// Why an instance fenced itself (EventFenced).

	// CauseFenced: the instance could not be sure of its pin and the
	// server no longer names it pinned: it gave the pin up.
	CauseFenced EventCause = "fenced"
	// CausePinUnconfirmed: the instance could not be sure of its pin and
	// could not ask the server: it acks nothing under it until the server
	// confirms it.
	CausePinUnconfirmed EventCause = "pin_unconfirmed"

	// Poison messages (JoinOptions.Retry).

	// CausePoison: the instance stopped on a poison message under
	// PoisonStop (EventStopped; Err is a *PoisonError naming it).
	CausePoison EventCause = "poison"
	// CauseDeadLettered: a poison message was dead-lettered (EventPoison).
	CauseDeadLettered EventCause = "dead_lettered"
	// CauseParked: a poison message was parked, its key held (EventPoison).
	CauseParked EventCause = "parked"
	// CauseReleased: a parked message was released and handled or skipped
	// (EventPoison).
	CauseReleased EventCause = "released"
)

// stopReasons are the words Event.Reason has carried for each stop cause.
var stopReasons = map[EventCause]string{
	CauseStopRequested:  reasonStopRequested,
	CauseGroupDeleted:   "group deleted",
	CauseConfigChanged:  "configuration changed",
	CauseConfigInvalid:  "stored configuration unusable",
	CauseStreamGone:     "stream deleted",
	CauseConsumerGone:   "member consumer deleted",
	CauseWorkStreamGone: "work stream deleted",
	CausePoison:         "stopped on a poison message",
}

// stopCauseOf is the cause of a stop named by its reason (the words the
// stop paths in gone.go and static_member.go pass).
func stopCauseOf(reason string) EventCause {
	for c, r := range stopReasons {
		if r == reason {
			return c
		}
	}
	return ""
}
