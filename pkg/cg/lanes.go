package cg

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The lane stage (JoinOptions.Concurrency above 1) hands messages to up to
// Concurrency handler calls at once while keeping, per key, the order the
// server delivered them in. It is a per-key queue with a pool of workers:
// each key has its own FIFO (kept in stream-sequence order, so a
// redelivery goes back in front of the key's later messages); a key with
// work and no call in flight is "ready"; Concurrency workers take ready
// keys in the order they became ready and run one message of each. A key
// whose message ended unacked (nak, a nak with delay, a term, left to the
// ack wait, or refused by fencing) is held: its later messages wait until
// the redelivery of that message has been handled and acked, or until the
// hold runs out (ack wait + holdMargin: the redelivery went elsewhere,
// e.g. to another instance after a pin change, or never comes after a
// term). Other keys go on.

// Order says what a concurrent member (JoinOptions.Concurrency > 1) keeps
// in order.
type Order string

const (
	// OrderKey (the default): messages of one partitioning key (the subject
	// tokens the group hashes, not the whole subject) are handled one at a
	// time, in delivery order; different keys at once.
	OrderKey Order = "key"
	// OrderPartition: one lane per partition, in delivery order.
	OrderPartition Order = "partition"
	// OrderNone: no ordering inside the member, only key affinity (each
	// key still goes to one member): for warm caches.
	OrderNone Order = "none"
)

// ParseOrder reads an order as the command line spells it ("" is OrderKey).
func ParseOrder(s string) (Order, error) {
	switch o := Order(s); o {
	case "", OrderKey:
		return OrderKey, nil
	case OrderPartition, OrderNone:
		return o, nil
	}
	return "", fmt.Errorf("order %q: use key, partition or none", s)
}

// laneAckPendingFactor sets the max ack pending of a consumer cg creates for
// a concurrent member when none is given: Concurrency × this. The server
// never has more unacked messages out than that, so it bounds what the
// stage queues; 4× keeps every lane fed when keys repeat (bench_test.go).
const laneAckPendingFactor = 4

// lanesDefaults applies the concurrency rules to o (withDefaults).
func (o JoinOptions) lanesDefaults() (JoinOptions, error) {
	if o.Concurrency < 0 {
		return o, fmt.Errorf("concurrency %d: use 1 or more", o.Concurrency)
	}
	ord, err := ParseOrder(string(o.Order))
	if err != nil {
		return o, err
	}
	o.Order = ord
	if o.Concurrency <= 1 {
		return o, nil
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = o.Concurrency * laneAckPendingFactor
	} else if o.MaxAckPending < o.Concurrency {
		return o, fmt.Errorf("max ack pending %d is below concurrency %d: at most %d messages could be handled at once; raise max ack pending to %d or more, or leave it unset (cg then uses %d)",
			o.MaxAckPending, o.Concurrency, o.MaxAckPending, o.Concurrency, o.Concurrency*laneAckPendingFactor)
	}
	return o, nil
}

// laneSpec describes the lane stage (stage.go).
var laneSpec = stageSpec{
	name:            "lanes",
	chosen:          func(o JoinOptions) bool { return o.Concurrency > 1 },
	handler:         func(h Handler) error { return serialSpec.handler(h) },
	defaults:        JoinOptions.lanesDefaults,
	consumerProblem: laneAckPendingProblem,
	build: func(o JoinOptions, st *stageState, sink deliverySink) delivery {
		return newLaneStage(o, st.keyOf, sink)
	},
}

// laneAckPendingProblem refuses to join an existing member consumer whose
// max ack pending would make a concurrent instance silently serial.
func laneAckPendingProblem(o JoinOptions, consumer, stream string, cc jetstream.ConsumerConfig) error {
	if o.Concurrency <= 1 || cc.MaxAckPending < 0 || cc.MaxAckPending >= o.Concurrency {
		return nil
	}
	return fmt.Errorf("%w: consumer %s on %s allows %d unacknowledged message(s) (max ack pending) but this instance runs with concurrency %d, which would run at most %d at once; delete the consumer (or let it expire) so cg creates it with max ack pending %d, or join with concurrency %d",
		ErrConsumerConflict, consumer, stream, cc.MaxAckPending, o.Concurrency, cc.MaxAckPending, o.MaxAckPending, max(cc.MaxAckPending, 1))
}

