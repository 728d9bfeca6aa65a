package cg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// Fast failover. The server replaces a pinned instance only when it has
// not pulled for the pinned TTL: 2s by default, the reference's, and the
// TTL is part of the consumer's configuration, which every instance of a
// member (cg's or the reference's) must share. So instead of shortening
// it, the pinned cg instance answers on a subject named after its pin id,
// and each standby asks as soon as it stands by and then every
// LivenessInterval, waiting livenessTimeout for the answer.
//
//   - "No responders" from a pin that has answered before means its
//     connection is gone (the process died or was cut off): the standby
//     unpins it at once.
//   - livenessMisses timeouts in a row from a pin that has answered before
//     mean it is frozen (SIGSTOP, a stalled VM) or black-holed (the socket
//     open, nothing passing): the standby unpins it too.
//
// Either way the server pins a standby on its next pull, and the message
// the lost instance held unacked is handed back at once (nakOrphan) rather
// than after the ack wait. A pinned instance that never answered (the
// reference's) is never unpinned this way: it is left to the TTL.
//
//   - "No responders" from a pin under which the server has delivered
//     nothing means the pin is stranded: the server gave it to a pull
//     request whose instance had already withdrawn it. The server picks
//     the request to pin when it has a message to deliver, and it gives
//     the first waiting request without a pin id the new pin before it
//     looks whether anyone still listens on the request's reply subject;
//     finding no one, it drops the request but keeps the pin, refuses
//     every other instance's pulls and frees the pin only at its TTL. An
//     instance that let go of the consumer before it was pinned (a
//     partition moved on again before its pin came to it, a standby that
//     stopped) leaves such a request behind for a moment. The standby
//     unpins it at once. That takes nothing from anyone: a pinned
//     instance learns its pin only from a message delivered under it, and
//     the server gives the pin and delivers that message in one step, so
//     a pin with nothing delivered under it holds no message, and no
//     instance can be acting on it.
//
// Fencing must match: an instance unpinned while frozen or cut off must
// know it before it acks anything. The first missed request may be sent
// just before the freeze, so the unpin comes at least
// (livenessMisses-1)*LivenessInterval + livenessTimeout after it; the
// pinned instance fences (asks the server whether the pin is still its,
// and gives it up unless so) once its pull loop stood still, or nothing
// came from the server, for fenceAfter, two thirds of that bound. Pull
// requests carry an idle heartbeat so that a healthy, idle connection is
// heard from well within it. Instances of one member should run with the
// same LivenessInterval.

// livenessMisses is how many liveness requests in a row a pin that
// answered before must leave unanswered to be taken for frozen.
const livenessMisses = 2

// minLivenessInterval is the shortest JoinOptions.LivenessInterval.
const minLivenessInterval = 50 * time.Millisecond

// livenessTimeout is how long a standby waits for the pinned instance's
// answer.
func (m *Member) livenessTimeout() time.Duration {
	return m.opts.LivenessInterval * 4 / 5
}

// fenceAfter is how long a pinned instance may go without its pull loop
// running, or without hearing from the server, before it doubts its pin:
// well below the soonest a standby can unpin a frozen instance, and never
// above the pinned TTL.
func (m *Member) fenceAfter() time.Duration {
	if m.opts.LivenessInterval <= 0 {
		return m.opts.PinnedTTL
	}
	return min(m.unpinAfter()*2/3, m.opts.PinnedTTL)
}

// unpinAfter is the soonest a standby unpins a pinned instance that stopped
// answering, counted from the first liveness request it missed, and the
// least time a pin that never answered must have been held before a
// standby of a partition consumer unpins it.
func (m *Member) unpinAfter() time.Duration {
	return time.Duration(livenessMisses-1)*m.opts.LivenessInterval + m.livenessTimeout()
}

