package cg

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// What a poison message's limit does when what it falls back on fails:
// the handler is never called beyond MaxDeliver, the message is held
// (its key waiting, other keys going on) and only the failed write is
// retried, until it succeeds.

// blockFirst returns a fail func for poisonLog.handler that holds the
// first attempt until ready is closed, then fails every attempt.
func blockFirst(ready <-chan struct{}) func() bool {
	var once sync.Once
	return func() bool {
		once.Do(func() { <-ready })
		return true
	}
}

func fallbackCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func (l *poisonLog) warnings(about string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == EventWarning && strings.Contains(e.Reason, about) {
			n++
		}
	}
	return n
}

// The dead-letter stream is removed after the member started: the
// publish fails, and each retry of it is a redelivery that must not reach
// the handler again (it ran the same message ~8 times in 10 s).
func TestPoisonDeadLetterStreamGoneHoldsWithoutHandling(t *testing.T) {
	for _, conc := range []int{1, 4} {
		t.Run(map[int]string{1: "serial", 4: "lanes"}[conc], func(t *testing.T) {
			env := poisonSetup(t, 220)
			log := newPoisonLog()
			ready := make(chan struct{})
			m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(blockFirst(ready), nil),
				JoinOptions{Concurrency: conc, OnEvent: log.onEvent,
					Retry: &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DeadLetter: "dlq.orders"}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			ctx := fallbackCtx(t)
			if err := env.js.DeleteStream(ctx, "DLQ"); err != nil {
				t.Fatal(err)
			}
			close(ready)
			natstest.Eventually(t, 30*time.Second, "three failed dead-letter publishes", func() bool {
				return log.warnings("dead letter of message") >= 3
			})
			if n := log.nAttempts(); n != 2 {
				t.Fatalf("the handler had the poison message %d times, want 2 (max deliver)", n)
			}
			if conc > 1 {
				// Other keys went on meanwhile; the poison key's last
				// message waits behind the poison one.
				natstest.Eventually(t, 30*time.Second, "the other keys handled", func() bool { return log.total() == 218 })
				if n := log.keyCount(poisonKey); n != poisonSeq-1 {
					t.Fatalf("poison key: %d acked while its poison message is held, want %d", n, poisonSeq-1)
				}
			}
			// The stream comes back: the held message is dead-lettered
			// by the next retry, without the handler.
			if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
				t.Fatal(err)
			}
			natstest.Eventually(t, 60*time.Second, "dead-lettered, all the rest handled", func() bool {
				return dlqCount(env.js) == 1 && log.total() == 219
			})
			if n := log.nAttempts(); n != 2 {
				t.Fatalf("the handler had the poison message %d times, want 2 (max deliver)", n)
			}
			log.checkOrder(t, 11, false)
		})
	}
}

// A redelivery beyond MaxDeliver that reaches another instance (this one
// stopped while the dead letter could not be written) is not handled
// there either: it is dead-lettered straight away.
func TestPoisonBeyondMaxDeliverNotHandledByNextInstance(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	ready := make(chan struct{})
	pol := &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DeadLetter: "dlq.orders"}
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(blockFirst(ready), nil),
		JoinOptions{OnEvent: log.onEvent, Retry: pol})
	if err != nil {
		t.Fatal(err)
	}
	ctx := fallbackCtx(t)
	if err := env.js.DeleteStream(ctx, "DLQ"); err != nil {
		t.Fatal(err)
	}
	close(ready)
	natstest.Eventually(t, 30*time.Second, "a failed dead-letter publish", func() bool {
		return log.warnings("dead letter of message") >= 1
	})
	m.Stop()
	if _, err := env.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	m2, err := New(env.js).JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{OnEvent: log.onEvent, Retry: pol})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	natstest.Eventually(t, 60*time.Second, "dead-lettered, all the rest handled", func() bool {
		return dlqCount(env.js) == 1 && log.total() == 219
	})
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("the handler had the poison message %d times over two instances, want 2 (max deliver)", n)
	}
}