// prepareLanes works out, for a concurrent member, how to read the
// partitioning key off a delivered subject: a static group's from its
// stream's partition transform, an elastic group's from its partitioning
// filters (the work stream keeps the original subject behind the
// partition token).
func (m *Member) prepareLanes(ctx context.Context, elastic *ElasticConfig) error {
	if m.opts.Concurrency <= 1 {
		return nil
	}
	if elastic != nil {
		m.stages.keyOf = elasticKeyOf(elastic.PartitioningFilters)
		// Refuse at once what the controller would only wait on.
		if cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer); err == nil {
			return m.ackPendingProblem(cons.CachedInfo().Config)
		}
		return nil
	}
	si := m.joinInfo
	if si == nil {
		var err error
		if si, err = m.c.streamInfo(ctx, m.stream); err != nil {
			return err
		}
	}
	pt, err := StreamPartitioning(si)
	if err != nil {
		return err
	}
	m.stages.keyOf = staticKeyOf(pt)
	return nil
}

// elasticKeyOf reads the key with the first partitioning filter the subject
// matches; "" when none does (the stage then orders it by partition).
func elasticKeyOf(filters []PartitioningFilter) func(string) (string, bool) {
	return joinedKey(elasticKeyTokens(filters), "")
}

// staticKeyOf reads the key off a stored subject (partition token
// stripped) of a stream transformed by pt (staticKeyTokens); when it cannot
// be read, the stage orders by partition, which every key's messages share.
func staticKeyOf(pt partition.PartitionTransform) func(string) (string, bool) {
	if key, ok := oneTokenKey(pt); ok {
		return key
	}
	return joinedKey(staticKeyTokens(pt), "")
}

// wildcardRef reads a {{wildcard(n)}} token (any case and spacing).
func wildcardRef(t string) (int, bool) {
	t = strings.TrimSpace(t)
	if !strings.HasPrefix(t, "{{") || !strings.HasSuffix(t, "}}") {
		return 0, false
	}
	in := strings.TrimSpace(t[2 : len(t)-2])
	open := strings.IndexByte(in, '(')
	if open < 0 || !strings.HasSuffix(in, ")") || !strings.EqualFold(strings.TrimSpace(in[:open]), "wildcard") {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(in[open+1 : len(in)-1]))
	return n, err == nil
}

// laneKeyFunc is the stage's key of a delivered message for the member's
// order: a key for OrderKey, its partition for OrderPartition, the message
// itself for OrderNone.
func laneKeyFunc(o JoinOptions, keyOf func(subject string) (string, bool)) func(raw *nats.Msg, seq uint64) laneID {
	switch o.Order {
	case OrderNone:
		return func(_ *nats.Msg, seq uint64) laneID { return laneID{kind: '#', n: seq} }
	case OrderPartition:
		keyOf = nil
	}
	key := func(raw *nats.Msg, _ uint64) laneID {
		subject, p := partition.StripPartition(raw.Subject)
		if keyOf != nil {
			if k, ok := keyOf(subject); ok {
				return laneID{kind: 'k', s: k}
			}
		}
		return laneID{kind: 'p', n: uint64(p)}
	}
	if o.hashLanes {
		n := uint32(o.Concurrency)
		return func(raw *nats.Msg, seq uint64) laneID {
			return laneID{kind: 'h', n: uint64(partition.Hash(key(raw, seq).String()) % n)}
		}
	}
	return key
}

