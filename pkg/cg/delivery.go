package cg

import (
	"context"
	"fmt"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
)

// The delivery stage is how pulled messages reach user code. The runtime
// (member.go, pull.go, liveness.go and the kind's strategy) pulls, tracks
// the pin, fences, watches the pinned instance and rebalances; it hands
// each message to the stage and, when it lets go of the consumer, asks the
// stage for everything back. The stage decides only how messages are
// handed to the handler: one at a time (serialDelivery), on lanes by key
// (one key in order, many lanes at once; lanes.go) or in batches (up to N
// gathered for a wait, one call; batch.go). The runtime
// does not change when another stage is plugged in.

// deliverySink is what the runtime gives a stage.
type deliverySink interface {
	// admit is asked for each message right before it goes to user code
	// (not when it is accepted: a message may wait in a stage while the
	// pin is lost or the instance fences or stops). When the message must
	// not be handled it settles it itself (a nak hands it to the next
	// pinned instance or owner; a redelivery of one already acked is acked
	// again) and returns false; the stage then drops it and goes on.
	admit(raw *nats.Msg) bool
	// handle gives one admitted message to the user's handler and returns
	// when the handler does. The handler settles it (or leaves it to the
	// ack wait).
	handle(raw *nats.Msg)
	// acked reports whether raw was acked through the runtime's message
	// (its ack reached the server, or may have).
	acked(raw *nats.Msg) bool
	// keepAlive tells the server raw is still being worked on (an
	// in-progress ack), for a stage that holds messages queued for longer
	// than the ack wait. It refuses, like an ack, under a doubtful pin.
	keepAlive(raw *nats.Msg) error
	// handBackOrphans, asked by a concurrent stage when it is first
	// delivered to under a pin (raw is that first message), naks every
	// message the previous pinned instance may have left unacked (stream
	// sequences between the ack floor and raw's; the server ignores a nak
	// of one already acked), so they are redelivered at once and ahead of
	// anything new, instead of after the ack wait behind later messages
	// of their keys. (When this instance's watchdog has just handed them
	// back, having unpinned a lost instance, it waits for that and sends
	// no naks of its own.) It returns the consumer sequence the consumer
	// had delivered up to once the naks were sent: a message delivered
	// new after it was delivered after every redelivery they caused; and
	// how many messages were pending then: once the stage has been
	// delivered that many under the new pin, it holds every one of them
	// (nothing else can come ahead of later messages). ok is false when
	// nothing was left to hand back.
	handBackOrphans(raw *nats.Msg) (after uint64, pending int, ok bool)
	// deliveredUpTo asks the server for the consumer sequence the
	// consumer has delivered up to: a stage whose new-pin barrier has
	// taken in nothing for a while learns whether deliveries are still on
	// their way to it.
	deliveredUpTo(ctx context.Context) (uint64, error)
	// ackPending reports whether raw's double ack awaits its reply
	// (Msg.DoubleAckAsync): a stage that holds keys holds raw's until it
	// is in.
	ackPending(raw *nats.Msg) bool
	// holdUntil is how long a stage that holds keys holds the key of raw,
	// which ended unacked, beyond its own bound: past the retry policy's
	// backoff, or until it comes back when parked; false when the policy
	// has no say (poison.go).
	holdUntil(raw *nats.Msg) (time.Time, bool)

	// The retry policy (JoinOptions.Retry), for a stage that hands several
	// messages to one user call and so cannot leave the policy to handle
	// (the batch stage). Without a policy, nothing waits and nothing is
	// poison.
	//
	// poisonWaiting reports whether the policy must deal with raw alone
	// before user code sees it (parked before, or its dead letter owed).
	poisonWaiting(raw *nats.Msg) bool
	// poisonFirst deals with such a message: it holds it parked again,
	// dead-letters it, or retries its owed dead letter, and returns false;
	// or it returns true when the message was released to be handled once
	// more (user code must see it, alone).
	poisonFirst(raw *nats.Msg) bool
	// poisonNow takes the policy's action (dead-letter, park, stop) on
	// raw, which user code failed on its own (err its last error).
	poisonNow(raw *nats.Msg, err error)
	// poisonHandled tells the policy user code handled raw and it was
	// acked (a parked message released to retry is then forgotten).
	poisonHandled(raw *nats.Msg)
	// retryPolicy is the member's retry policy, nil without one.
	retryPolicy() *RetryPolicy

	// For a stage that settles messages itself rather than leaving them to
	// the handler (the batch stage):
	//
	// unsettledMsg is raw as user code sees it when the stage settles it:
	// every settle method returns refused and does nothing.
	unsettledMsg(raw *nats.Msg, refused error) *Msg
	// ack acks raw as the handler's Msg would (refused under a doubtful
	// pin, remembered against redeliveries): a confirmed double ack waiting
	// at most confirm, or a plain ack when confirm is 0.
	ack(raw *nats.Msg, confirm time.Duration) error
	// ctx is cancelled when the instance stops or lets go of the consumer.
	ctx() context.Context
	// fail stops the instance with err, for cause (the words: reason),
	// handing the pin over when the cause says so. It does not wait for
	// the stop, which waits for the stage.
	fail(err error, cause EventCause, reason string)
	// observeBatch runs the observers' start hooks for the messages of a
	// batch about to be handed over and returns what runs their done hooks;
	// nil without observers.
	observeBatch(ctx context.Context, no uint64, items []*batchItem) func(MessageResult)
}

