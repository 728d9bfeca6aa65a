package cg

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// quietSink answers the barrier's question with what the test sets; the
// rest of deliverySink is not used by stageKeep's loop.
type quietSink struct {
	deliverySink
	delivered atomic.Uint64
	refuse    atomic.Bool
	asks      atomic.Int32
}

func (s *quietSink) deliveredUpTo(context.Context) (uint64, error) {
	s.asks.Add(1)
	if s.refuse.Load() {
		return 0, errors.New("no answer")
	}
	return s.delivered.Load(), nil
}

func (s *quietSink) keepAlive(*nats.Msg) error { return nil }

type liftCounter struct{ lifts atomic.Int32 }

func (l *liftCounter) barrierLifted()                                   { l.lifts.Add(1) }
func (l *liftCounter) keepDue(_ time.Time, due []*nats.Msg) []*nats.Msg { return due }

// A new pin's barrier that has taken in nothing for a while lifts only once
// the server has delivered nothing past what the stage took in: a starved
// process reads its socket late, and its own quiet says nothing about the
// redeliveries still on their way to it. Without an answer it holds too.
func TestBarrierQuietIsAskedOfTheServer(t *testing.T) {
	sink, stage := &quietSink{}, &liftCounter{}
	var k stageKeep
	k.initKeep(stage, sink, 20*time.Second) // the hold bound is far off
	k.mu.Lock()
	k.barrier, k.barrierWant, k.barrierSeen = true, 100, map[uint64]struct{}{}
	k.barrierTill, k.lastAccept, k.maxCseq = time.Now().Add(time.Minute), time.Now(), 5
	k.mu.Unlock()
	sink.delivered.Store(9) // four deliveries not taken in yet
	go k.keepAlive()
	defer k.stopKeeping()

	held := func() bool {
		k.mu.Lock()
		defer k.mu.Unlock()
		return k.barrier
	}
	waitAsks := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for sink.asks.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("the server was asked %d times, want %d", sink.asks.Load(), n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitAsks(2)
	if !held() || stage.lifts.Load() != 0 {
		t.Fatal("the barrier lifted while the server had delivered past what the stage took in")
	}

	sink.refuse.Store(true)
	waitAsks(sink.asks.Load() + 2)
	if !held() {
		t.Fatal("the barrier lifted without an answer from the server")
	}

	// The rest arrives: the stage has taken in all the server delivered.
	k.mu.Lock()
	k.maxCseq = 9
	k.mu.Unlock()
	sink.refuse.Store(false)
	deadline := time.Now().Add(20 * time.Second)
	for held() {
		if time.Now().After(deadline) {
			t.Fatal("the barrier still holds once the stage has every delivery the server made")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := stage.lifts.Load(); n != 1 {
		t.Fatalf("lifted %d times, want 1", n)
	}
}