// heartbeat is the idle heartbeat asked for on each pull: a few per fence
// threshold, and below half the pull expiry as the server requires.
func (m *Member) heartbeat() time.Duration {
	return max(min(100*time.Millisecond, m.fenceAfter()/3, m.opts.PullExpiry/3), 10*time.Millisecond)
}

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
// the pinned instance is still there, at once and then every interval, and
// unpins it when it is gone or frozen.
func (m *Member) watchdog(b *binding) {
	tick := time.NewTicker(m.opts.LivenessInterval)
	defer tick.Stop()
	answered := map[string]bool{} // pins that answered at least once
	var missed string             // the pin that missed the last requests
	misses := 0
	first := true
	var soon <-chan time.Time // a look at a pin too young to judge, when it no longer is
	for {
		if !first {
			select {
			case <-b.stopPull:
				return
			case <-tick.C:
			case <-soon:
			}
		}
		first = false
		soon = nil
		select {
		case <-b.stopPull:
			return
		default:
		}
		if m.PinID() != "" {
			misses = 0
			continue
		}
		ps := m.pinState()
		pin := ps.pin
		if pin == "" {
			continue
		}
		if pin != missed {
			missed, misses = pin, 0
		}
		timeout := m.livenessTimeout()
		asked := time.Now()
		_, err := m.c.Conn().Request(m.livenessSubject(pin), nil, timeout)
		var why string
		stranded := false // the pin never answered: it may be no instance's
		switch {
		case err == nil:
			if len(answered) > 64 {
				clear(answered)
			}
			answered[pin] = true
			misses = 0
			continue
		case errors.Is(err, nats.ErrNoResponders) && answered[pin]:
			why = "is gone, its connection closed"
		case errors.Is(err, nats.ErrNoResponders) && ps.undelivered():
			why = "was never delivered to: the server pinned a pull request withdrawn by an instance that let go of the consumer"
			stranded = true
		case errors.Is(err, nats.ErrNoResponders) && ps.cgOnly && ps.unacked() && ps.age < m.unpinAfter():
			soon = time.After(m.unpinAfter() - ps.age)
			continue
		case errors.Is(err, nats.ErrNoResponders) && ps.cgOnly && ps.unacked():
			// What was delivered under it went to an inbox that was
			// closing: the request was withdrawn while the message was on
			// its way, or its connection closed under it (the server it
			// came through stopping just as a new consumer leader pinned
			// it). Only cg instances read a partition consumer or a
			// consumer with cg's marks (the reference library is refused
			// one), and one pinned answers as soon as it reads its first
			// message; one that has not for this long stood still, and
			// doubts the pin (notePin), as a frozen one fences.
			why = fmt.Sprintf("has answered no liveness check in the %s since the server pinned it, nor acked anything (what the server delivered under it went to an instance that had let go of the consumer)", ps.age.Round(time.Millisecond))
			stranded = true
		case errors.Is(err, nats.ErrTimeout) && answered[pin]:
			if time.Since(asked) > 2*timeout {
				continue // this process was starved: not the pin's fault
			}
			if misses++; misses < livenessMisses {
				continue
			}
			why = fmt.Sprintf("did not answer %d liveness checks in a row (frozen or cut off)", misses)
		default:
			continue
		}
		// Other standbys may have seen it too: let one go first.
		time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
		if again := m.pinState(); again.pin != pin || (stranded && ps.undelivered() && !again.undelivered()) {
			continue
		}
		if stranded {
			// Asked once more right before the unpin: an instance the pin
			// is given to answers from its first message on.
			if _, err := m.c.Conn().Request(m.livenessSubject(pin), nil, timeout); !errors.Is(err, nats.ErrNoResponders) {
				continue
			}
		}
		// Held from before the unpin until the naks are sent: this
		// instance's stage, first delivered to under the pin that
		// follows, waits for them before it takes stock (handBackOrphans).
		m.handOff.mu.Lock()
		ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
		err = m.c.unpinConsumer(ctx, m.cstream, m.consumer)
		cancel()
		handedBack := false
		// A pin nothing was delivered under holds nothing: what the pin
		// before it left was handed back by whoever let go of that one.
		if err == nil && !ps.undelivered() {
			if handedBack = m.nakOrphan(); handedBack {
				m.handOff.at = time.Now()
			}
		}
		m.handOff.mu.Unlock()
		if err == nil {
			delete(answered, pin)
			misses = 0
			reason := "the pinned instance (pin " + shortID(pin) + ") " + why + ": unpinned it so a standby takes over now"
			if stranded {
				reason = "pin " + shortID(pin) + " " + why + ": unpinned it so a standby takes over now"
			}
			if handedBack {
				reason += ", and handed what it held unacked back for redelivery"
			}
			m.emit(Event{Kind: EventWarning, PinID: pin, Reason: reason})
		}
	}
}

// orphanHandOff is the watchdog's hand back of a lost pinned instance's
// unacked window (nakOrphan), as this instance's concurrent stage needs to
// know it when it is first delivered to under the pin that follows: a
// second nak of the window would have the server redeliver again what is
// already on its way here, each message one delivery further towards its
// limit and the new pin's barrier held until they all came twice.
type orphanHandOff struct {
	mu sync.Mutex // held by the watchdog from the unpin until the naks are sent
	at time.Time  // when the window was last handed back; zero once taken
}