// delivery is a stage. The runtime calls it from one goroutine (the
// binding's handler loop), in this order: accept any number of times,
// then handBack once, then accept again for messages still on their way
// (each must be handed back, behind what the stage holds of its key),
// then wait once. The contract:
//
//   - accept takes the next pulled message, in delivery order. It may
//     hand it to user code before returning (serial) or queue it and
//     return (lanes, batches); it may block while the stage is full, which
//     holds the pull loop back. Every accepted message goes through
//     sink.admit right before user code sees it.
//   - handBack is called once the runtime lets go of the consumer (stop,
//     pin lost to a release, rebalance, a consumer recreated): it naks, in
//     delivery order, every accepted message not yet given to user code,
//     so the next pinned instance or owner gets them at once and in order.
//     A message of a key whose earlier message is still in user code is
//     handed back too, never handled after the release began.
//   - wait blocks until no message is in user code's hands (the handler
//     calls in flight have returned, finished or abandoned), and reports
//     whether the last message user code was given was acked: a stop or
//     rebalance loses nothing when it was.
type delivery interface {
	accept(raw *nats.Msg)
	handBack()
	wait() (lastAcked bool)
}

// newDelivery makes the stage for a binding: JoinOptions.stage when a test
// sets one, the lane stage (lanes.go) with Concurrency above 1, else the
// serial stage.
func (m *Member) newDelivery(sink deliverySink) delivery {
	if m.opts.stage != nil {
		return m.opts.stage(sink)
	}
	return stageOf(m.opts).build(m.opts, &m.stages, sink)
}

// serialDelivery hands messages to the handler one at a time, in delivery
// order, on the caller's goroutine: accept returns once the handler has.
// Nothing is ever queued, so handBack has nothing to give back and wait
// nothing to wait for.
type serialDelivery struct {
	sink deliverySink
	// last is the message last given to the handler; lastAcked whether it
	// was acked by the time the handler returned.
	last      *nats.Msg
	lastAcked bool
}

func newSerialDelivery(sink deliverySink) *serialDelivery { return &serialDelivery{sink: sink} }

func (d *serialDelivery) accept(raw *nats.Msg) {
	if !d.sink.admit(raw) {
		return
	}
	d.last = raw
	d.sink.handle(raw)
	d.lastAcked = d.sink.acked(raw)
}

func (d *serialDelivery) handBack() {}

func (d *serialDelivery) wait() bool { return d.last == nil || d.lastAcked }

// bindingSink is the runtime's side of a binding's stage.
type bindingSink struct {
	m *Member
	b *binding
	// run is the observed handler call in progress (observe.go), nil
	// without observers.
	run *observedRun
}

