package cg

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Poison messages. With one message in flight per key, a message
// whose handler always fails would block its key (and, with max ack pending
// 1, its whole member) forever. A RetryPolicy in JoinOptions bounds the
// retries and says what happens then:
//
//   - PoisonDeadLetter publishes the message, with the Cg-* headers below,
//     to RetryPolicy.DeadLetter (a subject a stream of the user's
//     captures), waits for JetStream's PubAck, and only then acks the
//     original. The publish carries Nats-Msg-Id cg-dl.<stream>.<seq>, so a
//     crash between the PubAck and the ack gives at most one duplicate dead
//     letter (none within the capturing stream's duplicate window) and loses
//     nothing. The key's later messages are handled only after that.
//   - PoisonPark keeps the message pending (unacked; the member sends
//     in-progress acks so the server does not redeliver it, and an instance
//     that is redelivered it after a restart or failover parks it again
//     without handing it to the handler), records it in the KV bucket
//     PoisonBucket and holds its key: nothing later of that key is handled
//     until Client.Release lets it go (retry once more, or skip it to the
//     dead-letter subject). Other keys go on when Concurrency > 1; a serial
//     member (Concurrency 0 or 1) is one ordering domain, so it stops as a
//     whole. The parked key's later messages, delivered meanwhile, stay
//     in the member's window of unacknowledged messages (max ack
//     pending): once they fill it, the server delivers the member nothing
//     more until the release. Size MaxAckPending for the backlog a parked
//     key may gather, or dead-letter instead.
//   - PoisonStop stops the member with a *PoisonError (errors.Is ErrPoison;
//     StopCause CausePoison) naming the message; the message is left
//     unacked, so nothing is lost and the next instance sees it again.
//
// Retries are client-side: a failed delivery is nak'ed with the delay of
// RetryPolicy.Backoff for it, and the member consumer's configuration is not
// changed (no server MaxDeliver or BackOff), so instances with and without a
// policy, and the reference library's, can still share a member consumer.
//
// Elastic groups: the message lives in the group's work-queue stream. A
// parked message stays there and counts against the buffer caps
// (max_buffered_msg/bytes) until it is released; a dead-lettered one is
// acked and leaves it.
//
// How a handler says what happened (its signature is unchanged):
//
//   - Ack / DoubleAck: handled.
//   - Nak, NakWithDelay, or returning without an ack: failed, retry (after
//     the Backoff delay for a Nak or no ack; after the handler's own delay
//     for NakWithDelay; with no Backoff, at once for a Nak and after the ack
//     wait without one) until MaxDeliver deliveries, then poison.
//   - Term / TermWithReason / Msg.Poison(err): poison now, no retry. Under a
//     retry policy a Term is not sent to the server (it would drop the
//     message): the policy's action is taken instead.
//   - Msg.Fail(err) records the error of a failed attempt (for Classify and
//     the Cg-Error header) without settling the message: the handler then
//     returns (or naks) as for any failure.
//
// Classify, when set, is asked after every failed attempt with the error
// given to Msg.Fail (nil when none was): true makes the message poison at
// once.

// PoisonAction is what a member does with a message whose retries are
// exhausted (or that the handler or Classify called poison).
type PoisonAction int

const (
	// PoisonDefault (the zero value) is PoisonDeadLetter when
	// RetryPolicy.DeadLetter is set, else PoisonPark.
	PoisonDefault PoisonAction = iota
	// PoisonPark holds the message and its key until released.
	PoisonPark
	// PoisonDeadLetter publishes the message to the dead-letter subject,
	// then acks it.
	PoisonDeadLetter
	// PoisonStop stops the member with a *PoisonError.
	PoisonStop
)

// String is the action's name as ParsePoisonAction reads it: "park",
// "dead-letter", "stop" ("" for PoisonDefault).
func (a PoisonAction) String() string {
	switch a {
	case PoisonPark:
		return "park"
	case PoisonDeadLetter:
		return "dead-letter"
	case PoisonStop:
		return "stop"
	case PoisonDefault:
		return ""
	}
	return fmt.Sprintf("PoisonAction(%d)", int(a))
}

// ParsePoisonAction reads "park", "dead-letter" (or "deadletter", "dlq"),
// "stop"; "" is PoisonDefault.
func ParsePoisonAction(s string) (PoisonAction, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return PoisonDefault, nil
	case "park":
		return PoisonPark, nil
	case "dead-letter", "deadletter", "dead_letter", "dlq":
		return PoisonDeadLetter, nil
	case "stop":
		return PoisonStop, nil
	}
	return PoisonDefault, fmt.Errorf("poison action %q: use dead-letter, park or stop", s)
}