// laneID names what a lane stage keeps in order: a key (kind 'k', s), a
// partition ('p', n), a message alone ('#', its stream sequence n) or a
// fixed lane ('h', n). A value rather than a string built for each
// message: a key read off the subject is a slice of it, so naming the
// lane allocates nothing.
type laneID struct {
	kind byte
	s    string
	n    uint64
}

func (id laneID) String() string {
	if id.kind == 'k' {
		return "k" + id.s
	}
	return string(id.kind) + strconv.FormatUint(id.n, 10)
}

// laneStage is the concurrent delivery stage (see the top of the file).
type laneStage struct {
	// stageKeep: mu, the hand back flag, the new-pin barrier and the
	// keep-alive loop (stage_keep.go); its holdFor bounds a key's hold.
	stageKeep
	keyOf func(raw *nats.Msg, seq uint64) laneID
	hold  bool // hold a key after an unacked message

	// cond wakes a worker for a ready key (one per key made ready) and
	// every worker on a hand back or close; idle wakes wait once no call
	// is in flight. One cond for both had every finished call wake every
	// idle worker only for them to sleep again.
	cond   *sync.Cond
	idle   *sync.Cond
	keys   map[laneID]*laneKey
	ready  []*laneKey // keys that can run, in the order they became ready
	spare  []*laneKey // idle keys forgotten, for reuse (forget)
	queued int
	busy   int                 // calls in flight (admit + handler)
	open   map[uint64]struct{} // handled, ended unacked, not handled again since
	closed bool
	// acking holds the keys whose handler call returned with its double
	// ack's reply outstanding (Msg.DoubleAckAsync), by stream sequence:
	// each stays held until the reply is in (ackSettled).
	acking  map[uint64]*laneKey
	workers sync.WaitGroup
}

type laneKey struct {
	key      laneID
	msgs     []laneMsg // in stream-sequence order
	running  bool
	inReady  bool
	held     uint64 // the stream sequence the key waits for; 0: none
	heldTill time.Time
	acking   bool // held for the reply to its last message's ack
}

type laneMsg struct {
	raw  *nats.Msg
	seq  uint64
	kept time.Time // accepted or last kept alive
}

func newLaneStage(o JoinOptions, keyOf func(subject string) (string, bool), sink deliverySink) *laneStage {
	s := &laneStage{
		keyOf:  laneKeyFunc(o, keyOf),
		hold:   o.Order != OrderNone,
		keys:   map[laneID]*laneKey{},
		open:   map[uint64]struct{}{},
		acking: map[uint64]*laneKey{},
	}
	s.initKeep(s, sink, o.AckWait)
	s.cond = sync.NewCond(&s.mu)
	s.idle = sync.NewCond(&s.mu)
	s.workers.Add(o.Concurrency)
	for range o.Concurrency {
		go s.work()
	}
	go s.keepAlive()
	return s
}

// canRun: the key has a message to hand over, none in flight, and is not
// waiting for a redelivery (or its front message is that redelivery).
func (s *laneStage) canRun(k *laneKey) bool {
	return !s.barrier && k.canRun()
}

func (k *laneKey) canRun() bool {
	return !k.running && len(k.msgs) > 0 && (k.held == 0 || k.msgs[0].seq <= k.held)
}

func (s *laneStage) markReady(k *laneKey) {
	if !k.inReady && s.canRun(k) {
		k.inReady = true
		s.ready = append(s.ready, k)
		s.cond.Signal()
	}
}

func (s *laneStage) forget(k *laneKey) {
	if !k.running && !k.inReady && !k.acking && len(k.msgs) == 0 && k.held == 0 && s.keys[k.key] == k {
		delete(s.keys, k.key)
		// Nothing refers to an idle key but the map: kept for the next
		// new key (most keys of a large key space come and go with each
		// message, and each was two allocations).
		if len(s.spare) < maxSpareKeys {
			*k = laneKey{msgs: k.msgs[:0]}
			s.spare = append(s.spare, k)
		}
	}
}

// maxSpareKeys bounds the idle keys a lane stage keeps for reuse.
const maxSpareKeys = 1024