func (s bindingSink) admit(raw *nats.Msg) bool {
	m, b := s.m, s.b
	if b.releasing.Load() || m.stopping.Load() {
		_ = raw.Nak()
		return false
	}
	if m.staleMsg(raw) {
		// Delivered under a pin we can no longer be sure of: the
		// new pinned instance gets it instead.
		_ = raw.Nak()
		return false
	}
	if delivered, seq, _, ok := ackSeqs(raw); ok && delivered > 1 && (b.acked.has(seq) || (b.acks != nil && b.acks.pendingSeq(seq))) {
		// Handled and acked already (or its ack awaits the reply); the
		// ack did not make it in time. Settle it again instead of
		// handling it twice.
		_ = raw.Ack()
		return false
	}
	return true
}

func (s bindingSink) handle(raw *nats.Msg) {
	if s.m.obs != nil {
		s.observeHandle(raw) // with the observers' hooks around (observe.go)
		return
	}
	s.deliver(raw)
}

// callHandler gives raw to the user's handler.
func (s bindingSink) callHandler(raw *nats.Msg) {
	m := s.m
	subject, p := partition.StripPartition(raw.Subject)
	h := &handedMsg{j: s.msg(raw)}
	h.msg = Msg{Msg: &h.j, subject: subject, partition: p, pinID: raw.Header.Get("Nats-Pin-Id"),
		ackBound: min(m.opts.AckWait, doubleAckTimeout)}
	m.handler(s.handlerCtx(), &h.msg)
}

// handedMsg is a message as the handler gets it and the runtime's message
// inside it, made together: one allocation for every message handled
// where the two were two.
type handedMsg struct {
	msg Msg
	j   jsMsg
}

func (s bindingSink) msg(raw *nats.Msg) jsMsg {
	return jsMsg{m: raw, nc: s.b.puller.nc, mem: s.m, acked: s.b.acked, pipe: s.b.acks}
}

// ackPending reports whether raw's double ack awaits its reply
// (DoubleAckAsync): the lane stage then holds its key until it is in.
func (s bindingSink) ackPending(raw *nats.Msg) bool {
	return s.b.acks != nil && s.b.acks.pendingSeq(streamSeq(raw))
}

func (s bindingSink) acked(raw *nats.Msg) bool {
	_, seq, _, ok := ackSeqs(raw)
	return ok && s.b.acked.has(seq)
}

func (s bindingSink) keepAlive(raw *nats.Msg) error { return s.msg(raw).InProgress() }

func (s bindingSink) unsettledMsg(raw *nats.Msg, refused error) *Msg {
	subject, p := partition.StripPartition(raw.Subject)
	return &Msg{Msg: unsettled{jsMsg: s.msg(raw), refused: refused}, subject: subject, partition: p, pinID: raw.Header.Get("Nats-Pin-Id")}
}

func (s bindingSink) ack(raw *nats.Msg, confirm time.Duration) error {
	if confirm <= 0 {
		return s.msg(raw).Ack()
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirm)
	defer cancel()
	return s.msg(raw).DoubleAck(ctx)
}

func (s bindingSink) ctx() context.Context { return s.m.ctx }

func (s bindingSink) fail(err error, cause EventCause, reason string) {
	go s.m.finish(err, cause, reason)
}

func (s bindingSink) observeBatch(ctx context.Context, no uint64, items []*batchItem) func(MessageResult) {
	if s.m.obs == nil {
		return nil
	}
	return s.m.observeBatch(ctx, no, items) // observe.go
}

// unsettled is a message as user code sees it when a stage settles it:
// everything but the settle methods, which return refused.
type unsettled struct {
	jsMsg
	refused error
}

func (u unsettled) Ack() error                         { return u.refused }
func (u unsettled) DoubleAck(context.Context) error    { return u.refused }
func (u unsettled) Nak() error                         { return u.refused }
func (u unsettled) NakWithDelay(time.Duration) error   { return u.refused }
func (u unsettled) InProgress() error                  { return u.refused }
func (u unsettled) Term() error                        { return u.refused }
func (u unsettled) TermWithReason(reason string) error { return u.refused }

