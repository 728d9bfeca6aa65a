package cg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Poison messages on real servers: one poison message among 1000 over 20
// keys, and what each action does with it, counted.

const (
	poisonKeys  = 20
	poisonTotal = 1000
	poisonKey   = "k07"
	poisonSeq   = 10 // the poison message is the 10th of its key
)

type poisonEnv struct {
	s  *server.Server
	js jetstream.JetStream
	c  *Client
}

// poisonSetup makes ORDERS (orders.<key>.<event>, partitioned by key over
// 8 partitions), static group g with member m1, and a user stream DLQ
// capturing dlq.>. It publishes n messages over poisonKeys keys, each with
// Key and a per-key Seq header.
func poisonSetup(t *testing.T, n int) poisonEnv {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*.*",
			Destination: "{{partition(8,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	c := New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	seq := map[string]int{}
	for i := 0; i < n; i++ {
		key := fmt.Sprintf("k%02d", i%poisonKeys)
		seq[key]++
		msg := nats.NewMsg(fmt.Sprintf("orders.%s.e%d", key, seq[key]%3))
		msg.Header.Set("Key", key)
		msg.Header.Set("Seq", strconv.Itoa(seq[key]))
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		t.Fatal("publish did not complete")
	}
	return poisonEnv{s: s, js: js, c: c}
}

// poisonLog counts what a handler saw: per key, the Seq values acked in
// order, and every attempt at the poison message.
type poisonLog struct {
	mu       sync.Mutex
	acked    map[string][]int
	attempts []time.Time
	events   []Event
}

func newPoisonLog() *poisonLog { return &poisonLog{acked: map[string][]int{}} }

func (l *poisonLog) onEvent(e Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *poisonLog) total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.acked {
		n += len(s)
	}
	return n
}

func (l *poisonLog) keyCount(k string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked[k])
}

func (l *poisonLog) nAttempts() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.attempts)
}

// handler fails the poison message while fail() says so (through Msg.Fail
// and no ack) and acks every other; before is called ahead of each
// message of the poison key after the poison one.
func (l *poisonLog) handler(fail func() bool, before func(seq int)) Handler {
	return func(_ context.Context, m *Msg) {
		key := m.Headers().Get("Key")
		seq, _ := strconv.Atoi(m.Headers().Get("Seq"))
		if key == poisonKey && seq == poisonSeq {
			l.mu.Lock()
			l.attempts = append(l.attempts, time.Now())
			l.mu.Unlock()
			if fail() {
				m.Fail(errors.New("cannot parse order"))
				return
			}
		}
		if key == poisonKey && seq > poisonSeq && before != nil {
			before(seq)
		}
		if m.Ack() == nil {
			l.mu.Lock()
			l.acked[key] = append(l.acked[key], seq)
			l.mu.Unlock()
		}
	}
}

// checkOrder asserts every key's acked Seq values are 1, 2, 3, … with no
// gap, duplicate or reordering, skipping only the poison message.
func (l *poisonLog) checkOrder(t *testing.T, perKey int, poisonHandled bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 0; i < poisonKeys; i++ {
		key := fmt.Sprintf("k%02d", i)
		want := 1
		for _, s := range l.acked[key] {
			if key == poisonKey && want == poisonSeq && !poisonHandled {
				want++
			}
			if s != want {
				t.Fatalf("key %s: acked %v: want %d next, got %d", key, l.acked[key], want, s)
			}
			want++
		}
		if want-1 != perKey {
			t.Fatalf("key %s: handled up to %d of %d: %v", key, want-1, perKey, l.acked[key])
		}
	}
}

func dlqMessages(t *testing.T, js jetstream.JetStream) []jetstream.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "DLQ")
	if err != nil {
		t.Fatal(err)
	}
	n := s.CachedInfo().State.Msgs
	var out []jetstream.Msg
	for seq := uint64(1); seq <= s.CachedInfo().State.LastSeq && uint64(len(out)) < n; seq++ {
		raw, err := s.GetMsg(ctx, seq)
		if err != nil {
			continue
		}
		h := nats.Header(raw.Header)
		out = append(out, &storedMsg{subject: raw.Subject, data: raw.Data, hdr: h})
	}
	return out
}