func (s *laneStage) accept(raw *nats.Msg) {
	seq := streamSeq(raw)
	key := s.keyOf(raw, seq)
	if pid := raw.Header.Get("Nats-Pin-Id"); pid != "" && pid != s.pin {
		s.newPin(pid, raw)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepted(raw, seq, time.Now())
	k := s.keys[key]
	if s.handingBack && (k == nil || !k.running && !k.acking) {
		// After the hand back began: straight back, behind anything of
		// its key handed back already. (A key with a call in flight, or
		// an ack's reply awaited, has its queue handed back when the call
		// returns or the reply is in.)
		_ = raw.Nak()
		return
	}
	if k == nil {
		if n := len(s.spare); n > 0 {
			k, s.spare = s.spare[n-1], s.spare[:n-1]
			k.key = key
		} else {
			k = &laneKey{key: key}
		}
		s.keys[key] = k
	}
	i, found := slices.BinarySearchFunc(k.msgs, seq, func(q laneMsg, seq uint64) int {
		return cmpSeq(q.seq, seq)
	})
	if found && seq != 0 {
		// Redelivered while it waited (its in-progress ack came late):
		// keep the newer delivery, once.
		k.msgs[i].raw, k.msgs[i].kept = raw, time.Now()
		return
	}
	k.msgs = slices.Insert(k.msgs, i, laneMsg{raw: raw, seq: seq, kept: time.Now()})
	s.queued++
	s.markReady(k)
}

func (s *laneStage) queueDepth() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queued
}

// barrierLifted lets every key run again (stageKeep). Under s.mu.
func (s *laneStage) barrierLifted() {
	for _, k := range s.keys {
		s.markReady(k)
	}
}

func cmpSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// work is one worker: it takes a ready key, hands its next message to user
// code, and settles the key's state by how the call ended.
func (s *laneStage) work() {
	defer s.workers.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		for !s.closed && (s.handingBack || len(s.ready) == 0) {
			s.cond.Wait()
		}
		if s.closed {
			return
		}
		k := s.ready[0]
		s.ready[0] = nil
		s.ready = s.ready[1:]
		k.inReady = false
		if !s.canRun(k) {
			s.forget(k)
			continue
		}
		lm := k.msgs[0]
		if len(k.msgs) <= 8 {
			// A short queue (a key's, most of the time) is shifted down
			// rather than sliced off the front, so that it keeps its room
			// for the key's next message.
			k.msgs = slices.Delete(k.msgs, 0, 1)
		} else {
			k.msgs[0] = laneMsg{}
			k.msgs = k.msgs[1:]
		}
		s.queued--
		k.running = true
		s.busy++
		s.mu.Unlock()
		handled := false
		if s.sink.admit(lm.raw) {
			s.sink.handle(lm.raw)
			handled = true
		}
		s.mu.Lock()
		s.busy--
		k.running = false
		// Asked under s.mu: an ack's reply settles the key through
		// ackSettled, which takes s.mu, so a reply that comes after
		// this finds the key in acking, and one before shows as acked.
		if handled && s.sink.ackPending(lm.raw) {
			s.acking[lm.seq] = k
			k.acking = true
			if s.hold && lm.seq != 0 {
				// Never released by keepDue first: the pipe ends the
				// ack (at the latest as a timeout) within the ack wait.
				k.held, k.heldTill = lm.seq, time.Now().Add(s.holdFor)
			}
		} else if handled {
			if s.sink.acked(lm.raw) {
				delete(s.open, lm.seq)
				if k.held == lm.seq {
					k.held = 0
				}
			} else {
				s.open[lm.seq] = struct{}{}
				if s.hold && lm.seq != 0 {
					k.held, k.heldTill = lm.seq, time.Now().Add(s.holdFor)
					// A retry policy's backoff, or a parked message (poison.go).
					if t, ok := s.sink.holdUntil(lm.raw); ok {
						k.heldTill = t.Add(s.holdFor)
					}
				}
			}
		}
		if k.acking {
			// Settled, handed back or made ready by ackSettled.
		} else if s.handingBack {
			// The hand back waited for this call: the key's queue goes
			// back now, behind the message just handled.
			s.nakAll(k)
		} else {
			s.markReady(k)
		}
		s.forget(k)
		if s.busy == 0 && len(s.acking) == 0 {
			s.idle.Broadcast()
		}
	}
}

