package cg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Ordered batches (JoinOptions.Batch): the batch stage gathers up to Size
// messages of the member, in stream order and all under one pin, for at
// most Wait after the first, and hands them to one BatchHandler call. On
// a nil error cg acks every message of the batch; on an error it calls the
// handler again with the very same batch, in the same order, after a
// backoff, and nothing delivered later reaches the handler before the
// batch succeeded. While the handler works and while it backs off, the
// batch's messages (and any queued behind it) are kept alive with
// in-progress acks, so a batch that outlives the ack wait is not
// redelivered behind the instance's back.
//
// After MaxAttempts failed calls the instance gives up: it stops with an
// error wrapping ErrBatchFailed (Member.StopCause is CauseBatchFailed),
// leaving the batch unacked; it naks the batch's messages in order and
// hands its pin over, so the next pinned instance of the member (a standby,
// or this one restarted) gets the same batch first, in order. It does not
// skip the batch or hand it back and carry on: carrying on would let later
// messages reach the sink before it, which is what a batch must never do.
//
// Under a retry policy (JoinOptions.Retry) the policy bounds the batch
// instead: MaxDeliver calls of the whole batch (when set), its Backoff
// between them (when set). A batch that fails them all is split in halves
// and each part called once, in stream order: a part that succeeds is
// acked, one that fails is halved again, until a part of one message
// fails, which is poison, and the policy's action is taken on it alone.
// Dead-lettered, it lets the member go on with the rest; parked, it holds
// everything behind it (a batch member is one ordering domain) until it is
// released; stop stops the instance with a *PoisonError. A message parked
// before, or whose dead letter is owed, is dealt with alone by the policy
// before anything behind it reaches the handler; one released to be
// retried is handed over alone, with the batch's attempts.
//
// Acks. cg's member consumers (and the reference library's) are explicit
// ack, so cg acks each message of a batch, in order (DoubleAck: each with a
// confirmed ack). One ack of the last message (AckAll) would settle the
// whole batch only on a consumer whose ack policy is AckAll, and it would
// be safe there only because, under one pin, the batch is every message
// this instance holds below its last: cg never creates such a consumer, so
// it never relies on it.
//
// The handler must not settle messages itself: Ack, Nak, Term, InProgress
// and DoubleAck of a batch's Msgs return an error and do nothing. Its
// context is cancelled when the instance stops or lets go of the consumer
// (pin handed over, rebalance): the batch in flight is then abandoned —
// unless the handler still returns nil, when it is acked as a finished
// batch — and every message it held is nak'ed in stream order, so the
// next pinned instance or owner gets the same messages, in order. Whatever
// a crash leaves unacked is redelivered the same way; sinks must be
// idempotent (pinning is not a lock), and a crash between the sink's write
// and the acks repeats at most that one batch.
//
// Batch and Concurrency above 1 are refused together: a batch is already
// the member's next N messages in order under one pin, which is what makes
// it safe to write and ack as one; batches of several partitions at once
// would need one gather, one retry and one hand back per partition, and a
// failing partition would still have to stop the member. To scale, give
// the group more members (partitions are the unit of parallelism).
//
// Max ack pending: a consumer cg creates for a batch instance gets max ack
// pending 4×Size unless MaxAckPending is given, which must then be at least
// Size (with just Size the server delivers the next batch only once the
// previous batch's acks are in, a round trip per batch; what is pulled
// behind the batch in hand waits in order, is kept alive, and is handed
// back in order on a stop or to the standby that unpins a dead instance); an existing member consumer with a lower one is refused
// (ErrConsumerConflict), since batches could never fill.

// Batch is one call's worth of messages.
type Batch struct {
	Number  uint64 // 1, 2, ... per instance, in order
	Msgs    []*Msg // in stream order, all under one pin
	Attempt int    // 1 for the first call, 2.. for retries of the same batch
}