// RetryPolicy bounds the retries of a failing message and says what to do
// with it then (JoinOptions.Retry; see the top of this file). A bad value is
// refused at Join, before anything is joined.
type RetryPolicy struct {
	// MaxDeliver counts every delivery, the first included: with 3, a
	// message is handed to the handler at most 3 times before it is
	// poison. 0 = unlimited (only Term, Msg.Poison or Classify make a
	// message poison). Negative is refused.
	MaxDeliver int
	// Backoff is the delay before redelivery 2, 3, …: Backoff[0] after the
	// first failed delivery, the last entry repeating. Empty: a Nak
	// redelivers at once, a failure without one after the ack wait (as
	// without a policy). Every entry must be positive.
	Backoff []time.Duration
	// OnPoison is what to do with a poison message; PoisonDefault means
	// PoisonDeadLetter when DeadLetter is set, else PoisonPark.
	OnPoison PoisonAction
	// DeadLetter is the subject dead letters are published to (without
	// wildcards). Join refuses one that no stream captures, or that the
	// group's own stream (or work stream) captures. Optional with Park:
	// when set, a release may skip a parked message to it.
	DeadLetter string
	// Classify, optional, is asked after each failed attempt with the error
	// the handler gave Msg.Fail (nil if none): true = poison now, no retry.
	Classify func(m *Msg, err error) bool
}

// action is the policy's effective action.
func (p *RetryPolicy) action() PoisonAction {
	if p.OnPoison != PoisonDefault {
		return p.OnPoison
	}
	if p.DeadLetter != "" {
		return PoisonDeadLetter
	}
	return PoisonPark
}

// delay is the backoff before the redelivery that follows failed delivery
// number n (1-based).
func (p *RetryPolicy) delay(n uint64) time.Duration {
	if len(p.Backoff) == 0 || n == 0 {
		return 0
	}
	i := int(min(n-1, uint64(len(p.Backoff)-1)))
	return p.Backoff[i]
}

// Validate checks the policy's own values (Join also checks the
// dead-letter subject against the server).
func (p *RetryPolicy) Validate() error {
	if p == nil {
		return nil
	}
	if p.MaxDeliver < 0 {
		return invalid("retry policy", fmt.Sprintf("max deliver %d", p.MaxDeliver), "must be 0 (unlimited) or more; it counts every delivery, the first included")
	}
	for i, d := range p.Backoff {
		if d <= 0 {
			return invalid("retry policy", fmt.Sprintf("backoff %v", p.Backoff), "entry %d is %s: every delay must be positive", i+1, d)
		}
	}
	switch p.OnPoison {
	case PoisonDefault, PoisonPark, PoisonStop:
	case PoisonDeadLetter:
		if p.DeadLetter == "" {
			return invalid("retry policy", "dead-letter action", "needs a dead-letter subject to publish to")
		}
	default:
		return invalid("retry policy", p.OnPoison.String(), "is not an action: use dead-letter, park or stop")
	}
	if p.DeadLetter != "" {
		if err := validLiteralSubject(p.DeadLetter); err != nil {
			return invalid("dead-letter subject", fmt.Sprintf("%q", p.DeadLetter), "%v", err)
		}
	}
	return nil
}

func validLiteralSubject(s string) error {
	if strings.ContainsAny(s, " \t\r\n") {
		return errors.New("must not contain white space")
	}
	for _, t := range strings.Split(s, ".") {
		switch t {
		case "":
			return errors.New("has an empty token")
		case "*", ">":
			return errors.New("must not contain wildcards: it is where messages are published")
		}
	}
	return nil
}

// PoisonBucket is the KV bucket holding parked messages, release requests
// and dead-letter counts, under PoisonKeyPrefix per member. It is created
// with a group (CreateStatic, CreateElastic, an identical re-create, or
// EnsurePoisonBucket), never by a member.
const PoisonBucket = "cg-poison"

// Dead-letter headers, set on every message published to
// RetryPolicy.DeadLetter. The original message's headers are kept beside
// them, except the server's own (every Nats-* header: some are refused on
// a publish, others would act on the dead-letter stream), and Nats-Msg-Id
// is cg-dl.<consumed stream>.<sequence>.
const (
	// HeaderDLStream: the group's stream.
	HeaderDLStream = "Cg-Stream"
	// HeaderDLConsumedStream: the stream Cg-Sequence is in (the group's
	// stream for static groups, the work stream for elastic ones).
	HeaderDLConsumedStream = "Cg-Consumed-Stream"
	// HeaderDLSequence: the message's stream sequence there.
	HeaderDLSequence = "Cg-Sequence"
	// HeaderDLSubject: the message's subject, partition token stripped.
	HeaderDLSubject = "Cg-Subject"
	// HeaderDLPartition: its partition.
	HeaderDLPartition = "Cg-Partition"
	// HeaderDLKind: the group's Kind.
	HeaderDLKind = "Cg-Kind"
	// HeaderDLGroup and HeaderDLMember: who gave up on it.
	HeaderDLGroup  = "Cg-Group"
	HeaderDLMember = "Cg-Member"
	// HeaderDLDeliveries: how many times the server delivered it.
	HeaderDLDeliveries = "Cg-Deliveries"
	// HeaderDLError: the last error the handler gave Msg.Fail or
	// Msg.Poison (or TermWithReason's reason); may be empty.
	HeaderDLError = "Cg-Error"
	// HeaderDLReason: why it is a dead letter: DLReasonMaxDeliver,
	// DLReasonTerm, DLReasonClassified or DLReasonSkip.
	HeaderDLReason = "Cg-Reason"
	// HeaderDLTime: when it was dead-lettered (RFC 3339, nanoseconds).
	HeaderDLTime = "Cg-Time"
)

