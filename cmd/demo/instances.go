package demo

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/cmd/internal/traffic"
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

// handler simulates work on each message, then double-acks it. What was
// handled is fed to the verifier before the ack: the work is done even if
// the ack is lost (as when the connection dies), so a redelivery shows up
// as a duplicate, which is what idempotent handlers must absorb.
func handler(inst *instance, sleep time.Duration, v *traffic.Verifier, clk *clock) cg.Handler {
	return func(ctx context.Context, m *cg.Msg) {
		clk.observe(inst.member, inst.name, m.PinID(), time.Now())
		if sleep > 0 {
			time.Sleep(sleep) // the simulated work; never cut short
		}
		key, seq, _ := traffic.KeyOf(m.Headers())
		var streamSeq uint64
		if md, err := m.Metadata(); err == nil {
			streamSeq = md.Sequence.Stream
		}
		v.Observe(key, seq, streamSeq, inst.name)
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.DoubleAck(actx)
	}
}