// BatchHandler processes one batch. A nil error acks every message of it;
// an error has the same batch handed again (BatchOptions.MaxAttempts).
// ctx is cancelled when the instance stops or lets go of the consumer.
type BatchHandler func(ctx context.Context, b *Batch) error

// BatchOptions turn a member instance into a batch consumer
// (JoinOptions.Batch).
type BatchOptions struct {
	// Size N >= 1: at most N messages per call.
	Size int
	// Wait is how long the stage gathers after the first message of a
	// batch before it calls the handler with fewer than Size. 0 is
	// DefaultBatchWait; negative is refused.
	Wait time.Duration
	// Handler is called once per batch (and again per retry). Required;
	// JoinOptions' per-message handler must then be nil.
	Handler BatchHandler
	// MaxAttempts is how many calls a batch gets before the instance
	// gives up and stops (ErrBatchFailed). 0 is DefaultBatchMaxAttempts.
	// A retry policy's MaxDeliver, when set, takes its place, and the
	// instance then looks for the failing message instead of stopping.
	MaxAttempts int
	// Backoff is the delay before attempt 2, 3, ...; the last repeats.
	// nil is DefaultBatchBackoff. A retry policy's Backoff, when set,
	// takes its place.
	Backoff []time.Duration
	// DoubleAck acks each message with a confirmed double ack.
	DoubleAck bool
	// OnBatch, when set, is called after each attempt (from the stage's
	// goroutine; it must not block for long).
	OnBatch func(BatchEvent)
}

// BatchEvent is one attempt of a batch, reported to BatchOptions.OnBatch.
type BatchEvent struct {
	Number            uint64
	Size              int
	FirstSeq, LastSeq uint64 // stream sequences
	Attempt           int
	Acked             bool  // every message of the batch was acked
	Err               error // the handler's error, or the first ack's that failed
	// Final: the batch (or, once split, this part of it) is done with on
	// this instance (acked, given up after MaxAttempts, found poison, or
	// abandoned to a stop or release).
	Final bool
	// Poison, under a retry policy, is the action taken on a part of one
	// message that failed on its own (dead-letter, park, stop); 0 for
	// anything else.
	Poison PoisonAction
}

// Defaults of BatchOptions.
const (
	DefaultBatchWait        = 100 * time.Millisecond
	DefaultBatchMaxAttempts = 5
)

// DefaultBatchBackoff is the delay before the second, third... attempt of a
// failed batch when BatchOptions.Backoff is nil (the last repeats).
var DefaultBatchBackoff = []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond}

// CauseBatchFailed: the instance stopped because a batch's handler failed
// BatchOptions.MaxAttempts times (ErrBatchFailed).
const CauseBatchFailed EventCause = "batch_failed"

const reasonBatchFailed = "batch failed"

// batchDefaults checks and fills in o.Batch (withDefaults). It copies the
// options, so the caller's are never changed.
func (o JoinOptions) batchDefaults() (JoinOptions, error) {
	if o.Batch == nil {
		return o, nil
	}
	b := *o.Batch
	bad := func(f string, a ...any) (JoinOptions, error) {
		return o, fmt.Errorf("%w: "+f, append([]any{ErrInvalidBatch}, a...)...)
	}
	switch {
	case b.Handler == nil:
		return bad("a batch handler is required")
	case b.Size <= 0:
		return bad("batch size %d: use 1 or more", b.Size)
	case b.Wait < 0:
		return bad("batch wait %s is negative: use 0 (the default, %s) or more", b.Wait, DefaultBatchWait)
	case b.MaxAttempts < 0:
		return bad("batch max attempts %d is negative: use 0 (the default, %d) or more", b.MaxAttempts, DefaultBatchMaxAttempts)
	case o.Concurrency > 1:
		return bad("batches and concurrency %d cannot be combined: a batch is the member's next messages in order under one pin; use batches or concurrency, and more members to scale", o.Concurrency)
	case o.MaxAckPending != 0 && o.MaxAckPending < b.Size:
		return bad("max ack pending %d is below batch size %d: batches could never fill; raise max ack pending to %d or more, or leave it unset (cg then uses %d)", o.MaxAckPending, b.Size, b.Size, 4*b.Size)
	}
	for _, d := range b.Backoff {
		if d < 0 {
			return bad("batch backoff %s is negative", d)
		}
	}
	if b.Wait == 0 {
		b.Wait = DefaultBatchWait
	}
	if b.MaxAttempts == 0 {
		b.MaxAttempts = DefaultBatchMaxAttempts
	}
	if b.Backoff == nil {
		b.Backoff = DefaultBatchBackoff
	}
	b.Backoff = slices.Clone(b.Backoff)
	if o.MaxAckPending == 0 {
		o.MaxAckPending = 4 * b.Size
	}
	o.Batch = &b
	return o, nil
}

