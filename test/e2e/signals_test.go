// Package e2e runs the built cg binary as separate processes for what only
// real processes show: signals (SIGTERM, SIGKILL) and their handover.
package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

var cgBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cg-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if cgBin, err = clitest.Build(dir, true); err != nil {
		fmt.Fprintln(os.Stderr, "building cg:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// instance is one `cg static consume` process, its JSON lines parsed live.
type instance struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	msgs []msgLine
	pins []string
	sum  map[string]any
	raw  []string
	done chan error
}

type msgLine struct {
	Type      string `json:"type"`
	Event     string `json:"event"`
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	Delivered uint64 `json:"delivered"`
	PinID     string `json:"pin_id"`
	Acked     bool   `json:"acked"`
	at        time.Time
}

func start(t *testing.T, url, name string, args ...string) *instance {
	t.Helper()
	in := &instance{name: name, done: make(chan error, 1)}
	in.cmd = exec.Command(cgBin, append([]string{"static", "consume", "ORDERS", "g", "m1", "--json", "--sleep", "2ms"}, args...)...)
	in.cmd.Env = append(os.Environ(), "NATS_URL="+url)
	out, err := in.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in.cmd.Stderr = os.Stderr
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			in.mu.Lock()
			in.raw = append(in.raw, sc.Text())
			in.mu.Unlock()
			var head struct{ Type string }
			if json.Unmarshal(sc.Bytes(), &head) != nil {
				continue
			}
			var l msgLine
			if head.Type != "summary" && json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			l.Type = head.Type
			l.at = time.Now()
			in.mu.Lock()
			switch {
			case l.Type == "msg":
				in.msgs = append(in.msgs, l)
			case l.Type == "event" && l.Event == "pinned":
				in.pins = append(in.pins, l.PinID)
			case l.Type == "summary":
				var m map[string]any
				_ = json.Unmarshal(sc.Bytes(), &m)
				in.sum = m
			}
			in.mu.Unlock()
		}
		in.done <- in.cmd.Wait()
	}()
	t.Cleanup(func() { _ = in.cmd.Process.Kill() })
	return in
}

func (in *instance) count() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.msgs)
}

func (in *instance) pinned() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return len(in.pins) > 0
}

func (in *instance) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-in.done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit", in.name)
		return nil
	}
}

func setup(t *testing.T) (string, jetstream.JetStream) {
	s, js, _ := clitest.Server(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	return s.ClientURL(), js
}

// publisher sends keyed messages in the background until stopped, and
// remembers the stream sequence of each per key.
type publisher struct {
	mu    sync.Mutex
	bySeq map[uint64]string
	stop  chan struct{}
	done  chan struct{}
}

func publish(t *testing.T, js jetstream.JetStream, every time.Duration, max int) *publisher {
	p := &publisher{bySeq: map[uint64]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for i := 0; i < max; i++ {
			select {
			case <-p.stop:
				return
			case <-time.After(every):
			}
			key := fmt.Sprintf("k%d", i%8)
			ack, err := js.Publish(context.Background(), "orders."+key, nil)
			if err != nil {
				t.Errorf("publish: %v", err)
				return
			}
			p.mu.Lock()
			p.bySeq[ack.Sequence] = key
			p.mu.Unlock()
		}
	}()
	return p
}

func (p *publisher) finish() int {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.bySeq)
}