// Values of HeaderDLReason.
const (
	DLReasonMaxDeliver = "max_deliver"
	DLReasonTerm       = "term"
	DLReasonClassified = "classified"
	DLReasonSkip       = "skip"
)

// PoisonError is why a member stopped under PoisonStop: the message it gave
// up on.
type PoisonError struct {
	Stream     string // the group's stream
	Consumed   string // the stream Sequence is in
	Sequence   uint64
	Subject    string // partition token stripped
	Partition  int
	Deliveries uint64
	Reason     string // DLReasonMaxDeliver, DLReasonTerm or DLReasonClassified
	Err        error  // the handler's last error, if it gave one
}

func (e *PoisonError) Error() string {
	s := fmt.Sprintf("poison message %s sequence %d (subject %s, partition %d) after %s (%s)",
		e.Consumed, e.Sequence, e.Subject, e.Partition, plural(e.Deliveries, "delivery", "deliveries"), strings.ReplaceAll(e.Reason, "_", " "))
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap lets errors.Is find ErrPoison (and the handler's error).
func (e *PoisonError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrPoison, e.Err}
	}
	return []error{ErrPoison}
}

// ParkedMessage is one parked message as kept in PoisonBucket (key
// <prefix>.parked.<sequence>).
type ParkedMessage struct {
	Member     string    `json:"member"`
	Stream     string    `json:"stream"`   // the stream Sequence is in
	Sequence   uint64    `json:"sequence"` // stream sequence
	Subject    string    `json:"subject"`  // partition token stripped
	Partition  int       `json:"partition"`
	Key        string    `json:"key,omitempty"` // the partitioning key, when the member could read it
	Deliveries uint64    `json:"deliveries"`
	Error      string    `json:"error,omitempty"`
	Reason     string    `json:"reason"`                // DLReasonMaxDeliver, DLReasonTerm or DLReasonClassified
	DeadLetter string    `json:"dead_letter,omitempty"` // where a skip sends it; "" = skip refused
	ParkedAt   time.Time `json:"parked_at"`
	// Release is a release asked for and not yet acted on: "retry",
	// "skip" or "".
	Release string `json:"release,omitempty"`
}

// ReleaseOptions say which parked messages a release lets go, and how.
type ReleaseOptions struct {
	// Seq is the stream sequence of the parked message; 0 = every parked
	// message of the member.
	Seq uint64
	// Skip publishes it to the dead-letter subject (then acks it) instead
	// of handing it to the handler once more. Refused (ErrNoDeadLetter)
	// when the member was joined without a dead-letter subject.
	Skip bool
}

// ReleaseResult is what a release asked for. The member acts on it
// asynchronously: a retried message is handed to the handler once more (and
// parked again if it fails again), a skipped one dead-lettered and acked.
type ReleaseResult struct {
	Kind     Kind            `json:"kind"`
	Stream   string          `json:"stream"`
	Group    string          `json:"group"`
	Member   string          `json:"member"`
	Skip     bool            `json:"skip"`
	Released []ParkedMessage `json:"released"`
}

// PoisonReport is what a group's members did with poison messages: per
// member and partition, how many were dead-lettered and which are parked.
// Members that never had one are absent.
type PoisonReport struct {
	Kind    Kind           `json:"kind"`
	Stream  string         `json:"stream"`
	Group   string         `json:"group"`
	Members []MemberPoison `json:"members,omitempty"` // by member name
}

// MemberPoison is one member's part of a PoisonReport.
type MemberPoison struct {
	Member       string            `json:"member"`
	DeadLettered uint64            `json:"dead_lettered"`
	Parked       []ParkedMessage   `json:"parked,omitempty"` // by sequence
	Partitions   []PartitionPoison `json:"partitions,omitempty"`
}

// PartitionPoison counts one partition's poison messages.
type PartitionPoison struct {
	Partition    int    `json:"partition"`
	DeadLettered uint64 `json:"dead_lettered"`
	Parked       int    `json:"parked"`
}

// Totals sums the report: dead-lettered and parked messages of every member.
func (r PoisonReport) Totals() (deadLettered uint64, parked int) {
	for _, m := range r.Members {
		deadLettered += m.DeadLettered
		parked += len(m.Parked)
	}
	return deadLettered, parked
}

// Member returns the report of one member (ok false when it has none).
func (r PoisonReport) Member(name string) (MemberPoison, bool) {
	for _, m := range r.Members {
		if m.Member == name {
			return m, true
		}
	}
	return MemberPoison{}, false
}