// handOffFresh is how soon after the watchdog handed a window back a new
// pin must be first delivered to for the window to count as handed back:
// the server pins a waiting standby as soon as the unpin is done.
const handOffFresh = time.Second

// takeHandOff reports whether the watchdog has just handed back the
// window of the instance it unpinned, waiting for it if it is under way,
// and forgets it.
func (m *Member) takeHandOff() bool {
	m.handOff.mu.Lock()
	defer m.handOff.mu.Unlock()
	fresh := !m.handOff.at.IsZero() && time.Since(m.handOff.at) < handOffFresh
	m.handOff.at = time.Time{}
	return fresh
}

// serverPinOK is the member consumer's pin id as the server says, and
// whether the server could be asked at all.
func (m *Member) serverPinOK() (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return "", false
	}
	for _, pg := range cons.CachedInfo().PriorityGroups {
		if pg.Group == PriorityGroup {
			return pg.PinnedClientID, true
		}
	}
	return "", true
}

// confirmed reports whether pin is this instance's and not in doubt.
func (m *Member) confirmed(pin string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return pin != "" && m.pinID == pin && m.doubted != pin
}

// recheck asks the server whether pin, which the instance doubts, is still
// its own, and reports whether it may go on acking under it: only on a
// fresh confirmation, one whose answer came within the fence threshold (an
// answer that waited out a freeze proves nothing about the time after).
func (m *Member) recheck(b *binding, pin string) bool {
	for range 3 {
		unsure, gap := b.puller.unsure()
		if !unsure && m.confirmed(pin) {
			return true
		}
		m.fence(gap)
		if !m.confirmed(pin) {
			return false
		}
	}
	unsure, _ := b.puller.unsure()
	return !unsure && m.confirmed(pin)
}

// doubt reports whether the instance holds a pin fencing could not confirm.
func (m *Member) doubt() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doubted != "" && m.doubted == m.pinID
}

// pinState is what the server says of the member consumer's pin, all in
// one answer: its id ("" when it names none or cannot be asked), how long
// it has been held, and the consumer's last delivery and last ack.
type pinState struct {
	pin string
	// cgOnly: only cg instances read the consumer, so a pin that never
	// answered a liveness check is no reference instance's: a partition
	// consumer, or one with cg's marks, which the reference is refused.
	cgOnly    bool
	age       time.Duration // by the server's clock
	pinnedAt  time.Time
	delivered *time.Time // the last delivery, to any instance
	acked     *time.Time // the last ack, from any instance
}

// undelivered: the server delivered nothing under the pin. It gives a pin
// to a request and delivers that request's first message in one step, so
// an instance given the pin has had a message by the time anyone can see
// the pin, and learns the pin only from it.
func (s pinState) undelivered() bool {
	return s.pin != "" && !s.pinnedAt.IsZero() && (s.delivered == nil || s.delivered.Before(s.pinnedAt))
}

// unacked: nothing was acked since the pin was given.
func (s pinState) unacked() bool {
	return s.pin != "" && !s.pinnedAt.IsZero() && (s.acked == nil || s.acked.Before(s.pinnedAt))
}

func (m *Member) pinState() pinState {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return pinState{}
	}
	ci := cons.CachedInfo()
	for _, pg := range ci.PriorityGroups {
		if pg.Group == PriorityGroup && pg.PinnedClientID != "" {
			return pinState{pin: pg.PinnedClientID, age: ci.TimeStamp.Sub(pg.PinnedTS), pinnedAt: pg.PinnedTS,
				delivered: ci.Delivered.Last, acked: ci.AckFloor.Last,
				cgOnly: m.isPartitionRuntime() || isMarked(ci.Config.Metadata)}
		}
	}
	return pinState{}
}