// batchSpec describes the batch stage (stage.go).
var batchSpec = stageSpec{
	name:   "batch",
	chosen: func(o JoinOptions) bool { return o.Batch != nil },
	handler: func(h Handler) error {
		if h != nil {
			return fmt.Errorf("%w: give a message handler or batch options with a batch handler, not both", ErrInvalidBatch)
		}
		return nil
	},
	defaults:        JoinOptions.batchDefaults,
	consumerProblem: batchAckPendingProblem,
	build: func(o JoinOptions, st *stageState, sink deliverySink) delivery {
		return newBatchStage(o, &st.batches, sink)
	},
}

// batchAckPendingProblem refuses an existing member consumer whose max ack
// pending is below the batch size.
func batchAckPendingProblem(o JoinOptions, consumer, stream string, cc jetstream.ConsumerConfig) error {
	if o.Batch == nil || cc.MaxAckPending < 0 || cc.MaxAckPending >= o.Batch.Size {
		return nil
	}
	return fmt.Errorf("%w: consumer %s on %s allows %d unacknowledged message(s) (max ack pending) but this instance gathers batches of %d, which could never fill; delete the consumer (or let it expire) so cg creates it with max ack pending %d, or use batches of %d",
		ErrConsumerConflict, consumer, stream, cc.MaxAckPending, o.Batch.Size, o.MaxAckPending, max(cc.MaxAckPending, 1))
}

// batchStage is the batch delivery stage (see the top of the file).
type batchStage struct {
	// stageKeep: mu, the hand back flag, the new-pin barrier and the
	// keep-alive loop (stage_keep.go).
	stageKeep
	numbers *atomic.Uint64 // numbers the instance's batches, across bindings
	o       BatchOptions
	ackWait time.Duration

	cond  *sync.Cond
	queue []*batchItem // accepted, not yet in a batch; stream-sequence order
	cur   []*batchItem // the batch the runner owns (admitted, unsettled)
	// owned: the runner has taken a batch and settles it (and, when the
	// hand back began meanwhile, the queue behind it) itself.
	owned      bool
	quit       chan struct{} // closed by handBack
	callCancel context.CancelFunc
	handed     bool // user code was given a batch
	lastAcked  bool // the last batch given was acked
	timer      *time.Timer
	// hold, under a retry policy, is the stream sequence of a message the
	// policy holds (parked, or its dead letter owed): nothing is handed to
	// user code until its redelivery is accepted, so it is dealt with
	// again ahead of everything behind it.
	hold uint64
	// retry: under a retry policy a batch that failed every attempt is
	// split until the message that fails is found (isolate).
	retry bool

	runDone chan struct{}
}

type batchItem struct {
	raw     *nats.Msg
	seq     uint64
	at      time.Time // accepted
	kept    time.Time // accepted or last kept alive
	msg     *Msg
	settled atomic.Bool // acked or nak'ed (read by keepDue)
}