// verify counts what both instances handled: every published message at
// least once, per-key order (by stream sequence) never broken, duplicates.
// It returns the handover gap between the last message of from and the
// first of to.
func verify(t *testing.T, pub *publisher, from, to *instance, unseenOK int) (dups int, gap time.Duration) {
	t.Helper()
	from.mu.Lock()
	to.mu.Lock()
	defer from.mu.Unlock()
	defer to.mu.Unlock()
	all := append(append([]msgLine{}, from.msgs...), to.msgs...)
	sort.SliceStable(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	seen := map[uint64]int{}
	last := map[string]uint64{}
	for _, m := range all {
		seen[m.StreamSeq]++
		key := pub.bySeq[m.StreamSeq]
		if seen[m.StreamSeq] > 1 {
			dups++
			continue
		}
		if m.StreamSeq < last[key] {
			t.Errorf("key %s: seq %d handled after %d", key, m.StreamSeq, last[key])
		}
		last[key] = m.StreamSeq
	}
	var unseen []uint64
	for seq := range pub.bySeq {
		if seen[seq] == 0 {
			unseen = append(unseen, seq)
		}
	}
	if len(unseen) > unseenOK {
		t.Errorf("stream seqs %v never handled", unseen)
	}
	if len(from.msgs) > 0 && len(to.msgs) > 0 {
		gap = to.msgs[0].at.Sub(from.msgs[len(from.msgs)-1].at)
	}
	return dups, gap
}

// pinnedPair starts two instances of m1 and returns (pinned, standby)
// once traffic has shown which one the server pinned.
func pinnedPair(t *testing.T, url string, js jetstream.JetStream, args ...string) (*instance, *instance, *publisher) {
	a := start(t, url, "a", args...)
	b := start(t, url, "b", args...)
	natstest.Eventually(t, 20*time.Second, "both instances joined", func() bool {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		return err == nil && ms.Waiting >= 2
	})
	pub := publish(t, js, 5*time.Millisecond, 4000)
	// Busy for a while: long enough for the standby's liveness check to
	// have heard from the pinned instance (it then unpins a dead one at
	// once instead of waiting for the pinned TTL).
	natstest.Eventually(t, 20*time.Second, "an instance pinned and busy", func() bool {
		return (a.pinned() && a.count() > 100) || (b.pinned() && b.count() > 100)
	})
	if a.pinned() && b.pinned() {
		t.Fatal("both instances report a pin")
	}
	if b.pinned() {
		return b, a, pub
	}
	return a, b, pub
}

func TestSIGTERMHandsOverAtOnce(t *testing.T) {
	url, js := setup(t)
	// A 60s ack wait makes the pinned TTL 60s: only the pin release on
	// SIGTERM can hand over within the deadline below.
	pinned, standby, pub := pinnedPair(t, url, js, "--ack-wait", "60s")
	if err := pinned.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := pinned.wait(t); err != nil {
		t.Fatalf("SIGTERM'd instance exited with %v, want 0", err)
	}
	if !clitest.Poll(nil, 15*time.Second, func() bool { return standby.count() > 20 }) {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		t.Fatalf("standby did not take over: %+v %v", ms, err)
	}
	n := pub.finish()
	waitAll(t, js, n, pinned, standby)
	dups, gap := verify(t, pub, pinned, standby, 0)
	pinned.mu.Lock()
	sum := pinned.sum
	pinned.mu.Unlock()
	if sum == nil || sum["reason"] != "interrupted" || sum["ack_failed"].(float64) != 0 {
		pinned.mu.Lock()
		t.Fatalf("summary of the SIGTERM'd instance: %v; its last lines: %q", sum, pinned.raw[max(0, len(pinned.raw)-5):])
	}
	t.Logf("SIGTERM: %d messages, %d duplicates, handover gap %v", n, dups, gap)
	if dups > 0 {
		t.Errorf("a graceful handover acks the message in hand: want 0 duplicates, got %d", dups)
	}
}

func TestSIGKILLFailsOverByPinnedTTL(t *testing.T) {
	url, js := setup(t)
	pinned, standby, pub := pinnedPair(t, url, js)
	if err := pinned.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = pinned.wait(t)
	natstest.Eventually(t, 20*time.Second, "standby takes over", func() bool { return standby.count() > 20 })
	n := pub.finish()
	// A killed process may have acked its last message without living to
	// print it: the server's ack floor vouches for that one.
	waitAll(t, js, n-1, pinned, standby)
	dups, gap := verify(t, pub, pinned, standby, 1)
	t.Logf("SIGKILL: %d messages, %d duplicates, failover gap %v", n, dups, gap)
	// The standby saw the pinned instance's connection close and unpinned
	// it, rather than waiting out the 2s pinned TTL and ack wait.
	standby.mu.Lock()
	defer standby.mu.Unlock()
	if !slices.ContainsFunc(standby.raw, func(l string) bool { return strings.Contains(l, "is gone, its connection closed") }) {
		t.Errorf("the standby never detected the dead pinned instance; failover took %v", gap)
	}
	// With max-ack-pending 1 at most the message in hand is redelivered.
	if dups > 1 {
		t.Errorf("want at most 1 duplicate after a kill, got %d", dups)
	}
}

// waitAll waits until the instances handled at least n messages, and
// shows the member's state when they do not.
func waitAll(t *testing.T, js jetstream.JetStream, n int, a, b *instance) {
	t.Helper()
	settled := func() bool {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		return err == nil && ms.Pending == 0 && ms.AckPending == 0
	}
	if !clitest.Poll(nil, 20*time.Second, func() bool { return a.count()+b.count() >= n && settled() }) {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		b.mu.Lock()
		tail := b.raw[max(0, len(b.raw)-3):]
		b.mu.Unlock()
		t.Fatalf("handled %d+%d of %d; member %+v %v; last lines of %s: %q", a.count(), b.count(), n, ms, err, b.name, tail)
	}
}