// nakOrphan hands back what a dead pinned instance held unacked, which
// would otherwise block its partitions (a full max ack pending window: one
// message for a serial member, a whole batch and what was pulled behind it
// for a batch or lane member) until the ack wait ran out. It naks every
// stream sequence between the ack floor and the last one delivered, in
// order, on the ack subject the server itself uses for deliveries, with the
// last delivered consumer sequence (the server checks the consumer sequence
// is in range and ignores a nak of a sequence no longer pending, so one
// acked meanwhile or outside the consumer's filter is left alone). The
// server redelivers them in that order, ahead of anything new, to the next
// pinned instance.
func (m *Member) nakOrphan() bool {
	ctx, cancel := context.WithTimeout(m.ctx, time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return false
	}
	ci := cons.CachedInfo()
	if ci.NumAckPending == 0 || ci.Delivered.Consumer <= ci.AckFloor.Consumer {
		return false
	}
	upto := ci.Delivered.Stream + 1
	from := ci.AckFloor.Stream + 1
	if from >= upto {
		return false
	}
	from = max(from, upto-min(upto, maxOrphanNaks))
	nc := m.c.Conn()
	for seq := from; seq < upto; seq++ {
		subj := fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.0", m.cstream, m.consumer, seq, ci.Delivered.Consumer, time.Now().UnixNano())
		if nc.Publish(subj, []byte("-NAK")) != nil {
			return false
		}
	}
	return nc.FlushWithContext(ctx) == nil
}

// pullLostBeats is how many idle heartbeats in a row the outstanding pull
// may miss before it is taken for lost.
const pullLostBeats = 3

// pullLost reports whether the outstanding pull request is lost: it asked
// for idle heartbeats and nothing came for pullLostBeats of them. The server
// that held it went away (a restart, or the loss of the node leading the
// consumer: the client reconnects elsewhere and the new consumer leader
// never had the request); asking again now, instead of at the request's
// deadline (its expiry and a margin, 2s by default), lets the new leader
// serve this instance, or refuse its pin, a fraction of a second after it
// is elected. A pull asked again while the old one lives (heartbeats late
// on a starved machine) only adds a waiting request.
func (p *puller) pullLost() bool {
	heard := max(p.sentAt.UnixNano(), p.inboxHeard.Load())
	return time.Duration(time.Now().UnixNano()-heard) > pullLostBeats*p.m.heartbeat()
}

// ackReplyWait is how long one try of a double ack waits for the server's
// reply before the ack is sent again. The reply is lost, or nobody takes
// the ack at all ("no responders"), when the consumer's leader changes
// between the delivery and the ack (a node shut down, or in lame-duck mode
// handing its leaderships over): the new leader has the message still
// pending and takes the ack sent again. Without the retry the handler
// waited out its whole deadline (2 s for the command line's consume), or
// gave up at once and left the message to the ack wait, and every message
// of its key waited behind it. An ack sent twice is harmless: the server
// answers an ack of a message no longer pending.
const ackReplyWait = 300 * time.Millisecond

// ackNoLeaderFor bounds how long acks answered "no responders" are sent
// again: longer than a leadership handover, short enough that an ack of a
// message whose consumer was deleted fails soon.
const ackNoLeaderFor = time.Second

