package traffic

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func stream(t *testing.T) jetstream.JetStream {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}})
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

type stored struct {
	subject, key string
	seq          uint64
	size         int
}

// readBack returns every message of ORDERS in stream order.
func readBack(t *testing.T, js jetstream.JetStream) []stored {
	t.Helper()
	ctx := ctxT(t)
	s, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []stored
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		key, ks, ok := KeyOf(m.Header)
		if !ok {
			t.Fatalf("message %d has no key headers: %v", seq, m.Header)
		}
		out = append(out, stored{subject: m.Subject, key: key, seq: ks, size: len(m.Data)})
	}
	return out
}

// checkStored verifies that each key's key-seqs run 1…n in stream order
// on the right subject, and returns n per key.
func checkStored(t *testing.T, msgs []stored) map[string]uint64 {
	t.Helper()
	per := map[string]uint64{}
	for _, m := range msgs {
		per[m.key]++
		if m.seq != per[m.key] {
			t.Fatalf("key %s: key-seq %d stored where %d was due", m.key, m.seq, per[m.key])
		}
		if m.subject != "orders."+m.key {
			t.Fatalf("key %s on subject %s", m.key, m.subject)
		}
	}
	return per
}

func TestPublishExactCountRoundRobin(t *testing.T) {
	js := stream(t)
	keys := Keys("k", 3)
	res, err := Publish(ctxT(t), js, Options{Subject: "orders.{key}", Keys: keys, Count: 50})
	if err != nil {
		t.Fatal(err)
	}
	if res.Published != 50 || res.Failed != 0 || res.Keys != 3 || res.LastStreamSeq != 50 {
		t.Fatalf("result %+v", res)
	}
	msgs := readBack(t, js)
	if len(msgs) != 50 {
		t.Fatalf("stream holds %d messages, want 50", len(msgs))
	}
	per := checkStored(t, msgs)
	want := map[string]uint64{"k0001": 17, "k0002": 17, "k0003": 16}
	for k, n := range want {
		if per[k] != n || res.PerKey[k] != n {
			t.Fatalf("key %s: stored %d, result %d, want %d", k, per[k], res.PerKey[k], n)
		}
	}
	// Round-robin: the keys take turns.
	for i, m := range msgs {
		if m.key != keys[i%3] {
			t.Fatalf("message %d is %s, want %s", i, m.key, keys[i%3])
		}
	}
	// What a consumer reading everything sees verifies clean.
	v := NewVerifier(VerifierOptions{})
	for i, m := range msgs {
		v.Observe(m.key, m.seq, uint64(i+1), "reader")
	}
	if s := v.Stats(); s.Processed != 50 || s.Duplicates+s.Violations+s.Gaps+s.Missing != 0 {
		t.Fatalf("verifier %+v", s)
	}
	if lost := v.Lost(res.PerKey); lost != 0 {
		t.Fatalf("lost %d", lost)
	}
}

func TestPublishRandomKeysStarPattern(t *testing.T) {
	js := stream(t)
	res, err := Publish(ctxT(t), js, Options{Subject: "orders.*", Keys: []string{"alice", "bob", "carol"}, Count: 200, Random: true, Seed: 7, MaxInFlight: 8, Size: 64})
	if err != nil {
		t.Fatal(err)
	}
	msgs := readBack(t, js)
	if res.Published != 200 || len(msgs) != 200 {
		t.Fatalf("published %d, stored %d", res.Published, len(msgs))
	}
	per := checkStored(t, msgs)
	var sum uint64
	for k, n := range res.PerKey {
		if per[k] != n {
			t.Fatalf("key %s: result %d, stored %d", k, n, per[k])
		}
		sum += n
	}
	if sum != 200 || len(per) != 3 {
		t.Fatalf("per key %v", per)
	}
	for _, m := range msgs {
		if m.size != 64 {
			t.Fatalf("payload of %d bytes, want 64", m.size)
		}
	}
}

func TestPublishRateAndDuration(t *testing.T) {
	js := stream(t)
	start := time.Now()
	res, err := Publish(ctxT(t), js, Options{Subject: "orders.{key}", Keys: Keys("k", 2), Count: 11, Rate: 100})
	if err != nil {
		t.Fatal(err)
	}
	// 11 messages at 100/s: the last is due 100ms after the first.
	if el := time.Since(start); res.Published != 11 || el < 95*time.Millisecond {
		t.Fatalf("published %d in %v", res.Published, el)
	}

	start = time.Now()
	res, err = Publish(ctxT(t), js, Options{Subject: "orders.{key}", Keys: Keys("d", 2), Rate: 50, Duration: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); res.Published == 0 || res.Published > 16 || el > 5*time.Second {
		t.Fatalf("duration run published %d in %v", res.Published, el)
	}
}

func TestPublishStopsOnCancel(t *testing.T) {
	js := stream(t)
	p, err := NewPublisher(js, Options{Subject: "orders.{key}", Keys: Keys("k", 5)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan Result, 1)
	go func() {
		res, err := p.Run(ctx)
		if err != nil {
			t.Errorf("run: %v", err)
		}
		done <- res
	}()
	natstest.Eventually(t, 10*time.Second, "some messages published", func() bool { return p.Published() > 100 })
	cancel()
	var res Result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("publisher did not stop on cancel")
	}
	msgs := readBack(t, js)
	if uint64(len(msgs)) != res.Published || p.Sent() != res.Published {
		t.Fatalf("stored %d, result %d, sent %d", len(msgs), res.Published, p.Sent())
	}
	per := checkStored(t, msgs)
	for k, n := range p.Totals() {
		if per[k] != n {
			t.Fatalf("key %s: totals %d, stored %d", k, n, per[k])
		}
	}
	if _, err := p.Run(context.Background()); err == nil {
		t.Fatal("a second Run must be refused")
	}
}

func TestPublishFailsWithoutStream(t *testing.T) {
	js := stream(t)
	res, err := Publish(ctxT(t), js, Options{Subject: "nowhere.{key}", Keys: Keys("k", 1), Count: 5, AckTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "nowhere.k0001") {
		t.Fatalf("want an error naming the subject, got %v", err)
	}
	if res.Published != 0 || res.Failed == 0 {
		t.Fatalf("result %+v", res)
	}
}

func TestNewPublisherRejects(t *testing.T) {
	js := stream(t)
	for _, tc := range []struct {
		o    Options
		says string
	}{
		{Options{Subject: "orders", Keys: []string{"a"}}, "no place for the key"},
		{Options{Subject: "orders.*"}, "at least one key"},
		{Options{Subject: "orders.*", Keys: []string{"a", "a"}}, "twice"},
		{Options{Subject: "orders.*", Keys: []string{"a.b"}}, "must not contain"},
		{Options{Subject: "orders.*", Keys: []string{"a"}, Count: -1}, "negative"},
		{Options{Subject: "orders.*", Keys: []string{"a"}, Rate: -1}, "negative"},
		{Options{Subject: "orders.*", Keys: []string{"a"}, Size: -1}, "negative"},
		{Options{Subject: "orders.*", Keys: []string{"a"}, Duration: -time.Second}, "negative"},
	} {
		if _, err := NewPublisher(js, tc.o); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%+v: got %v, want %q", tc.o, err, tc.says)
		}
	}
	if _, err := NewPublisher(nil, Options{Subject: "orders.*", Keys: []string{"a"}}); err == nil {
		t.Error("nil JetStream accepted")
	}
}
