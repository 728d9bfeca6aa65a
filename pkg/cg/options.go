package cg

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of JoinOptions. The ack wait and the pinned TTL derived from it
// are the reference CLI's, so that cg and reference instances of one member
// create identical consumers and can stand by for each other.
const (
	DefaultAckWait       = 2 * time.Second
	DefaultMaxAckPending = 1
	minPinnedTTL         = time.Second
	// DefaultInactiveThreshold is how long a static member's consumer
	// stays after its last instance: long enough to keep the exact state
	// over restarts and deploys, short of forever.
	DefaultInactiveThreshold = time.Hour
	// KeepConsumer as JoinOptions.InactiveThreshold keeps a static
	// member's consumer forever.
	KeepConsumer time.Duration = -1
)

// JoinOptions tune a member instance. The zero value is the default.
type JoinOptions struct {
	// AckWait is how long the server waits for an ack before redelivering.
	AckWait time.Duration
	// MaxAckPending bounds unacknowledged messages; 1 (the default) keeps
	// strict per-key order.
	MaxAckPending int
	// PinnedTTL is how long the pinned instance may go without pulling
	// before the server pins a standby. Default: max(AckWait, 1s).
	PinnedTTL time.Duration
	// PullExpiry is how long each pull waits. Default: PinnedTTL/2, so an
	// idle pinned instance re-pulls well within its TTL.
	PullExpiry time.Duration
	// InactiveThreshold is how long a static member's consumer outlives its
	// last instance before the server deletes it, so that members that are
	// gone for good leave nothing behind. Its position is kept and a
	// returning member resumes there (positions.go). Default
	// DefaultInactiveThreshold; KeepConsumer (any negative value) keeps the
	// consumer forever, as the reference does. The threshold is part of the
	// consumer's configuration: a reference instance of the same member
	// refuses a consumer that cg created with one (error 10148), so mixed
	// cg/reference instances of one member need KeepConsumer. Consumers that
	// exist already are joined as they are, never changed.
	InactiveThreshold time.Duration
	// LivenessInterval is how often a standby checks that the pinned
	// instance of its member is still there (it also checks as soon as it
	// stands by), so that an instance that died (its connection closed) is
	// replaced at once, and one frozen or cut off (two checks in a row
	// unanswered, each waiting 4/5 of the interval) within about three
	// intervals, instead of after the pinned TTL. The pinned instance
	// fences itself on a matching threshold derived from its own interval
	// (liveness.go: 300ms by default), so instances of one member should
	// share it. Only cg instances answer the check; a pinned instance that
	// never answered (the reference library's) is left to the TTL. Default
	// 250ms; negative turns the check off (and fencing falls back to the
	// pinned TTL).
	LivenessInterval time.Duration
	// ReferenceCompatible creates the member consumer exactly as the
	// reference library (pcgroups) would: without cg's ownership marks and,
	// for static members, kept forever (as KeepConsumer). The server
	// compares a create's whole configuration, metadata included, with the
	// existing consumer's, so a reference instance of the same member is
	// refused a marked consumer (static: it fails; elastic: it deletes and
	// recreates it, unmarked). Set it on every cg instance of a member that
	// also runs reference instances. Consumers that exist already are
	// joined as they are when they are the member's own.
	ReferenceCompatible bool
	// Concurrency is how many handler calls an instance runs at once
	// (lanes.go). 0 and 1 hand messages over one at a time, exactly as
	// before. Above 1, messages of one key (Order) are still handled
	// strictly in delivery order, different keys at once; a consumer cg
	// creates gets a max ack pending of 4×Concurrency unless MaxAckPending
	// is set, which must then be at least Concurrency, and an existing
	// member consumer with a lower max ack pending is refused.
	Concurrency int
	// Order is what a concurrent instance keeps in order: OrderKey (the
	// default), OrderPartition or OrderNone.
	Order Order
	// OnEvent receives state changes. It is called from the instance's
	// goroutines and must not block for long.
	OnEvent func(Event)
	// Batch, when set, hands messages to Batch.Handler in ordered batches
	// (batch.go) instead of one at a time; the per-message handler given
	// to the join must then be nil. Not combined with Concurrency above 1;
	// with Retry, a batch that keeps failing is split to find the message
	// the policy then applies to.
	Batch *BatchOptions
	// Retry, when set, bounds the retries of a failing message and says
	// what to do with it then: dead-letter, park or stop (poison_api.go).
	// Nil keeps today's behaviour: redelivered after every ack wait.
	Retry *RetryPolicy
	// Observers see the instance from inside (observe.go): messages
	// handed to user code and their results, pins, the join and the stop.
	// The metrics and tracing plugins (pkg/cg/plugin/...) are observers.
	Observers []Observer
	// Dynamic makes the member follow its instances (elastic groups,
	// dynamic.go): the first instance adds the member to the group, the
	// clean stop of its last instance drops it, and while it runs it keeps
	// a liveness record by which the other dynamic members drop it once
	// all its instances are gone for SessionTimeout. A member an operator
	// added is never dropped this way: its dynamic instances keep records
	// (so it shows as seen) but leave the membership alone.
	Dynamic bool
	// SessionTimeout is how long a dynamic member may give no sign of
	// life before the others drop it. Default DefaultSessionTimeout; at
	// least MinSessionTimeout.
	SessionTimeout time.Duration

	// stage, when set (by tests), makes each binding's delivery stage in
	// place of the serial one (delivery.go).
	stage func(deliverySink) delivery
	// hashLanes (benchmarks) folds keys onto Concurrency fixed lanes by
	// hash instead of one queue per key, to measure the alternative.
	hashLanes bool
	// afterDeadLetter (tests) runs between a dead letter's PubAck and the
	// original's ack; true skips the ack, as a crash there would.
	afterDeadLetter func(seq uint64) bool
}

func (o JoinOptions) withDefaults() (JoinOptions, error) {
	if o.AckWait < 0 || o.PinnedTTL < 0 || o.PullExpiry < 0 || o.MaxAckPending < 0 {
		return o, errors.New("join options must not be negative")
	}
	if err := o.checkCeilings(); err != nil {
		return o, err
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	o, err := o.stageDefaults()
	if err != nil {
		return o, err
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	if o.PinnedTTL == 0 {
		o.PinnedTTL = max(o.AckWait, minPinnedTTL)
	}
	if o.PullExpiry == 0 {
		// Well inside the TTL: each pull resets the server's pin timer.
		o.PullExpiry = max(o.PinnedTTL/2, 100*time.Millisecond)
	}
	if o.ReferenceCompatible {
		o.InactiveThreshold = KeepConsumer
	}
	switch {
	case o.InactiveThreshold == 0:
		o.InactiveThreshold = DefaultInactiveThreshold
	case o.InactiveThreshold < 0:
		o.InactiveThreshold = 0 // kept forever
	}
	if o.LivenessInterval == 0 {
		o.LivenessInterval = 250 * time.Millisecond
	}
	if o.LivenessInterval > 0 && o.LivenessInterval < minLivenessInterval {
		// The fence threshold derives from it (liveness.go): shorter would
		// have the pinned instance doubt its pin on every scheduling hiccup.
		return o, fmt.Errorf("liveness check interval %s is too short: use %s or more (250ms is the default), or turn the check off", o.LivenessInterval, minLivenessInterval)
	}
	if o.PullExpiry >= o.PinnedTTL {
		return o, fmt.Errorf("pull expiry %s must be shorter than the pinned TTL %s, or the pinned instance loses its pin while idle", o.PullExpiry, o.PinnedTTL)
	}
	return o, nil
}