// ackSyncRetrying acks m and waits for the server's confirmation, sending
// the ack again every ackReplyWait (every 50ms, for up to ackNoLeaderFor,
// after "no responders") until one is confirmed or ctx ends.
func ackSyncRetrying(ctx context.Context, m *nats.Msg) error {
	var noLeaderSince time.Time
	for {
		tctx, cancel := context.WithTimeout(ctx, ackReplyWait)
		err := m.AckSync(nats.Context(tctx))
		cancel()
		lost := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout)
		noLeader := errors.Is(err, nats.ErrNoResponders)
		if noLeader && noLeaderSince.IsZero() {
			noLeaderSince = time.Now()
		}
		switch {
		case !lost && !noLeader:
			return err
		case ctx.Err() != nil:
			return ctx.Err()
		case noLeader:
			if time.Since(noLeaderSince) >= ackNoLeaderFor {
				return err
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// lostDeliveries finds the deliveries a reconnect or a leadership change
// lost. A message the server sent down a connection that then closed (its
// server stopping, or closing its clients in lame-duck mode), or that a
// stopping consumer leader sent through a route it was closing, never
// arrives, but the consumer counts it delivered and pending: with max ack
// pending 1 nothing more of the member comes until its ack wait runs out
// (the new leader has no pin to refuse or give until it next delivers). So
// after a reconnect, and after the server says the consumer's leader
// changed or its server is shutting down, the pinned instance compares
// what the consumer has delivered with the last delivery it received, and
// naks what lies beyond, to be redelivered now (one that was only late is
// then handled once: its redelivery finds it acked). Owned by the pull
// loop.
type lostDeliveries struct {
	cseq, sseq uint64    // the highest consumer and stream sequence received
	reconnects uint64    // the connection's reconnects when last looked at
	checkAt    time.Time // when to compare, once a reconnect was seen
	// nakedAt is the consumer's last delivery (its consumer sequence)
	// when what lay beyond was last handed back, and renaks how many
	// times it was handed back again since: a consumer leader just
	// elected may drop a nak that comes before it has taken over the
	// deliveries (the message then waited for the ack wait all the same),
	// so the hand back is checked, and sent again while nothing at all
	// was delivered since.
	nakedAt uint64
	renaks  int
}

// lostRenaks bounds how many times a hand back that nothing followed is
// sent again, lostCheckDelay apart: well within the ack wait.
const lostRenaks = 4

// lostCheckDelay lets deliveries sent around a reconnect arrive before the
// consumer is asked what it has delivered.
const lostCheckDelay = 200 * time.Millisecond

func (l *lostDeliveries) note(msg *nats.Msg) {
	// Off the ack subject without allocating: this runs for every message.
	if _, sseq, cseq, ok := ackSeqs(msg); ok {
		l.cseq, l.sseq = max(l.cseq, cseq), max(l.sseq, sseq)
	}
}

// expectLoss has the deliveries compared after lostCheckDelay: the server
// said the consumer's leader changed, or is stopping.
func (l *lostDeliveries) expectLoss() {
	if l.checkAt.IsZero() {
		l.checkAt = time.Now().Add(lostCheckDelay)
	}
}

// checkLost runs on each tick of the pull loop.
func (p *puller) checkLost() {
	l := &p.lost
	if n := p.nc.Stats().Reconnects; n != l.reconnects {
		l.reconnects = n
		l.checkAt = time.Now().Add(lostCheckDelay)
		return
	}
	if l.checkAt.IsZero() || time.Now().Before(l.checkAt) || !p.nc.IsConnected() {
		return
	}
	l.checkAt = time.Time{}
	if p.m.PinID() == "" || l.cseq == 0 {
		l.nakedAt = 0
		return
	}
	again := l.nakedAt != 0
	n, delivered := p.m.nakBeyond(l.cseq, l.sseq, l.nakedAt)
	if n == 0 {
		l.nakedAt = 0
		return
	}
	if !again {
		l.renaks = 0
		p.m.emit(Event{Kind: EventWarning, PinID: p.m.PinID(), Reason: fmt.Sprintf(
			"the server delivered %d message(s) that never arrived (lost in a reconnect or with a consumer leader): handed them back for redelivery now rather than after the ack wait", n)})
	} else {
		l.renaks++
	}
	l.nakedAt = 0
	if l.renaks < lostRenaks {
		l.nakedAt = delivered
		l.checkAt = time.Now().Add(lostCheckDelay)
	}
}

// nakBeyond naks what the member consumer has delivered beyond consumer
// sequence cseq (stream sequences after sseq), returning how many of its
// deliveries that was and the consumer's last delivery (its consumer
// sequence). Only while the server names this instance's pin, or none (a
// new consumer leader knows no pin, and delivers to nobody until it gives
// one): what it delivered beyond went here. Under another instance's pin
// it went there, and is that instance's to settle. With onlyAt set (a
// hand back checked again), only when the consumer's last delivery is
// still onlyAt: anything delivered since means the hand back was taken.
func (m *Member) nakBeyond(cseq, sseq, onlyAt uint64) (int, uint64) {
	ctx, cancel := context.WithTimeout(m.ctx, time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return 0, 0
	}
	ci := cons.CachedInfo()
	if ci.NumAckPending == 0 || ci.Delivered.Consumer <= cseq || (onlyAt != 0 && ci.Delivered.Consumer != onlyAt) {
		return 0, 0
	}
	for _, pg := range ci.PriorityGroups {
		if pg.Group == PriorityGroup && pg.PinnedClientID != "" && pg.PinnedClientID != m.PinID() {
			return 0, 0
		}
	}
	from := max(sseq, ci.AckFloor.Stream) + 1
	upto := ci.Delivered.Stream
	if from > upto {
		return 0, 0
	}
	from = max(from, upto-min(upto, maxOrphanNaks))
	nc := m.c.Conn()
	for seq := from; seq <= upto; seq++ {
		subj := fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.0", m.cstream, m.consumer, seq, ci.Delivered.Consumer, time.Now().UnixNano())
		if nc.Publish(subj, []byte("-NAK")) != nil {
			return 0, 0
		}
	}
	if nc.FlushWithContext(ctx) != nil {
		return 0, 0
	}
	return int(ci.Delivered.Consumer - cseq), ci.Delivered.Consumer
}
