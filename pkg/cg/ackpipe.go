package cg

import (
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ackPipe sends the double acks of one binding without waiting for their
// replies (Msg.DoubleAckAsync): every ack is a publish to the message's ack
// subject with a reply subject under one wildcard subscription of the
// binding, so an ack costs no subscription, goroutine or timer of its own.
// The lane stage keeps the message's key held while its reply is
// outstanding, so a later message of the key is never handled before the
// earlier one's ack is confirmed, while the lane's worker takes other keys.
//
// An ack whose reply does not come in ackReplyWait is sent again (the
// reply is lost when the consumer's leader changes; an ack sent twice is
// harmless), one answered "no responders" is sent again every 50ms for up
// to ackNoLeaderFor, and one still unanswered after the pipe's bound (the
// ack wait: by then the server redelivers anyway) ends as a timeout.
type ackPipe struct {
	nc     *nats.Conn
	prefix string // replies come to prefix + "." + token
	sub    *nats.Subscription
	bound  time.Duration
	// acked is the binding's record of acked stream sequences (what a
	// redelivery is checked against).
	acked *seqRing
	// settled tells the delivery stage how an ack ended (after the
	// message's done callback has returned); set before the first send.
	settled func(raw *nats.Msg, acked bool)

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*pipedAck // by reply token
	bySeq   map[uint64]*pipedAck // by stream sequence
	timer   *time.Timer          // armed while anything is pending
	armed   bool
}

type pipedAck struct {
	raw      *nats.Msg
	token    uint64
	seq      uint64
	sentAt   time.Time
	deadline time.Time
	retryAt  time.Time // after "no responders": when to send again
	noLeader time.Time // when "no responders" was first answered
	done     func(error)
}

// ackPipeTick is how often outstanding acks are looked at for a resend or
// their end; far below ackReplyWait.
const ackPipeTick = 50 * time.Millisecond

func newAckPipe(nc *nats.Conn, bound time.Duration, acked *seqRing) (*ackPipe, error) {
	p := &ackPipe{nc: nc, prefix: nc.NewInbox(), bound: bound, acked: acked,
		pending: map[uint64]*pipedAck{}, bySeq: map[uint64]*pipedAck{}}
	sub, err := nc.Subscribe(p.prefix+".*", p.reply)
	if err != nil {
		return nil, err
	}
	p.sub = sub
	p.timer = time.AfterFunc(time.Hour, p.tick)
	p.timer.Stop()
	return p, nil
}

// send double-acks raw and calls done once its reply (or the end of its
// tries) is in.
func (p *ackPipe) send(raw *nats.Msg, done func(error)) {
	if raw.Reply == "" {
		done(nats.ErrMsgNoReply)
		return
	}
	now := time.Now()
	p.mu.Lock()
	p.next++
	a := &pipedAck{raw: raw, token: p.next, seq: streamSeq(raw), sentAt: now, deadline: now.Add(p.bound), done: done}
	p.pending[a.token] = a
	if a.seq != 0 {
		p.bySeq[a.seq] = a
	}
	if !p.armed {
		p.armed = true
		p.timer.Reset(ackPipeTick)
	}
	p.mu.Unlock()
	if err := p.publish(a); err != nil {
		p.finish(a, err)
	}
}

func (p *ackPipe) publish(a *pipedAck) error {
	var buf [96]byte
	reply := strconv.AppendUint(append(append(buf[:0], p.prefix...), '.'), a.token, 10)
	return p.nc.PublishRequest(a.raw.Reply, string(reply), ackBody)
}

var ackBody = []byte("+ACK")

// pendingSeq reports whether the ack of the message with stream sequence
// seq awaits its reply.
func (p *ackPipe) pendingSeq(seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.bySeq[seq]
	return ok
}

// reply takes the server's answer to one ack.
func (p *ackPipe) reply(msg *nats.Msg) {
	i := strings.LastIndexByte(msg.Subject, '.')
	token, err := strconv.ParseUint(msg.Subject[i+1:], 10, 64)
	if err != nil {
		return
	}
	p.mu.Lock()
	a := p.pending[token]
	if a == nil {
		// An answer to an ack sent twice, or settled already.
		p.mu.Unlock()
		return
	}
	if len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		// Nobody took the ack: the consumer's leader is changing (or
		// the consumer is gone). Send again shortly, for a while.
		now := time.Now()
		if a.noLeader.IsZero() {
			a.noLeader = now
		}
		if now.Sub(a.noLeader) < ackNoLeaderFor {
			a.retryAt = now.Add(50 * time.Millisecond)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		p.finish(a, nats.ErrNoResponders)
		return
	}
	p.mu.Unlock()
	p.finish(a, nil)
}

// tick sends again what waited too long for a reply and ends what is past
// the bound.
func (p *ackPipe) tick() {
	now := time.Now()
	var again, over []*pipedAck
	p.mu.Lock()
	for _, a := range p.pending {
		switch {
		case now.After(a.deadline):
			over = append(over, a)
		case !a.retryAt.IsZero() && now.After(a.retryAt):
			a.retryAt, a.sentAt = time.Time{}, now
			again = append(again, a)
		case a.retryAt.IsZero() && now.Sub(a.sentAt) >= ackReplyWait:
			a.sentAt = now
			again = append(again, a)
		}
	}
	p.armed = len(p.pending) > 0
	if p.armed {
		p.timer.Reset(ackPipeTick)
	}
	p.mu.Unlock()
	for _, a := range again {
		_ = p.publish(a)
	}
	for _, a := range over {
		p.finish(a, nats.ErrTimeout)
	}
}

// finish ends a's ack once: its done callback first, then the record of
// what was acked, then the stage, so whatever sees the key free again sees
// the callback returned (the command's line out) before it.
func (p *ackPipe) finish(a *pipedAck, err error) {
	p.mu.Lock()
	if p.pending[a.token] != a {
		p.mu.Unlock()
		return
	}
	delete(p.pending, a.token)
	p.mu.Unlock()
	a.done(err)
	// A timed-out ack may still have been applied, as DoubleAck takes it:
	// the message was handled, and a redelivery is settled, not handled.
	acked := err == nil || errors.Is(err, nats.ErrTimeout)
	if acked && a.seq != 0 {
		p.acked.add(a.seq)
	}
	p.mu.Lock()
	if p.bySeq[a.seq] == a {
		delete(p.bySeq, a.seq)
	}
	p.mu.Unlock()
	if p.settled != nil {
		p.settled(a.raw, acked)
	}
}

// close stops listening for replies; the stage has waited for every ack
// in flight by then.
func (p *ackPipe) close() {
	p.timer.Stop()
	_ = p.sub.Unsubscribe()
}

// pipeAcks gives binding b an ack pipe when its delivery stage can hold a
// key while the key's ack awaits its reply: only the lane stage can, and
// only without a retry policy or observers, which settle a message by
// what its handler call left behind.
func (m *Member) pipeAcks(b *binding, stage delivery) *ackPipe {
	ls, ok := stage.(*laneStage)
	if !ok || m.stages.poison != nil || m.obs != nil {
		return nil
	}
	p, err := newAckPipe(b.puller.nc, min(m.opts.AckWait, doubleAckTimeout), b.acked)
	if err != nil {
		return nil
	}
	p.settled = ls.ackSettled
	b.acks = p
	return p
}