func newBatchStage(o JoinOptions, numbers *atomic.Uint64, sink deliverySink) *batchStage {
	s := &batchStage{
		numbers: numbers, o: *o.Batch,
		ackWait: o.AckWait,
		quit:    make(chan struct{}),
		runDone: make(chan struct{}),
	}
	s.initKeep(s, sink, o.AckWait)
	if p := sink.retryPolicy(); p != nil {
		// The policy's bounds are the batch's: MaxDeliver calls of the
		// whole batch, its backoff between them.
		s.retry = true
		if p.MaxDeliver > 0 {
			s.o.MaxAttempts = p.MaxDeliver
		}
		if len(p.Backoff) > 0 {
			s.o.Backoff = slices.Clone(p.Backoff)
		}
	}
	s.cond = sync.NewCond(&s.mu)
	go s.run()
	go s.keepAlive()
	return s
}

func (s *batchStage) accept(raw *nats.Msg) {
	seq := streamSeq(raw)
	if pid := raw.Header.Get("Nats-Pin-Id"); pid != "" && pid != s.pin && !s.isHandingBack() {
		s.newPin(pid, raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	s.accepted(raw, seq, now)
	if s.handingBack && !s.owned {
		_ = raw.Nak()
		return
	}
	if s.hold != 0 && seq == s.hold {
		s.hold = 0 // back: it sorts in front of what waited behind it
	}
	i, found := slices.BinarySearchFunc(s.queue, seq, func(q *batchItem, seq uint64) int { return cmpSeq(q.seq, seq) })
	if found && seq != 0 {
		// Redelivered while it waited: keep the newer delivery.
		s.queue[i].raw, s.queue[i].kept = raw, now
		return
	}
	s.queue = slices.Insert(s.queue, i, &batchItem{raw: raw, seq: seq, at: now, kept: now})
	s.cond.Broadcast()
}

func (s *batchStage) queueDepth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

func (s *batchStage) isHandingBack() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handingBack
}

// barrierLifted wakes the runner (stageKeep). Under s.mu.
func (s *batchStage) barrierLifted() { s.cond.Broadcast() }

// wake has the runner look again at t.
func (s *batchStage) wakeAt(t time.Time) {
	if s.timer != nil {
		s.timer.Stop()
	}
	s.timer = time.AfterFunc(time.Until(t), func() {
		s.mu.Lock()
		s.cond.Broadcast()
		s.mu.Unlock()
	})
}

// take waits for the next batch: Size messages, or fewer once Wait has
// passed since the first. Under s.mu; false once the hand back began.
func (s *batchStage) take() ([]*batchItem, bool) {
	for {
		if s.handingBack {
			return nil, false
		}
		if len(s.queue) > 0 && !s.barrier && s.hold == 0 {
			first := s.queue[0].at // the earliest arrival (a redelivery sorts in front)
			for _, q := range s.queue {
				if q.at.Before(first) {
					first = q.at
				}
			}
			due := first.Add(s.o.Wait)
			if len(s.queue) >= s.o.Size || !time.Now().Before(due) {
				n := min(s.o.Size, len(s.queue))
				b := slices.Clone(s.queue[:n])
				s.queue = slices.Delete(s.queue, 0, n)
				return b, true
			}
			s.wakeAt(due)
		}
		s.cond.Wait()
	}
}

// run is the stage's one goroutine handing batches to user code.
func (s *batchStage) run() {
	defer close(s.runDone)
	for {
		s.mu.Lock()
		items, ok := s.take()
		if !ok {
			s.mu.Unlock()
			return
		}
		s.owned = true
		s.mu.Unlock()

		items = s.admit(items)
		if s.retry && len(items) > 0 {
			items = s.waiting(items)
		}
		if len(items) > 0 {
			s.mu.Lock()
			s.cur = items
			s.mu.Unlock()
			s.work(items)
		}

		s.mu.Lock()
		s.cur = nil
		s.owned = false
		if s.handingBack {
			for _, q := range items {
				if !q.settled.Load() {
					_ = q.raw.Nak()
				}
			}
			for _, q := range s.queue {
				_ = q.raw.Nak()
			}
			s.queue = nil
		}
		s.cond.Broadcast()
		s.mu.Unlock()
	}
}

// admit asks the runtime to admit each message right before user code sees
// it; the ones it settles itself are dropped. A batch all admitted before
// is admitted again before each retry: if any is refused now (the pin is
// gone, the instance releasing), the rest are nak'ed with it and the batch
// is dropped.
func (s *batchStage) admit(items []*batchItem) []*batchItem {
	out := items[:0]
	for _, q := range items {
		if !s.sink.admit(q.raw) {
			q.settled.Store(true)
			continue
		}
		if q.msg == nil {
			q.msg = s.sink.unsettledMsg(q.raw, ErrBatchAck)
		}
		out = append(out, q)
	}
	return out
}

// waiting lets the retry policy deal first with a message it knows
// (parked before, or owed to the dead-letter subject): the messages ahead
// of it go to user code as a batch of their own; it is dealt with alone
// (held, dead-lettered, or handed over alone when released to be retried);
// what follows it goes back to the queue. It returns what user code gets
// now.
func (s *batchStage) waiting(items []*batchItem) []*batchItem {
	i := slices.IndexFunc(items, func(q *batchItem) bool { return s.sink.poisonWaiting(q.raw) })
	switch {
	case i < 0:
		return items
	case i > 0:
		s.requeue(items[i:])
		return items[:i]
	}
	q := items[0]
	s.requeue(items[1:])
	s.holdUntilBack(q.seq)
	if s.sink.poisonFirst(q.raw) {
		s.unhold(q.seq)
		return items[:1]
	}
	q.settled.Store(true)
	if s.sink.acked(q.raw) {
		s.unhold(q.seq)
	}
	return nil
}

// holdUntilBack holds the queue until seq's redelivery is accepted; it is set
// before the policy acts, so that a redelivery quicker than the policy's
// return is not missed.
func (s *batchStage) holdUntilBack(seq uint64) {
	s.mu.Lock()
	s.hold = seq
	s.mu.Unlock()
}

// unhold lifts a hold for seq: the policy settled it for good.
func (s *batchStage) unhold(seq uint64) {
	s.mu.Lock()
	if s.hold == seq {
		s.hold = 0
		s.cond.Broadcast()
	}
	s.mu.Unlock()
}

// requeue puts items (admitted, not given to user code) back in the queue,
// in stream-sequence order. The queue gets fresh items; the ones given are
// marked settled, so they are neither kept alive nor nak'ed twice. One the
// server redelivered meanwhile is already queued, newer.
func (s *batchStage) requeue(items []*batchItem) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range items {
		if q.settled.Swap(true) {
			continue
		}
		if s.handingBack && !s.owned {
			_ = q.raw.Nak()
			continue
		}
		i, found := slices.BinarySearchFunc(s.queue, q.seq, func(r *batchItem, seq uint64) int { return cmpSeq(r.seq, seq) })
		if found {
			continue
		}
		s.queue = slices.Insert(s.queue, i, &batchItem{raw: q.raw, seq: q.seq, at: q.at, kept: q.kept, msg: q.msg})
	}
	s.cond.Broadcast()
}

