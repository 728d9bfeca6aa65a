package cg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
)

// Fast failover. The server replaces a pinned instance only when it has
// not pulled for the pinned TTL: 2s by default, the reference's, and the
// TTL is part of the consumer's configuration, which every instance of a
// member (cg's or the reference's) must share. So instead of shortening
// it, the pinned cg instance answers on a subject named after its pin id,
// and each standby asks every LivenessInterval. "No responders" from a
// pin that has answered before means its connection is gone (the process
// died or was cut off): the standby unpins it and the server pins a
// standby on its next pull; the message it held unacked is handed back at
// once (nakOrphan) rather than after the ack wait. A frozen process (SIGSTOP) keeps its
// connection and so its subscription; it is left to the TTL and to its own
// fencing. A pinned instance that never answered (the reference's) is
// never unpinned this way.

// livenessSubject is where the pinned instance with pin id pin answers.
func (m *Member) livenessSubject(pin string) string {
	return "_CG.PIN." + m.cstream + "." + m.consumer + "." + pin
}

// answerLiveness makes this instance answer for pin ("": for none).
func (m *Member) answerLiveness(pin string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.liveness != nil {
		_ = m.liveness.Unsubscribe()
		m.liveness = nil
	}
	if pin == "" || m.opts.LivenessInterval < 0 {
		return
	}
	sub, err := m.c.Conn().Subscribe(m.livenessSubject(pin), func(msg *nats.Msg) { _ = msg.Respond([]byte("ok")) })
	if err == nil {
		m.liveness = sub
	}
}

// watchdog runs while the instance is bound: as a standby it checks that
// the pinned instance is still connected, and unpins it when it is not.
func (m *Member) watchdog(b *binding) {
	tick := time.NewTicker(m.opts.LivenessInterval)
	defer tick.Stop()
	answered := map[string]bool{} // pins that answered at least once
	for {
		select {
		case <-b.stopPull:
			return
		case <-tick.C:
		}
		if m.PinID() != "" {
			continue
		}
		pin := m.pinnedID(b)
		if pin == "" {
			continue
		}
		_, err := m.c.Conn().Request(m.livenessSubject(pin), nil, min(m.opts.LivenessInterval*2, time.Second))
		switch {
		case err == nil:
			if len(answered) > 64 {
				clear(answered)
			}
			answered[pin] = true
		case errors.Is(err, nats.ErrNoResponders) && answered[pin]:
			// Other standbys may have seen it too: let one go first.
			time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
			if m.pinnedID(b) != pin {
				continue
			}
			ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
			s, err := m.c.js.Stream(ctx, m.cstream)
			if err == nil {
				err = s.UnpinConsumer(ctx, m.consumer, PriorityGroup)
			}
			cancel()
			if err == nil {
				delete(answered, pin)
				reason := "the pinned instance (pin " + shortID(pin) + ") is gone, its connection closed: unpinned it so a standby takes over now"
				if m.nakOrphan() {
					reason += ", and handed its unacked message back for redelivery"
				}
				m.emit(Event{Kind: EventWarning, PinID: pin, Reason: reason})
			}
		}
	}
}

// pinnedID is the member consumer's current pin id, as the server says.
func (m *Member) pinnedID(_ *binding) string { return m.serverPin() }

// nakOrphan hands back the message a dead pinned instance held unacked,
// which would otherwise block its partitions (max ack pending 1) until the
// ack wait ran out. It only acts when exactly one message is pending and
// it is the last one delivered, so its sequences are known for sure; the
// nak goes to the ack subject the server itself uses for deliveries.
func (m *Member) nakOrphan() bool {
	ctx, cancel := context.WithTimeout(m.ctx, time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return false
	}
	ci := cons.CachedInfo()
	if ci.NumAckPending != 1 || ci.Delivered.Consumer != ci.AckFloor.Consumer+1 {
		return false
	}
	subj := fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.0", m.cstream, m.consumer, ci.Delivered.Stream, ci.Delivered.Consumer, time.Now().UnixNano())
	return m.c.Conn().Publish(subj, []byte("-NAK")) == nil
}