func dlqCount(js jetstream.JetStream) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "DLQ")
	if err != nil {
		return 0
	}
	return s.CachedInfo().State.Msgs
}

// storedMsg is a stored DLQ message seen through the parts tests read.
type storedMsg struct {
	jetstream.Msg
	subject string
	data    []byte
	hdr     nats.Header
}

func (s *storedMsg) Subject() string      { return s.subject }
func (s *storedMsg) Data() []byte         { return s.data }
func (s *storedMsg) Headers() nats.Header { return s.hdr }

func TestPoisonDeadLetterKeepsKeyOrder(t *testing.T) {
	env := poisonSetup(t, poisonTotal)
	log := newPoisonLog()
	var before sync.Once
	var dlqBefore uint64
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1",
		log.handler(func() bool { return true }, func(int) {
			before.Do(func() { dlqBefore = dlqCount(env.js) })
		}),
		JoinOptions{Concurrency: 4, OnEvent: log.onEvent,
			Retry: &RetryPolicy{MaxDeliver: 3, Backoff: []time.Duration{50 * time.Millisecond}, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "999 messages handled", func() bool { return log.total() == poisonTotal-1 })
	log.checkOrder(t, poisonTotal/poisonKeys, false)
	if n := log.nAttempts(); n != 3 {
		t.Fatalf("poison message handed to the handler %d times, want 3 (max deliver)", n)
	}
	if dlqBefore != 1 {
		t.Fatalf("the poison key's next message was handled with %d dead letters stored, want 1: later messages must wait for the dead letter", dlqBefore)
	}
	dl := dlqMessages(t, env.js)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want exactly 1", len(dl))
	}
	h := dl[0].Headers()
	want := map[string]string{HeaderDLStream: "ORDERS", HeaderDLConsumedStream: "ORDERS", HeaderDLGroup: "g", HeaderDLMember: "m1",
		HeaderDLKind: "static", HeaderDLDeliveries: "3", HeaderDLError: "cannot parse order", HeaderDLReason: DLReasonMaxDeliver,
		HeaderDLSubject: "orders.k07.e1", "Key": poisonKey, "Seq": strconv.Itoa(poisonSeq)}
	for k, v := range want {
		if got := h.Get(k); got != v {
			t.Errorf("dead letter header %s = %q, want %q", k, got, v)
		}
	}
	if h.Get(HeaderDLSequence) == "" || h.Get(HeaderDLPartition) == "" || h.Get(HeaderDLTime) == "" {
		t.Errorf("dead letter lacks sequence, partition or time headers: %v", h)
	}
	if dl[0].Subject() != "dlq.orders" {
		t.Errorf("dead letter on %s", dl[0].Subject())
	}
	rep, err := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if d, p := rep.Totals(); d != 1 || p != 0 {
		t.Fatalf("poison report: %d dead-lettered, %d parked; want 1, 0: %+v", d, p, rep)
	}
	mp, _ := rep.Member("m1")
	if len(mp.Partitions) != 1 || strconv.Itoa(mp.Partitions[0].Partition) != h.Get(HeaderDLPartition) {
		t.Fatalf("per-partition counts %+v, dead letter from partition %s", mp.Partitions, h.Get(HeaderDLPartition))
	}
	// The member consumer's configuration is left as cg always makes it.
	ci, err := env.c.consumerInfo(context.Background(), "ORDERS", StaticConsumerName("g", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if ci.Config.MaxDeliver > 0 || len(ci.Config.BackOff) > 0 {
		t.Fatalf("member consumer was given max deliver %d, backoff %v", ci.Config.MaxDeliver, ci.Config.BackOff)
	}
	// Deleting the group removes its poison keys.
	m.Stop()
	if _, err := env.c.Delete(context.Background(), KindStatic, "ORDERS", "g"); err != nil {
		t.Fatal(err)
	}
	if rep, err := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g"); err != nil || len(rep.Members) != 0 {
		t.Fatalf("after the group's deletion: %+v, %v", rep, err)
	}
}

func TestPoisonParkHoldsKeyUntilReleased(t *testing.T) {
	env := poisonSetup(t, poisonTotal)
	log := newPoisonLog()
	var mu sync.Mutex
	failing := true
	fail := func() bool { mu.Lock(); defer mu.Unlock(); return failing }
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(fail, nil),
		// The parked key's 40 later messages stay in the member's window
		// (max ack pending): it must have room for them and the others.
		JoinOptions{Concurrency: 4, MaxAckPending: 64, OnEvent: log.onEvent, Retry: &RetryPolicy{MaxDeliver: 2}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	perKey := poisonTotal / poisonKeys
	others := poisonTotal - perKey
	natstest.Eventually(t, 60*time.Second, "every other key handled", func() bool {
		return log.total() == others+poisonSeq-1
	})
	var parked ParkedMessage
	natstest.Eventually(t, 30*time.Second, "the message reported parked", func() bool {
		rep, err := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		mp, _ := rep.Member("m1")
		if len(mp.Parked) == 1 {
			parked = mp.Parked[0]
			return true
		}
		return false
	})
	if parked.Subject != "orders.k07.e1" || parked.Deliveries != 2 || parked.Key != poisonKey || parked.Error != "cannot parse order" {
		t.Fatalf("parked %+v", parked)
	}
	// Held well past the ack wait: nothing later of its key, nor the
	// message itself again.
	time.Sleep(DefaultAckWait + 2*time.Second) // a stretch of time to observe nothing in, not synchronisation
	if n := log.keyCount(poisonKey); n != poisonSeq-1 {
		t.Fatalf("parked key handled %d messages, want %d (held)", n, poisonSeq-1)
	}
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("parked message handed over %d times, want 2", n)
	}
	// Check warns, naming the member, the partition and the release remedy.
	crep, err := env.c.Check(context.Background(), CheckScope{Stream: "ORDERS", Group: "g", Kind: "static"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, f := range crep.Findings {
		if f.Code == CodeParkedMessage {
			found = f.Severity == health.SeverityWarning && f.Member == "m1" && slices.Equal(f.Partitions, []int{parked.Partition}) &&
				f.Remedy != nil && f.Remedy.Code == RemedyReleaseParked && strings.Contains(f.Message, "key "+poisonKey)
		}
	}
	if !found {
		t.Fatalf("check did not warn of the parked message: %+v", crep.Findings)
	}
	// Skip needs a dead-letter subject; this member has none.
	if _, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{Skip: true}); !errors.Is(err, ErrNoDeadLetter) {
		t.Fatalf("skip without a dead-letter subject: %v, want ErrNoDeadLetter", err)
	}
	if _, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{Seq: parked.Sequence + 1}); !errors.Is(err, ErrNotParked) {
		t.Fatalf("release of a sequence not parked: %v, want ErrNotParked", err)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	res, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Released) != 1 || res.Released[0].Sequence != parked.Sequence {
		t.Fatalf("released %+v", res.Released)
	}
	natstest.Eventually(t, 60*time.Second, "the released key handled to its end", func() bool { return log.total() == poisonTotal })
	log.checkOrder(t, perKey, true)
	if n := log.nAttempts(); n != 3 {
		t.Fatalf("released message handed over %d times in all, want 3 (2, then one retry)", n)
	}
	natstest.Eventually(t, 30*time.Second, "the park cleared from the report", func() bool {
		rep, _ := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		_, p := rep.Totals()
		return p == 0
	})
}

func TestPoisonStopNamesTheMessage(t *testing.T) {
	env := poisonSetup(t, 200)
	log := newPoisonLog()
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{Retry: &RetryPolicy{MaxDeliver: 2, OnPoison: PoisonStop}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Done():
	case <-time.After(60 * time.Second):
		m.Stop()
		t.Fatal("member did not stop on the poison message")
	}
	var pe *PoisonError
	if err := m.Err(); !errors.As(err, &pe) || !errors.Is(err, ErrPoison) {
		t.Fatalf("stopped with %v, want a *PoisonError", err)
	}
	if pe.Subject != "orders.k07.e1" || pe.Deliveries != 2 || pe.Sequence == 0 || pe.Reason != DLReasonMaxDeliver {
		t.Fatalf("poison error %+v", pe)
	}
	if m.StopCause() != CausePoison {
		t.Fatalf("stop cause %q", m.StopCause())
	}
	if n := log.keyCount(poisonKey); n != poisonSeq-1 {
		t.Fatalf("poison key handled %d, want %d: nothing after the poison message", n, poisonSeq-1)
	}
	// Nothing was acked away: the poison message is still there for the next instance.
	ci, err := env.c.consumerInfo(context.Background(), "ORDERS", StaticConsumerName("g", "m1"))
	if err != nil {
		t.Fatal(err)
	}
	if ci.AckFloor.Stream >= pe.Sequence {
		t.Fatalf("ack floor %d passed the poison message %d", ci.AckFloor.Stream, pe.Sequence)
	}
}

// A crash right after the dead letter's PubAck, before the original's ack:
// nothing lost, at most one duplicate dead letter.
func TestPoisonCrashBetweenDeadLetterAndAck(t *testing.T) {
	env := poisonSetup(t, poisonTotal)
	log := newPoisonLog()
	nc1 := natstest.Connect(t, env.s)
	c1, err := NewFromConn(nc1, "")
	if err != nil {
		t.Fatal(err)
	}
	crashed := make(chan struct{})
	var once sync.Once
	pol := &RetryPolicy{MaxDeliver: 2, DeadLetter: "dlq.orders"}
	h := log.handler(func() bool { return true }, nil)
	m1, err := c1.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, JoinOptions{Concurrency: 4, Retry: pol,
		afterDeadLetter: func(uint64) bool {
			crash := false
			once.Do(func() { crash = true; nc1.Close(); close(crashed) })
			return crash
		}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-crashed:
	case <-time.After(60 * time.Second):
		t.Fatal("poison message never dead-lettered")
	}
	// The crashed instance is gone; a new one takes over the member.
	go m1.Stop()
	c2, err := NewFromConn(natstest.Connect(t, env.s), "")
	if err != nil {
		t.Fatal(err)
	}
	republished := make(chan struct{})
	var reOnce sync.Once
	m2, err := c2.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, JoinOptions{Concurrency: 4, Retry: pol,
		OnEvent: func(e Event) {
			if e.Kind == EventPoison && e.Cause == CauseDeadLettered {
				reOnce.Do(func() { close(republished) })
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	natstest.Eventually(t, 90*time.Second, "every message handled or dead-lettered", func() bool {
		log.mu.Lock()
		defer log.mu.Unlock()
		seen := 0
		for _, s := range log.acked {
			u := map[int]bool{}
			for _, v := range s {
				u[v] = true
			}
			seen += len(u)
		}
		return seen == poisonTotal-1 && dlqCount(env.js) >= 1
	})
	// Settle: the redelivered poison message is dead-lettered again (deduped) and acked.
	natstest.Eventually(t, 30*time.Second, "the poison message acked", func() bool {
		ci, err := c2.consumerInfo(context.Background(), "ORDERS", StaticConsumerName("g", "m1"))
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0
	})
	// The new instance published it again (the original was never acked),
	// and the capturing stream dropped the copy by its message id.
	select {
	case <-republished:
	case <-time.After(30 * time.Second):
		t.Fatal("the new instance never dead-lettered the unacked poison message")
	}
	if n := dlqCount(env.js); n != 1 {
		t.Fatalf("%d dead letters after the crash, want 1 (the second publish is deduplicated by Nats-Msg-Id)", n)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	for key, s := range log.acked {
		u := map[int]bool{}
		for _, v := range s {
			u[v] = true
		}
		for v := 1; v <= poisonTotal/poisonKeys; v++ {
			if !u[v] && !(key == poisonKey && v == poisonSeq) {
				t.Fatalf("key %s: message %d lost", key, v)
			}
		}
	}
}

// Backoff: the poison message's redeliveries follow the schedule, and the
// member's other keys go on meanwhile.
func TestPoisonBackoffScheduleOtherKeysGoOn(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	sched := []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 1200 * time.Millisecond}
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{Concurrency: 4, Retry: &RetryPolicy{MaxDeliver: 4, Backoff: sched, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	others := 220 - 220/poisonKeys
	var othersDone time.Time
	natstest.Eventually(t, 60*time.Second, "four attempts and the dead letter", func() bool {
		if othersDone.IsZero() {
			log.mu.Lock()
			n := 0
			for k, s := range log.acked {
				if k != poisonKey {
					n += len(s)
				}
			}
			log.mu.Unlock()
			if n == others {
				othersDone = time.Now()
			}
		}
		return log.nAttempts() == 4 && dlqCount(env.js) == 1
	})
	log.mu.Lock()
	at := append([]time.Time(nil), log.attempts...)
	log.mu.Unlock()
	for i := 1; i < len(at); i++ {
		gap, want := at[i].Sub(at[i-1]), sched[i-1]
		t.Logf("redelivery %d: %s after the previous (schedule %s)", i+1, gap.Round(time.Millisecond), want)
		if gap < want-50*time.Millisecond || gap > want+1500*time.Millisecond {
			t.Errorf("redelivery %d came %s after the previous, want %s (schedule %v)", i+1, gap, want, sched)
		}
	}
	if othersDone.IsZero() || !othersDone.Before(at[3]) {
		t.Fatalf("the other keys finished at %v, the poison message's last attempt at %v: they were held back", othersDone, at[3])
	}
	natstest.Eventually(t, 30*time.Second, "the poison key handled to its end", func() bool { return log.total() == 219 })
	log.checkOrder(t, 220/poisonKeys, false)
}

// Bad policies are refused at Join, and nothing is joined.
func TestPoisonBadPolicyRefusedAtJoin(t *testing.T) {
	env := poisonSetup(t, 0)
	h := func(context.Context, *Msg) {}
	for _, tc := range []struct {
		name string
		pol  RetryPolicy
		is   error
	}{
		{"negative max deliver", RetryPolicy{MaxDeliver: -1}, nil},
		{"zero backoff", RetryPolicy{Backoff: []time.Duration{time.Second, 0}}, nil},
		{"dead-letter without subject", RetryPolicy{OnPoison: PoisonDeadLetter}, nil},
		{"wildcard subject", RetryPolicy{DeadLetter: "dlq.*"}, nil},
		{"uncaptured subject", RetryPolicy{DeadLetter: "nowhere.x"}, ErrStreamNotFound},
		{"own stream", RetryPolicy{DeadLetter: "orders.dead.x"}, nil},
	} {
		pol := tc.pol
		_, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, JoinOptions{Retry: &pol})
		if err == nil {
			t.Fatalf("%s: joined", tc.name)
		}
		if tc.is != nil && !errors.Is(err, tc.is) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.is)
		}
	}
	// Without the poison bucket (a group made before it existed, or by the
	// reference) a member with a policy is refused; it never makes it.
	ctx := context.Background()
	if err := env.js.DeleteKeyValue(ctx, PoisonBucket); err != nil {
		t.Fatal(err)
	}
	if _, err := env.c.JoinStatic(ctx, "ORDERS", "g", "m1", h, JoinOptions{Retry: &RetryPolicy{MaxDeliver: 3}}); !errors.Is(err, ErrNoPoisonState) {
		t.Fatalf("join without the poison bucket: %v, want ErrNoPoisonState", err)
	}
	if _, err := env.js.KeyValue(ctx, PoisonBucket); err == nil {
		t.Fatal("a member made the poison bucket")
	}
	if ci, err := env.c.consumerInfo(ctx, "ORDERS", StaticConsumerName("g", "m1")); err != nil || ci != nil {
		t.Fatalf("a refused join created the member consumer (%v)", err)
	}
	// An identical create makes it.
	if res, err := env.c.CreateStatic(ctx, "ORDERS", "g", StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil || res.Created {
		t.Fatalf("identical re-create: %+v, %v", res, err)
	}
	if _, err := env.js.KeyValue(ctx, PoisonBucket); err != nil {
		t.Fatalf("identical re-create did not make the poison bucket: %v", err)
	}
}

// Elastic groups: the dead letter names the work stream the sequence is
// in, and leaves it (acked).
func TestPoisonElasticDeadLetter(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.>"}}); err != nil {
		t.Fatal(err)
	}
	c := New(js)
	if _, err := c.CreateElastic(ctx, "EV", "g", ElasticConfig{MaxMembers: 4, Members: []string{"m1"},
		PartitioningFilters: []PartitioningFilter{{Filter: "ev.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("ev.k%d", i%5), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handled := map[string]int{}
	m, err := c.JoinElastic(ctx, "EV", "g", "m1", func(_ context.Context, m *Msg) {
		if string(m.Data()) == "7" {
			_ = m.Poison(errors.New("bad event"))
			return
		}
		if m.Ack() == nil {
			mu.Lock()
			handled[string(m.Data())]++
			mu.Unlock()
		}
	}, JoinOptions{Retry: &RetryPolicy{MaxDeliver: 5, DeadLetter: "dlq.ev"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "49 handled and one dead letter", func() bool {
		mu.Lock()
		n := len(handled)
		mu.Unlock()
		return n == 49 && dlqCount(js) == 1
	})
	dl := dlqMessages(t, js)
	h := dl[0].Headers()
	if h.Get(HeaderDLConsumedStream) != WorkStreamName("EV", "g") || h.Get(HeaderDLStream) != "EV" || h.Get(HeaderDLKind) != "elastic" ||
		h.Get(HeaderDLReason) != DLReasonTerm || h.Get(HeaderDLDeliveries) != "1" || h.Get(HeaderDLError) != "bad event" || string(dl[0].Data()) != "7" {
		t.Fatalf("dead letter %q headers %v", dl[0].Data(), h)
	}
	natstest.Eventually(t, 30*time.Second, "the work stream emptied", func() bool {
		ws, err := js.Stream(ctx, WorkStreamName("EV", "g"))
		return err == nil && ws.CachedInfo().State.Msgs == 0
	})
	rep, err := c.Poison(ctx, KindElastic, "EV", "g")
	if err != nil {
		t.Fatal(err)
	}
	if d, p := rep.Totals(); d != 1 || p != 0 {
		t.Fatalf("report %+v", rep)
	}
}

// A parked message stays parked across instances: the next instance is
// redelivered it and parks it again without handing it to the handler; a
// skip release then dead-letters it and its key goes on.
func TestPoisonParkSurvivesRestartThenSkip(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	pol := &RetryPolicy{MaxDeliver: 1, OnPoison: PoisonPark, DeadLetter: "dlq.orders"}
	opts := JoinOptions{Concurrency: 4, MaxAckPending: 64, Retry: pol}
	h := log.handler(func() bool { return true }, nil)
	m1, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, opts)
	if err != nil {
		t.Fatal(err)
	}
	parkedCount := func() int {
		rep, err := env.c.Poison(context.Background(), KindStatic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		_, p := rep.Totals()
		return p
	}
	natstest.Eventually(t, 60*time.Second, "the other keys handled and the message parked", func() bool {
		return log.total() == 220-11+poisonSeq-1 && parkedCount() == 1
	})
	m1.Stop()
	c2, err := NewFromConn(natstest.Connect(t, env.s), "")
	if err != nil {
		t.Fatal(err)
	}
	parkedAgain := make(chan struct{}, 4)
	opts.OnEvent = func(e Event) {
		if e.Kind == EventPoison && e.Cause == CauseParked {
			parkedAgain <- struct{}{}
		}
	}
	m2, err := c2.JoinStatic(context.Background(), "ORDERS", "g", "m1", h, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Stop()
	// The new instance is redelivered it (after the ack wait) and holds it.
	natstest.Eventually(t, 30*time.Second, "the parked message redelivered and held", func() bool {
		return m2.stages.poison != nil && func() bool {
			m2.stages.poison.mu.Lock()
			defer m2.stages.poison.mu.Unlock()
			return len(m2.stages.poison.held) == 1
		}()
	})
	if n := log.nAttempts(); n != 1 {
		t.Fatalf("the parked message reached the handler %d times, want 1: a new instance must park it again, not retry it", n)
	}
	if n := log.keyCount(poisonKey); n != poisonSeq-1 {
		t.Fatalf("parked key handled %d after the restart, want %d", n, poisonSeq-1)
	}
	if _, err := env.c.Release(context.Background(), KindStatic, "ORDERS", "g", "m1", ReleaseOptions{Skip: true}); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 60*time.Second, "the key handled to its end after the skip", func() bool {
		return log.total() == 219 && dlqCount(env.js) == 1 && parkedCount() == 0
	})
	log.checkOrder(t, 11, false)
	if n := log.nAttempts(); n != 1 {
		t.Fatalf("a skipped message reached the handler again (%d attempts)", n)
	}
	dl := dlqMessages(t, env.js)
	if r := dl[0].Headers().Get(HeaderDLReason); r != DLReasonSkip {
		t.Fatalf("skipped dead letter has reason %q", r)
	}
	if len(parkedAgain) != 0 {
		t.Fatalf("a parked message re-held by a new instance was reported as newly parked")
	}
}

// A serial member (no concurrency) dead-letters too, in order.
func TestPoisonSerialDeadLetter(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{Retry: &RetryPolicy{MaxDeliver: 2, DeadLetter: "dlq.orders"}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "219 handled and one dead letter", func() bool {
		return log.total() == 219 && dlqCount(env.js) == 1
	})
	log.checkOrder(t, 11, false)
	if n := log.nAttempts(); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
}

// Classify makes a failure poison at once: one delivery, reason classified,
// the error given to Msg.Fail in the header.
func TestPoisonClassifyPoisonsAtOnce(t *testing.T) {
	env := poisonSetup(t, 220)
	log := newPoisonLog()
	var asked []error
	var mu sync.Mutex
	m, err := env.c.JoinStatic(context.Background(), "ORDERS", "g", "m1", log.handler(func() bool { return true }, nil),
		JoinOptions{Concurrency: 2, Retry: &RetryPolicy{MaxDeliver: 10, DeadLetter: "dlq.orders",
			Classify: func(m *Msg, err error) bool {
				mu.Lock()
				asked = append(asked, err)
				mu.Unlock()
				return err != nil && err.Error() == "cannot parse order"
			}}})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 60*time.Second, "219 handled and one dead letter", func() bool {
		return log.total() == 219 && dlqCount(env.js) == 1
	})
	log.checkOrder(t, 11, false)
	if n := log.nAttempts(); n != 1 {
		t.Fatalf("%d attempts, want 1: classified poison is not retried", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("Classify asked %d times, want once (only failures are classified)", len(asked))
	}
	if h := dlqMessages(t, env.js)[0].Headers(); h.Get(HeaderDLReason) != DLReasonClassified || h.Get(HeaderDLDeliveries) != "1" {
		t.Fatalf("dead letter headers %v", h)
	}
}