func (s *batchStage) readmit(items []*batchItem) bool {
	for i, q := range items {
		if !s.sink.admit(q.raw) {
			q.settled.Store(true)
			for _, r := range items[i+1:] {
				_ = r.raw.Nak()
				r.settled.Store(true)
			}
			for _, r := range items[:i] {
				_ = r.raw.Nak()
				r.settled.Store(true)
			}
			return false
		}
	}
	return true
}

func (s *batchStage) backoff(attempt int) time.Duration {
	if len(s.o.Backoff) == 0 {
		return 0
	}
	return s.o.Backoff[min(attempt-1, len(s.o.Backoff)-1)]
}

// errAbandoned: a batch given up because the instance let go of the
// consumer between two attempts.
var errAbandoned = errors.New("abandoned: the instance let go of the consumer")

// work calls the handler with the batch until it succeeds, gives up or is
// abandoned. Messages it leaves unsettled are nak'ed by run on the hand
// back.
func (s *batchStage) work(items []*batchItem) {
	no := s.numbers.Add(1)
	attempts := s.o.MaxAttempts
	if s.retry && len(items) == 1 && s.sink.poisonWaiting(items[0].raw) {
		attempts = 1 // a parked message released to be retried once more
	}
	for attempt := 1; ; attempt++ {
		if attempt > 1 && !s.readmit(items) {
			s.report(no, items, attempt-1, false, errAbandoned, true, 0)
			return
		}
		err, ackErr := s.call(no, attempt, items)
		if err == nil {
			s.report(no, items, attempt, ackErr == nil, ackErr, true, 0)
			return
		}
		gone := s.isHandingBack() || s.sink.ctx().Err() != nil
		exhausted := attempt >= attempts
		split := exhausted && s.retry && !gone
		s.report(no, items, attempt, false, err, gone || exhausted && !split, 0)
		if gone {
			// Stopping: the hand back comes, and the batch must be nak'ed
			// before anything queued behind it.
			<-s.quit
			return
		}
		if split {
			s.isolate(no, attempt, items, err)
			return
		}
		if exhausted {
			first, last := items[0].seq, items[len(items)-1].seq
			s.sink.fail(fmt.Errorf("%w: batch %d (stream sequences %d-%d, %d messages) failed %d time(s), last: %v; it was left unacked for the next instance of the member",
				ErrBatchFailed, no, first, last, len(items), attempt, err), CauseBatchFailed, reasonBatchFailed)
			<-s.quit
			return
		}
		t := time.NewTimer(s.backoff(attempt))
		select {
		case <-t.C:
		case <-s.quit:
			t.Stop()
			return
		}
	}
}

