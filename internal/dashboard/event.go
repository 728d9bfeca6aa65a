package dashboard

import "time"

// The event types of /events. A "group" event carries the full state of
// one group; the others are the timeline.
const (
	TypeGroup          = "group"
	TypeReady          = "ready"
	TypePin            = "pin"
	TypeUnpin          = "unpin"
	TypeFailover       = "failover"
	TypeStepDown       = "step_down"
	TypeRebalance      = "rebalance"
	TypeMemberAdded    = "member_added"
	TypeMemberRemoved  = "member_removed"
	TypeMappingCreated = "mapping_created"
	TypeMappingDeleted = "mapping_deleted"
	TypeHandled        = "handled"
	TypeConnection     = "connection"
	TypeGroupRemoved   = "group_removed"
)

// The states of a "connection" event: the dashboard's own NATS connection.
const (
	ConnDisconnected = "disconnected"
	ConnReconnected  = "reconnected"
	ConnClosed       = "closed"
)

// Event is one `data:` line of /events. Stream, Group and Member are ""
// when the event is not about one; PinID is the pin the event shows.
type Event struct {
	// ID is the SSE id, set by the server (monotonic); 0 for the
	// per-connection snapshot.
	ID     uint64    `json:"id,omitempty"`
	Type   string    `json:"type"`
	Time   time.Time `json:"time"`
	Stream string    `json:"stream"`
	Group  string    `json:"group"`
	Member string    `json:"member"`
	PinID  string    `json:"pin_id"`
	// PrevPinID is the pin before (failover, step_down, unpin).
	PrevPinID string `json:"prev_pin_id,omitempty"`
	// Kind is the group's kind, "static" or "elastic".
	Kind string `json:"kind,omitempty"`
	// State is a *GroupState for "group", and the connection's state
	// ("disconnected", "reconnected", "closed") for "connection".
	State any `json:"state,omitempty"`
	// Reason says why: the server's unpin reason ("admin", "timeout"),
	// what the connection reported, what a control did.
	Reason string `json:"reason,omitempty"`
	// Partitions are the member's partitions (member_added,
	// mapping_created), or the partitions that moved (rebalance).
	Partitions []int `json:"partitions,omitempty"`
	// Moves are the partitions that changed owner (rebalance).
	Moves []Move `json:"moves,omitempty"`
	// Color is Member's colour, "#rrggbb", when Member is set.
	Color string `json:"color,omitempty"`
	// Handled events (Emit by an in-process producer such as the demo):
	// which instance handled which message.
	Instance string `json:"instance,omitempty"`
	Subject  string `json:"subject,omitempty"`
	Key      string `json:"key,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
	// Resumed is true on the "ready" of a connection that resumed from
	// Last-Event-ID (no snapshot was sent).
	Resumed bool `json:"resumed,omitempty"`
	// Dynamic: the member of a member_added or member_removed event is
	// one that adds and drops itself (elastic consume --dynamic).
	Dynamic bool `json:"dynamic,omitempty"`
}

// Move is one partition changing owner ("" for none).
type Move struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// GroupState is the full state of one group.
type GroupState struct {
	Kind       string `json:"kind"` // static or elastic
	Partitions int    `json:"partitions"`
	Mode       string `json:"mode"` // balanced or mapped
	// WorkStream is the elastic group's work-queue stream.
	WorkStream     string          `json:"work_stream,omitempty"`
	Members        []MemberState   `json:"members"`
	PartitionStats []PartitionStat `json:"partition_stats"`
	Pending        uint64          `json:"pending"`
	AckRate        *float64        `json:"ack_rate,omitempty"` // acks/s, group-wide
	Statuses       map[string]int  `json:"statuses,omitempty"`
	LagError       string          `json:"lag_error,omitempty"`
	ReadOnly       bool            `json:"read_only"`
	SampledAt      time.Time       `json:"sampled_at"`
	Error          string          `json:"error,omitempty"` // the last sample failed: why
}

// MemberState is one member of a group.
type MemberState struct {
	Name       string     `json:"name"`
	Color      string     `json:"color"`
	Partitions []int      `json:"partitions"`
	Instances  []Instance `json:"instances"`
	// Live: the member has a running instance (a waiting pull or a pin).
	Live     bool     `json:"live"`
	Consumer string   `json:"consumer"`
	Status   string   `json:"status"`
	Pending  uint64   `json:"pending"`
	AckRate  *float64 `json:"ack_rate,omitempty"`
	PinID    string   `json:"pin_id,omitempty"`
	// Dynamic: the member added itself and is dropped when all its
	// instances are gone. LastSeen is the server's time of its instances'
	// latest liveness write (also for an operator's member running
	// --dynamic instances); absent when none is on record.
	Dynamic  bool      `json:"dynamic,omitempty"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// Instance is one running instance of a member, as the server shows it:
// the pinned one (its ID is the pin id) and the standbys, one per waiting
// pull request beyond the pinned one (the server does not name them).
type Instance struct {
	ID     string    `json:"id"`
	Pinned bool      `json:"pinned"`
	PinID  string    `json:"pin_id"`
	Since  time.Time `json:"since,omitzero"`
}

// PartitionStat is one partition's owner and backlog.
type PartitionStat struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner"`
	Color     string `json:"color,omitempty"`
	Known     bool   `json:"known"`
	Pending   uint64 `json:"pending"`
	// OldestAgeMs is how long the oldest pending message has waited.
	OldestAgeMs int64 `json:"oldest_age_ms"`
	// Rate is how fast the backlog changes, messages per second: positive
	// while it grows, negative while it drains; 0 until two samples.
	Rate   float64 `json:"rate"`
	Status string  `json:"status"`
	Reason string  `json:"reason,omitempty"`
}