// The poison bucket is unavailable when a message is parked: it is parked
// in memory all the same (held, its key waiting, not handled again) and
// its record written once the bucket is back, so release finds it.
func TestPoisonParkRecordRetriedWhenBucketGone(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	ready := make(chan struct{})
	var fail sync.Map
	first := blockFirst(ready)
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool {
		if _, ok := fail.Load("off"); ok {
			return false
		}
		return first()
	}, nil), JoinOptions{Concurrency: 4, OnEvent: log.onEvent,
		Retry: &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, OnPoison: PoisonPark}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	ctx := fallbackCtx(t)
	if err := env.js.DeleteKeyValue(ctx, PoisonBucket); err != nil {
		t.Fatal(err)
	}
	close(ready)
	natstest.Eventually(t, 30*time.Second, "the park record failed", func() bool {
		return log.warnings("is not recorded in KV bucket") >= 1
	})
	natstest.Eventually(t, 30*time.Second, "the other keys handled", func() bool { return log.total() == 218 })
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("the handler had the poison message %d times, want 2 (max deliver)", n)
	}
	if err := env.c.EnsurePoisonBucket(ctx, 1); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "the record written once the bucket is back", func() bool {
		rep, err := env.c.Poison(ctx, KindStatic, "ORDERS", "g")
		if err != nil {
			return false
		}
		mp, ok := rep.Member("m1")
		return ok && len(mp.Parked) == 1
	})
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("the handler had the poison message %d times, want 2", n)
	}
	// The instance's watch for release requests ended with the bucket;
	// the next instance reads the record and the release request, and
	// retries the redelivery once, as released.
	fail.Store("off", true)
	m.Stop()
	m2, err := New(env.js).JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return false }, nil),
		JoinOptions{Concurrency: 4, OnEvent: log.onEvent,
			Retry: &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, OnPoison: PoisonPark}})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	if _, err := env.c.Release(ctx, KindStatic, "ORDERS", "g", "m1", ReleaseOptions{}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 30*time.Second, "released and handled", func() bool { return log.total() == 220 })
	if n := log.nAttempts(); n != 3 {
		t.Fatalf("the handler had the poison message %d times, want 3 (2, then one for the release)", n)
	}
	log.checkOrder(t, 11, true)
}

// The member may not publish to the dead-letter subject (a permission
// denied to its user): the same hold, the handler never called again.
func TestPoisonDeadLetterDeniedHoldsWithoutHandling(t *testing.T) {
	o := natstest.Options(t.TempDir())
	o.Users = []*server.User{
		{Username: "admin", Password: "admin-pw"},
		{Username: "member", Password: "member-pw", Permissions: &server.Permissions{
			Publish: &server.SubjectPermission{Allow: []string{">"}, Deny: []string{"dlq.>"}},
		}},
	}
	s := natstest.Start(t, o)
	ctx := fallbackCtx(t)
	admin, err := nats.Connect(s.ClientURL(), nats.UserInfo("admin", "admin-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*.*",
			Destination: "{{partition(8,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := ajs.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ajs).CreateStatic(ctx, "ORDERS", "g", StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		msg := nats.NewMsg(fmt.Sprintf("orders.%s.e%d", poisonKey, i))
		msg.Header.Set("Key", poisonKey)
		msg.Header.Set("Seq", strconv.Itoa(i+poisonSeq-1)) // the first is the poison one
		if _, err := ajs.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	mc, err := nats.Connect(s.ClientURL(), nats.UserInfo("member", "member-pw"))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	mjs, _ := jetstream.New(mc)
	log := newPoisonLog()
	m, err := New(mjs).JoinStatic(ctx, "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{OnEvent: log.onEvent, Retry: &RetryPolicy{MaxDeliver: 2, Backoff: []time.Duration{10 * time.Millisecond}, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "two denied dead-letter publishes", func() bool {
		return log.warnings("dead letter of message") >= 2
	})
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("the handler had the poison message %d times, want 2 (max deliver)", n)
	}
	if n := log.keyCount(poisonKey); n != 0 {
		t.Fatalf("%d later messages of the poison key handled while it is held", n)
	}
}