// isolate finds, under a retry policy, the messages of a batch that failed
// every attempt that fail on their own: it halves the batch and calls user
// code once per part, in stream order, acking each part that succeeds and
// halving each that fails, until a part of one message fails, which is
// poison: the policy's action is taken on it alone. A dead-lettered
// message lets the rest go on; one the policy holds (parked, its dead
// letter not confirmed, or the instance stopping on it) holds everything
// behind it, which goes back to the queue in order. A batch of n messages
// with one poison message takes about 2·log2(n) more calls.
func (s *batchStage) isolate(no uint64, attempt int, items []*batchItem, err error) {
	parts := [][]*batchItem{items} // one message: it failed on its own already
	if len(items) > 1 {
		h := len(items) / 2
		parts = [][]*batchItem{items[:h], items[h:]}
	}
	for len(parts) > 0 {
		p := parts[0]
		if len(items) > 1 {
			attempt++
			if !s.readmit(p) {
				s.report(no, p, attempt-1, false, errAbandoned, true, 0)
				s.nakUnsettled(items)
				return
			}
			var ackErr error
			if err, ackErr = s.call(no, attempt, p); err == nil {
				s.report(no, p, attempt, ackErr == nil, ackErr, true, 0)
				parts = parts[1:]
				continue
			}
		}
		if s.isHandingBack() || s.sink.ctx().Err() != nil {
			s.report(no, p, attempt, false, err, true, 0)
			<-s.quit
			return
		}
		if len(p) > 1 {
			s.report(no, p, attempt, false, err, false, 0)
			h := len(p) / 2
			parts = append([][]*batchItem{p[:h], p[h:]}, parts[1:]...)
			continue
		}
		q := p[0]
		s.holdUntilBack(q.seq)
		s.sink.poisonNow(q.raw, err)
		q.settled.Store(true)
		s.report(no, p, attempt, false, err, true, s.sink.retryPolicy().action())
		if !s.sink.acked(q.raw) {
			s.requeue(items)
			return
		}
		s.unhold(q.seq)
		parts = parts[1:]
	}
}

// nakUnsettled hands back, in order, what of items is still unsettled.
func (s *batchStage) nakUnsettled(items []*batchItem) {
	for _, q := range items {
		if !q.settled.Load() {
			_ = q.raw.Nak()
			q.settled.Store(true)
		}
	}
}