// ackSettled is told by the binding's ack pipe that the double ack of raw
// ended (acked: confirmed, or timed out and perhaps applied). A key held
// for it runs again, or, failed, stays held for the redelivery as after a
// nak; once the hand back began its queue goes back instead.
func (s *laneStage) ackSettled(raw *nats.Msg, acked bool) {
	seq := streamSeq(raw)
	s.mu.Lock()
	defer s.mu.Unlock()
	k, ok := s.acking[seq]
	if !ok {
		// Ended before its handler call returned: the worker saw how.
		return
	}
	delete(s.acking, seq)
	k.acking = false
	if acked {
		delete(s.open, seq)
		if k.held == seq {
			k.held = 0
		}
	} else {
		s.open[seq] = struct{}{}
		if s.hold && seq != 0 {
			k.held, k.heldTill = seq, time.Now().Add(s.holdFor)
		}
	}
	if s.handingBack {
		s.nakAll(k)
	} else {
		s.markReady(k)
	}
	s.forget(k)
	if s.busy == 0 && len(s.acking) == 0 {
		s.idle.Broadcast()
	}
}

// nakAll hands back every queued message of k, in order. Under s.mu.
func (s *laneStage) nakAll(k *laneKey) {
	for _, q := range k.msgs {
		_ = q.raw.Nak()
	}
	s.queued -= len(k.msgs)
	k.msgs = nil
	k.held = 0
}

// keepDue: every message that has waited in a queue for keepEvery is kept
// alive, and holds that ran out are let go (stageKeep). Under s.mu.
func (s *laneStage) keepDue(now time.Time, due []*nats.Msg) []*nats.Msg {
	for _, k := range s.keys {
		if k.held != 0 && !k.acking && now.After(k.heldTill) {
			k.held = 0
			s.markReady(k)
		}
		for i := range k.msgs {
			if q := &k.msgs[i]; now.Sub(q.kept) >= s.keepEvery {
				q.kept = now
				due = append(due, q.raw)
			}
		}
		s.forget(k)
	}
	return due
}

// handBack naks, in stream-sequence order, everything queued of keys with
// no call in flight; a key with one in flight is handed back when that
// call returns, so that its messages reach the next instance behind it.
func (s *laneStage) handBack() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handingBack = true
	var back []laneMsg
	for _, k := range s.keys {
		if k.running || k.acking {
			// Handed back when the call returns or the ack's reply is
			// in, behind the message in hand.
			continue
		}
		back = append(back, k.msgs...)
		s.queued -= len(k.msgs)
		k.msgs = nil
		k.held = 0
		k.inReady = false
		s.forget(k)
	}
	s.ready = nil
	slices.SortFunc(back, func(a, b laneMsg) int { return cmpSeq(a.seq, b.seq) })
	for _, q := range back {
		_ = q.raw.Nak()
	}
	s.cond.Broadcast()
}

// wait returns once no call is in flight (and the queues of keys that had
// one are handed back). It reports true when every message user code was
// given was acked, or its redelivery was handled again and acked: with
// many lanes "the last message" is each key's last, and a stop loses
// nothing when none of them was left unacked.
func (s *laneStage) wait() bool {
	s.mu.Lock()
	for s.busy > 0 || len(s.acking) > 0 {
		s.idle.Wait()
	}
	s.closed = true
	s.cond.Broadcast()
	ok := len(s.open) == 0
	s.mu.Unlock()
	s.workers.Wait()
	s.stopKeeping()
	return ok
}