func (s bindingSink) poisonWaiting(raw *nats.Msg) bool {
	return s.m.stages.poison != nil && s.m.stages.poison.waiting(raw)
}

func (s bindingSink) poisonFirst(raw *nats.Msg) bool {
	return s.m.stages.poison == nil || s.m.stages.poison.first(s, raw)
}

func (s bindingSink) poisonNow(raw *nats.Msg, err error) {
	if s.m.stages.poison != nil {
		s.m.stages.poison.now(s, raw, err)
	}
}

func (s bindingSink) poisonHandled(raw *nats.Msg) {
	if s.m.stages.poison != nil {
		s.m.stages.poison.handled(raw)
	}
}

func (s bindingSink) retryPolicy() *RetryPolicy {
	if s.m.stages.poison == nil {
		return nil
	}
	return &s.m.stages.poison.pol
}

// maxOrphanNaks bounds the naks handBackOrphans sends.
const maxOrphanNaks = 20000

func (s bindingSink) deliveredUpTo(ctx context.Context) (uint64, error) {
	cons, err := s.m.c.js.Consumer(ctx, s.m.cstream, s.m.consumer)
	if err != nil {
		return 0, err
	}
	return cons.CachedInfo().Delivered.Consumer, nil
}

func (s bindingSink) handBackOrphans(raw *nats.Msg) (uint64, int, bool) {
	m := s.m
	md, err := raw.Metadata()
	if err != nil {
		return 0, 0, false
	}
	handedBack := m.takeHandOff()
	if md.Sequence.Consumer == 1 && md.NumDelivered == 1 {
		// The consumer's very first delivery (since it was made or
		// reset, which clears what was pending): nothing was delivered
		// before it, so no earlier pin can have left anything unacked,
		// and asking the consumer (three round trips before the
		// partition's first message is handled) would find nothing.
		return 0, 0, false
	}
	ctx, cancel := context.WithTimeout(m.ctx, 2*time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return 0, 0, false
	}
	ci := cons.CachedInfo()
	upto := md.Sequence.Stream
	if md.NumDelivered > 1 {
		upto = ci.Delivered.Stream + 1
	}
	from := ci.AckFloor.Stream + 1
	if ci.NumAckPending <= 1 || from >= upto {
		return 0, 0, false
	}
	if !handedBack {
		from = max(from, upto-min(upto, maxOrphanNaks))
		if md.NumDelivered > 1 {
			// The server is redelivering (what the previous instance handed
			// back, or what its ack wait ran out on): the rest of that burst
			// is on its way here, and a nak of one already delivered here
			// would have it delivered yet again. Let everything the consumer
			// had delivered when it was asked land first, and nak only what
			// did not come. (Judged by consumer sequence, not by a quiet: a
			// loaded process takes in its socket late, and a nak of what it
			// had not read yet sent those messages round a third time.)
			// Bounded: a delivery a reconnect lost never lands.
			for wait := time.Now().Add(time.Second); s.b.puller.gotUpTo.Load() < ci.Delivered.Consumer && time.Now().Before(wait) && ctx.Err() == nil; {
				time.Sleep(time.Millisecond)
			}
		}
		nc := m.c.Conn()
		for seq := from; seq < upto; seq++ {
			if s.b.puller.got.has(seq) {
				continue
			}
			subj := fmt.Sprintf("$JS.ACK.%s.%s.1.%d.%d.%d.0", m.cstream, m.consumer, seq, ci.Delivered.Consumer, time.Now().UnixNano())
			_ = nc.Publish(subj, []byte("-NAK"))
		}
		_ = nc.FlushWithContext(ctx)
	}
	// The server queues acks for the consumer's own goroutine: by the
	// second answer of two in a row it has all but surely taken them in.
	var after uint64
	var pending int
	for range 2 {
		if cons, err = m.c.js.Consumer(ctx, m.cstream, m.consumer); err != nil {
			return 0, 0, false
		}
		after, pending = cons.CachedInfo().Delivered.Consumer, cons.CachedInfo().NumAckPending
	}
	return after, pending, true
}
