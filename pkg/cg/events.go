package cg

import "time"

// EventKind names a change in a member instance's life.
type EventKind string

// The events a member reports, in the order they usually happen.
const (
	// EventJoined: the instance is bound to its member's consumer and pulling.
	EventJoined EventKind = "joined"
	// EventWaiting: the instance is not pinned; it waits as a hot standby
	// (or because its member owns no partitions).
	EventWaiting EventKind = "waiting"
	// EventPinned: the server pinned this instance (seen on the first
	// message carrying a new pin id).
	EventPinned EventKind = "pinned"
	// EventPinLost: the server pinned another instance (a pull with our pin
	// id was refused with 423), or this instance released its pin.
	EventPinLost EventKind = "pin_lost"
	// EventWarning: something went wrong that the instance rides out
	// (a missed heartbeat, a reconnect); Err says what.
	EventWarning EventKind = "warning"
	// EventFenced: the instance held a pin but can no longer be sure it
	// does (its pull loop stood still, or nothing came from the server,
	// for the fence threshold, and the server no longer names it pinned:
	// it was frozen, starved or cut off); it hands buffered messages back
	// for redelivery to the new pinned instance and refuses to ack the one
	// in hand.
	EventFenced EventKind = "fenced"
	// EventStopped: the instance stopped; Err is nil for a clean stop.
	EventStopped EventKind = "stopped"
	// EventPoison: a poison message was dead-lettered, parked or released
	// (JoinOptions.Retry); Cause says which, Reason names the message.
	EventPoison EventKind = "poison"
)

// Event is one change reported to JoinOptions.OnEvent.
type Event struct {
	Kind       EventKind `json:"event"`
	Time       time.Time `json:"time"`
	Stream     string    `json:"stream"`
	Group      string    `json:"group"`
	Member     string    `json:"member"`
	Consumer   string    `json:"consumer,omitempty"`
	Partitions []int     `json:"partitions,omitempty"`
	PinID      string    `json:"pin_id,omitempty"`
	// Peer is the member an EventMemberAdded or EventMemberDropped is
	// about (this one, or another the instance dropped).
	Peer   string `json:"peer,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Cause is why the instance stopped (EventStopped), lost its pin
	// (EventPinLost) or fenced itself (EventFenced), for code to test;
	// Reason says it in words. Empty for other events.
	Cause EventCause `json:"-"`
	Err   error      `json:"-"`
}
