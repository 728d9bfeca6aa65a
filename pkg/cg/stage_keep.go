package cg

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// What the stages that queue messages (lanes.go, batch.go) share, written
// once: the new-pin barrier and the keep-alive loop, over the stage's
// mutex and its hand back flag.
//
// The new-pin barrier. The first message under a pin id the stage has not
// seen has the sink hand back what the previous pinned instance may have
// left unacked (handBackOrphans): a killed or fenced one has up to max ack
// pending messages out, which the server would redeliver only after the
// ack wait, behind later messages already delivered here. The stage then
// holds everything (barrier) until a message delivered new after the naks
// (consumer sequence above barrierAfter) shows the redeliveries are all
// in, or it has been delivered again every message that was pending
// (barrierWant, counted in barrierSeen: a window full of redeliveries
// leaves the server nothing new to send until some are acked), or the
// server has nothing more on its way here (below), or the hold bound
// (barrierTill) passed.
//
// "Nothing more on its way" is judged when nothing came for barrierIdle,
// and asked of the server, not read off the quiet: the consumer's
// delivered sequence must not be past the last message the stage took in.
// A process starved of CPU (or frozen) reads its socket late, so a quiet
// of its own may hide redeliveries the server sent long ago; lifting then
// would hand later messages of their keys to user code ahead of them.
//
// The keep-alive loop. A message that waits in the stage for longer than
// the ack wait would be redelivered behind the member's back; the loop
// sends an in-progress ack for each one the stage says is due (waited
// keepEvery since it was accepted or last kept alive), and lifts a
// barrier that ran out. It sends nothing once the hand back began.

// holdMargin is added to the ack wait to bound how long the barrier holds,
// and how long a lane key waits for the redelivery of its unacked message.
const holdMargin = time.Second

// barrierIdle is how long a new pin's barrier waits for another message
// before it takes the redeliveries it caused to be all in.
const barrierIdle = 300 * time.Millisecond

// keptStage is what a stage tells its stageKeep; both are called under the
// stage's mutex.
type keptStage interface {
	// barrierLifted lets what the barrier held run.
	barrierLifted()
	// keepDue appends to due the queued messages an in-progress ack is due
	// for at now, marking them kept, and lets go of what ran out by now.
	keepDue(now time.Time, due []*nats.Msg) []*nats.Msg
}

// stageKeep is embedded in a stage that queues messages (see above).
type stageKeep struct {
	// mu guards the stage's state, this struct's included (but pin).
	mu    sync.Mutex
	sink  deliverySink
	stage keptStage
	// holdFor bounds the barrier (and a lane key's hold): ack wait +
	// holdMargin.
	holdFor time.Duration
	// keepEvery is how long a queued message waits between in-progress
	// acks.
	keepEvery time.Duration
	// handingBack: the hand back began.
	handingBack bool

	// pin is the pin id the stage was last delivered under (only the
	// accept goroutine reads or writes it).
	pin          string
	barrier      bool
	barrierAfter uint64
	barrierWant  int
	barrierSeen  map[uint64]struct{}
	barrierTill  time.Time
	lastAccept   time.Time
	// maxCseq is the highest consumer sequence the stage took in; asking
	// says a server check of the barrier's quiet is under way.
	maxCseq uint64
	asking  bool
	asked   sync.WaitGroup
	// askCtx ends the server checks when the loop stops.
	askCtx    context.Context
	askCancel context.CancelFunc

	stopKeep chan struct{}
	keepDone chan struct{}
}

// initKeep sets k up for stage, before the stage's goroutines start.
func (k *stageKeep) initKeep(stage keptStage, sink deliverySink, ackWait time.Duration) {
	k.stage, k.sink = stage, sink
	k.holdFor = ackWait + holdMargin
	k.keepEvery = max(ackWait/2, 10*time.Millisecond)
	k.stopKeep, k.keepDone = make(chan struct{}), make(chan struct{})
	k.askCtx, k.askCancel = context.WithCancel(context.Background())
}

// newPin: first delivered to under pin (only the accept goroutine calls
// it, before it takes mu).
func (k *stageKeep) newPin(pin string, first *nats.Msg) {
	k.pin = pin
	after, pending, ok := k.sink.handBackOrphans(first)
	if !ok {
		return
	}
	k.mu.Lock()
	k.barrier, k.barrierAfter = true, after
	k.barrierWant, k.barrierSeen = pending, map[uint64]struct{}{}
	k.barrierTill = time.Now().Add(k.holdFor)
	k.lastAccept = time.Now()
	k.mu.Unlock()
}

// accepted notes raw (stream sequence seq), accepted at now, and lifts the
// barrier when raw shows the redeliveries are all in. Under mu.
func (k *stageKeep) accepted(raw *nats.Msg, seq uint64, now time.Time) {
	k.lastAccept = now
	delivered, _, cseq, ok := ackSeqs(raw)
	if ok {
		k.maxCseq = max(k.maxCseq, cseq)
	}
	if !k.barrier {
		return
	}
	k.barrierSeen[seq] = struct{}{}
	if ok && delivered == 1 && cseq > k.barrierAfter || len(k.barrierSeen) >= k.barrierWant {
		k.liftBarrier()
	}
}

// liftBarrier lets the stage run again. Under mu.
func (k *stageKeep) liftBarrier() {
	k.barrier, k.barrierSeen = false, nil
	k.stage.barrierLifted()
}

// keepAlive is the keep-alive loop; it looks four times per keepEvery.
func (k *stageKeep) keepAlive() {
	defer close(k.keepDone)
	t := time.NewTicker(max(k.keepEvery/4, 5*time.Millisecond))
	defer t.Stop()
	var due []*nats.Msg
	for {
		select {
		case <-k.stopKeep:
			return
		case <-t.C:
		}
		now := time.Now()
		k.mu.Lock()
		if k.handingBack {
			k.mu.Unlock()
			continue
		}
		switch {
		case !k.barrier:
		case now.After(k.barrierTill):
			k.liftBarrier()
		case now.Sub(k.lastAccept) >= barrierIdle && !k.asking:
			// Asked on a goroutine of its own: the in-progress acks
			// must not wait for the answer.
			k.asking = true
			k.asked.Add(1)
			go k.askQuiet()
		}
		due = k.stage.keepDue(now, due[:0])
		k.mu.Unlock()
		for _, raw := range due {
			_ = k.sink.keepAlive(raw)
		}
	}
}

// askQuiet asks the server whether the barrier's quiet is the server's:
// it lifts the barrier when the consumer has delivered nothing past what
// the stage took in. Otherwise (or without an answer) the barrier holds
// for another barrierIdle, at most until barrierTill.
func (k *stageKeep) askQuiet() {
	defer k.asked.Done()
	ctx, cancel := context.WithTimeout(k.askCtx, time.Second)
	defer cancel()
	delivered, err := k.sink.deliveredUpTo(ctx)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.asking = false
	if !k.barrier || k.handingBack {
		return
	}
	if err == nil && delivered <= k.maxCseq {
		k.liftBarrier()
		return
	}
	k.lastAccept = time.Now()
}

// stopKeeping ends the keep-alive loop and waits for it, and for a server
// check of the barrier under way.
func (k *stageKeep) stopKeeping() {
	close(k.stopKeep)
	<-k.keepDone
	k.askCancel()
	k.asked.Wait()
}