// call is one attempt of items: the handler's error, and on success the
// first ack's that failed.
func (s *batchStage) call(no uint64, attempt int, items []*batchItem) (err, ackErr error) {
	msgs := make([]*Msg, len(items))
	for i, q := range items {
		msgs[i] = q.msg
	}
	ctx, cancel := context.WithCancel(s.sink.ctx())
	s.mu.Lock()
	s.callCancel = cancel
	s.handed = true
	s.lastAcked = false
	if s.handingBack {
		cancel()
	}
	s.mu.Unlock()
	obs := s.sink.observeBatch(ctx, no, items) // nil without observers
	err = s.o.Handler(ctx, &Batch{Number: no, Msgs: msgs, Attempt: attempt})
	cancel()
	s.mu.Lock()
	s.callCancel = nil
	s.mu.Unlock()
	if err != nil {
		if obs != nil {
			obs(ResultFailed)
		}
		return err, nil
	}
	ackErr = s.ackAll(items)
	if obs != nil && ackErr == nil {
		obs(ResultAcked)
	} else if obs != nil {
		obs(ResultFailed)
	}
	s.mu.Lock()
	s.lastAcked = ackErr == nil
	s.mu.Unlock()
	if ackErr == nil && s.retry {
		for _, q := range items {
			s.sink.poisonHandled(q.raw)
		}
	}
	return nil, ackErr
}

func (s *batchStage) report(no uint64, items []*batchItem, attempt int, acked bool, err error, final bool, poison PoisonAction) {
	if s.o.OnBatch == nil {
		return
	}
	s.o.OnBatch(BatchEvent{Number: no, Size: len(items), FirstSeq: items[0].seq, LastSeq: items[len(items)-1].seq,
		Attempt: attempt, Acked: acked, Err: err, Final: final, Poison: poison})
}

// ackAll acks the batch, in order; the first error is returned (the
// messages not acked are left to the ack wait, or to a new pinned
// instance's hand back when the ack was refused by fencing).
func (s *batchStage) ackAll(items []*batchItem) error {
	var first error
	for _, q := range items {
		var err error
		if s.o.DoubleAck {
			err = s.sink.ack(q.raw, min(s.ackWait, doubleAckTimeout))
		} else {
			err = s.sink.ack(q.raw, 0)
		}
		q.settled.Store(true)
		if err != nil && first == nil {
			first = fmt.Errorf("ack of stream sequence %d: %w", q.seq, err)
		}
	}
	return first
}

// keepDue: the batch in hand and the messages queued behind it are kept
// alive every keepEvery (stageKeep). Under s.mu.
func (s *batchStage) keepDue(now time.Time, due []*nats.Msg) []*nats.Msg {
	for _, list := range [][]*batchItem{s.cur, s.queue} {
		for _, q := range list {
			if !q.settled.Load() && now.Sub(q.kept) >= s.keepEvery {
				q.kept = now
				due = append(due, q.raw)
			}
		}
	}
	return due
}

// handBack: the batch in flight is abandoned (its handler's context is
// cancelled); when no batch is owned by the runner, the queue is nak'ed
// now, in order; otherwise the runner naks the batch and then the queue
// once the call returns, so the next instance gets them in order.
func (s *batchStage) handBack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handingBack {
		return
	}
	s.handingBack = true
	close(s.quit)
	if s.callCancel != nil {
		s.callCancel()
	}
	if !s.owned {
		for _, q := range s.queue {
			_ = q.raw.Nak()
		}
		s.queue = nil
	}
	s.cond.Broadcast()
}

// wait returns once the runner has ended (after the hand back) and reports
// whether the last batch given to user code was acked.
func (s *batchStage) wait() bool {
	s.handBack() // the contract has it called already; harmless again
	<-s.runDone
	s.stopKeeping()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	return !s.handed || s.lastAcked
}
