package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// instance is one running member instance with its own NATS connection,
// as a separate process would have.
type instance struct {
	name   string // m1/a
	member string // m1
	nc     *nats.Conn
	m      *cg.Member
	killed atomic.Bool
	// waited: the instance has reported waiting (to be pinned or added).
	waited atomic.Bool
}

// stopped: the instance has stopped (as the dynamic member does on its
// clean stop).
func (in *instance) stopped() bool {
	if in.m == nil {
		return false
	}
	select {
	case <-in.m.Done():
		return true
	default:
		return false
	}
}

// handoff is a change of the pin under which a member's messages are
// handled, seen from the handlers: the failover as the work experiences it.
type handoff struct {
	Member   string
	From, To string // instances
	FromPin  string
	ToPin    string
	At       time.Time // the first message under the new pin
	Gap      time.Duration
}

type lastHandled struct {
	inst, pin string
	at        time.Time
}

// clock follows, per member, which instance handled the latest message
// under which pin, and records every change.
type clock struct {
	mu       sync.Mutex
	last     map[string]lastHandled
	handoffs []handoff
}

func newClock() *clock { return &clock{last: map[string]lastHandled{}} }

// observe is called when a handler receives a message. The server hands a
// member's next message out only once the previous one is acked
// (max_ack_pending 1), so observations of one member arrive in order.
func (c *clock) observe(member, inst, pin string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev, ok := c.last[member]
	if ok && pin != prev.pin {
		c.handoffs = append(c.handoffs, handoff{
			Member: member, From: prev.inst, To: inst, FromPin: prev.pin, ToPin: pin,
			At: at, Gap: at.Sub(prev.at),
		})
	}
	c.last[member] = lastHandled{inst: inst, pin: pin, at: at}
}

// holder is the instance that handled member's latest message.
func (c *clock) holder(member string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.last[member]
	return l.inst, ok
}

// handoffAfter returns member's first handoff whose new pin first handled
// a message after t.
func (c *clock) handoffAfter(member string, t time.Time) (handoff, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.handoffs {
		if h.Member == member && h.At.After(t) {
			return h, true
		}
	}
	return handoff{}, false
}

// handledBy is one message handled: by which instance of which member, when.
type handledBy struct {
	member, inst string
	at           time.Time
}

type partitionMember struct {
	partition int
	member    string
}

// served follows, per partition, who handled its messages: the latest
// handler, and since the last mark, when each member first handled any
// message and any message of each partition. A rebalance is timed from
// these: nothing else sees when work actually resumed under a new owner.
type served struct {
	mu          sync.Mutex
	last        map[int]handledBy
	since       time.Time
	byMember    map[string]time.Time
	byPartOwner map[partitionMember]time.Time
}

func newServed() *served {
	return &served{last: map[int]handledBy{}, byMember: map[string]time.Time{}, byPartOwner: map[partitionMember]time.Time{}}
}

func (s *served) observe(member, inst string, partition int, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[partition] = handledBy{member: member, inst: inst, at: at}
	if at.Before(s.since) {
		return
	}
	if _, ok := s.byMember[member]; !ok {
		s.byMember[member] = at
	}
	pm := partitionMember{partition, member}
	if _, ok := s.byPartOwner[pm]; !ok {
		s.byPartOwner[pm] = at
	}
}

// mark starts counting first messages afresh from t.
func (s *served) mark(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.since = t
	clear(s.byMember)
	clear(s.byPartOwner)
}

// firstBy is when member first handled a message since the mark.
func (s *served) firstBy(member string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byMember[member]
	return t, ok
}

// firstIn is when member first handled a message of partition since the mark.
func (s *served) firstIn(partition int, member string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.byPartOwner[partitionMember{partition, member}]
	return t, ok
}

// lastIn is the latest handler of partition's messages.
func (s *served) lastIn(partition int) (handledBy, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.last[partition]
	return h, ok
}

// handler simulates work on each message, then double-acks it. What was
// handled is fed to the verifier before the ack: the work is done even if
// the ack is lost (as when the connection dies), so a redelivery shows up
// as a duplicate, which is what idempotent handlers must absorb.
func (d *demo) handler(inst *instance) cg.Handler {
	sleep := d.o.Sleep
	return func(ctx context.Context, m *cg.Msg) {
		now := time.Now()
		d.clock.observe(inst.member, inst.name, m.PinID(), now)
		d.served.observe(inst.member, inst.name, m.Partition(), now)
		if sleep > 0 {
			time.Sleep(sleep) // the simulated work; never cut short
		}
		key, seq, _ := traffic.KeyOf(m.Headers())
		var streamSeq uint64
		if md, err := m.Metadata(); err == nil {
			streamSeq = md.Sequence.Stream
		}
		d.verifier.Observe(key, seq, streamSeq, inst.name)
		d.handled(inst, m)
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.DoubleAck(actx)
	}
}
