package e2e

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// An instance that stops with messages prefetched (concurrency 4, so max
// ack pending 16) hands each back once, after it stopped pulling: the next
// instance gets them at once (the ack wait is a minute), on their second
// delivery, in order per key, and nothing is lost. Before, the stopping
// instance nak'ed while its pull request stood, so the server delivered
// the same messages back to it, and the next instance saw them on their
// third delivery or later.
func TestStopHandsBackOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		stop func(t *testing.T, in *instance)
	}{
		{"count", []string{"--count", "10"}, func(*testing.T, *instance) {}},
		{"sigterm", nil, func(t *testing.T, in *instance) {
			natstest.Eventually(t, 20*time.Second, "a few handled", func() bool { return in.count() >= 5 })
			if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, js := setup(t)
			const n = 80
			bySeq := map[uint64]string{}
			for i := 0; i < n; i++ {
				key := fmt.Sprintf("k%d", i%8)
				ack, err := js.Publish(context.Background(), "orders."+key, nil)
				if err != nil {
					t.Fatal(err)
				}
				bySeq[ack.Sequence] = key
			}
			args := append([]string{"--concurrency", "4", "--sleep", "40ms", "--ack-wait", "60s"}, tc.args...)
			a := start(t, url, "a", args...)
			tc.stop(t, a)
			if err := a.wait(t); err != nil {
				t.Fatalf("a exited with %v, want 0", err)
			}
			stopped := time.Now()
			b := start(t, url, "b", "--concurrency", "4", "--ack-wait", "60s")
			natstest.Eventually(t, 20*time.Second, "b handled the rest", func() bool { return a.count()+b.count() >= n })
			if took := time.Since(stopped); took > 20*time.Second {
				t.Fatalf("the rest took %s: it waited for the ack wait", took)
			}
			checkHandBack(t, js, bySeq, a, b)
		})
	}
}

func checkHandBack(t *testing.T, js jetstream.JetStream, bySeq map[uint64]string, a, b *instance) {
	t.Helper()
	a.mu.Lock()
	b.mu.Lock()
	defer a.mu.Unlock()
	defer b.mu.Unlock()
	seen := map[uint64]int{}
	for _, m := range a.msgs {
		seen[m.StreamSeq]++
	}
	last := map[string]uint64{}
	second := 0
	for _, m := range b.msgs {
		seen[m.StreamSeq]++
		switch m.Delivered {
		case 1:
		case 2:
			second++
		default:
			t.Errorf("stream seq %d reached b on delivery %d: handed back more than once", m.StreamSeq, m.Delivered)
		}
		key := bySeq[m.StreamSeq]
		if m.StreamSeq < last[key] {
			t.Errorf("key %s: seq %d handled after %d", key, m.StreamSeq, last[key])
		}
		last[key] = m.StreamSeq
	}
	for seq := range bySeq {
		if seen[seq] != 1 {
			t.Errorf("stream seq %d handled %d time(s), want once", seq, seen[seq])
		}
	}
	if second == 0 {
		t.Errorf("nothing reached b on its second delivery: a had nothing prefetched to hand back")
	}
}
