package group_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

type env struct {
	t   *testing.T
	js  jetstream.JetStream
	env func(string) string
}

// newEnv starts a server with ORDERS partitioned n ways on orders.*.
func newEnv(t *testing.T, n int) *env {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"}, AllowDirect: true,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}", n)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, js: js, env: clitest.Env("NATS_URL=" + s.ClientURL())}
}

func (e *env) mustRun(args ...string) clitest.Result {
	e.t.Helper()
	r := clitest.Run(e.t, cmd.Run, e.env, args...)
	if r.Code != 0 {
		e.t.Fatalf("cg %v: exit %d, stderr %q", args, r.Code, r.Err)
	}
	return r
}

// publishPerPartition publishes k messages on a key of each of n partitions.
func (e *env) publishPerPartition(n, k int) {
	e.t.Helper()
	keys := make([]string, n)
	for i, found := 0, 0; found < n; i++ {
		key := fmt.Sprintf("k%d", i)
		p, _ := partition.PartitionOfSubject("orders."+key, "orders.*", n, []int{1})
		if keys[p] == "" {
			keys[p], found = key, found+1
		}
	}
	for range k {
		for _, key := range keys {
			if _, err := e.js.Publish(context.Background(), "orders."+key, nil); err != nil {
				e.t.Fatal(err)
			}
		}
	}
}

func snapshots(t *testing.T, out string) []health.Snapshot {
	t.Helper()
	var snaps []health.Snapshot
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var s health.Snapshot
		if err := json.Unmarshal([]byte(l), &s); err != nil {
			t.Fatalf("not a JSON snapshot: %q: %v", l, err)
		}
		snaps = append(snaps, s)
	}
	return snaps
}

var spaces = regexp.MustCompile(` +`)

func has(out, want string) bool {
	squash := func(s string) string { return spaces.ReplaceAllString(s, " ") }
	return strings.Contains(squash(out), squash(want))
}

// TestWatchStatuses builds each situation the statuses name: m1 runs and
// keeps up (ok), m2 never started (unowned), m3 runs but its handler hangs
// on its first message with a backlog behind it (stalled).
func TestWatchStatuses(t *testing.T) {
	e := newEnv(t, 6)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "6", "m1", "m2", "m3")
	e.publishPerPartition(6, 3)

	// A long ack wait (and so a long pull expiry): the samples pin one
	// instance per running member, which a member shows for a moment
	// between an expired pull and its next one no more.
	m1 := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--sleep", "0s", "--ack-wait", "1m")
	defer m1.Stop(t)
	c := cg.New(e.js)
	inHand, release := make(chan struct{}, 1), make(chan struct{})
	m3, err := c.JoinStatic(context.Background(), "ORDERS", "g", "m3", func(ctx context.Context, _ *cg.Msg) {
		select {
		case inHand <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}, cg.JoinOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); m3.Stop() }()
	<-inHand
	natstest.Eventually(t, 20*time.Second, "m1 to catch up", func() bool {
		ms, err := c.MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		return err == nil && ms.Lag != nil && ms.Lag.Pending == 0 && ms.Active
	})

	r := e.mustRun("static", "watch", "ORDERS", "g", "--json", "--interval", "100ms", "--count", "7")
	snaps := snapshots(t, r.Out)
	if len(snaps) != 7 || snaps[6].Seq != 7 || snaps[6].IntervalSeconds <= 0 {
		t.Fatalf("%d snapshots, last %+v", len(snaps), snaps[len(snaps)-1])
	}
	last := snaps[6]
	var got []health.PartitionStatus
	for _, p := range last.Partitions {
		got = append(got, p.Status)
	}
	want := []health.PartitionStatus{health.StatusOK, health.StatusOK, health.StatusUnowned, health.StatusUnowned, health.StatusStalled, health.StatusStalled}
	if !slices.Equal(got, want) {
		t.Fatalf("partition statuses %v, want %v\n%s", got, want, r.Out)
	}
	mem := map[string]health.MemberSnapshot{}
	for _, m := range last.Members {
		mem[m.Member] = m
	}
	if m := mem["m1"]; m.Status != health.StatusOK || !m.Live || m.Instances < 1 || m.PinID == "" || m.Lag == nil || m.Lag.Pending != 0 || m.AckRate == nil {
		t.Errorf("m1: %+v", m)
	}
	if m := mem["m2"]; m.Status != health.StatusUnowned || m.Live || m.Lag == nil || m.Lag.Pending != 6 {
		t.Errorf("m2 (never started, 6 waiting): %+v lag %+v", m, m.Lag)
	}
	if m := mem["m3"]; m.Status != health.StatusStalled || !m.Live || m.Lag == nil || m.Lag.Pending != 6 || m.Lag.AgeSeconds <= 0 {
		t.Errorf("m3 (hung on its first message): %+v lag %+v", m, m.Lag)
	}
	if last.Pending != 12 || last.Statuses[health.StatusStalled] != 2 {
		t.Errorf("pending %d statuses %v", last.Pending, last.Statuses)
	}

	// Not a terminal and no --json: one text block per sample.
	r = e.mustRun("static", "top", "ORDERS", "g", "--interval", "100ms", "--count", "6")
	blocks := strings.Split(r.Out, "\ng (static) on ORDERS")
	if len(blocks) != 6 {
		t.Fatalf("%d text blocks, want 6:\n%s", len(blocks), r.Out)
	}
	t.Logf("cg static watch ORDERS g (last of 6 samples):\ng (static) on ORDERS%s", blocks[5])
	for _, w := range []string{
		"MEMBER STATUS INSTANCES PINNED STANDBYS PARTITIONS PENDING OLDEST ACKS/S",
		"m2 unowned 0 - 0 2,3 6 ",
		"m3 stalled 1 ",
		"4 m3 stalled 3 +0.0/s",
		"2 m2 unowned 3 +0.0/s",
	} {
		if !has(blocks[5], w) {
			t.Errorf("last block lacks %q:\n%s", w, blocks[5])
		}
	}
	if !has(blocks[5], "m1 ok 1 ") || !has(blocks[5], " 0,1 0 - ") {
		t.Errorf("last block lacks m1's row:\n%s", blocks[5])
	}
}

// TestWatchShowsPinEventsAfterStepDown: a step-down shows as the server
// announced it, an unpin by an admin then a new pin; an interrupt ends the
// watch with exit 0.
func TestWatchShowsPinEventsAfterStepDown(t *testing.T) {
	e := newEnv(t, 2)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "2", "m1")
	e.publishPerPartition(2, 1) // the server pins an instance as it delivers
	m1 := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--json")
	defer m1.Stop(t)
	natstest.Eventually(t, 20*time.Second, "m1 pinned", func() bool { return strings.Contains(m1.Out.String(), `"event":"pinned"`) })

	w := clitest.Start(cmd.Run, e.env, "static", "watch", "ORDERS", "g", "--json", "--interval", "100ms")
	natstest.Eventually(t, 20*time.Second, "a first snapshot", func() bool { return strings.Contains(w.Out.String(), "\n") })
	e.mustRun("static", "step-down", "ORDERS", "g", "m1")
	e.publishPerPartition(2, 1)
	var events []health.PinEvent
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("DEBUG events %+v\nm1 out:\n%s\nm1 err:\n%s\nwatch err:\n%s", events, m1.Out.String(), m1.Err.String(), w.Err.String())
		}
	})
	natstest.Eventually(t, 20*time.Second, "the unpin and the new pin in a snapshot", func() bool {
		snaps := snapshots(t, w.Out.String())
		events = snaps[len(snaps)-1].Events
		_, _, ok := unpinThenPin(events)
		return ok
	})
	un, pin, _ := unpinThenPin(events)
	if un.Member != "m1" || un.Consumer != "g-m1" || un.Reason != "admin" || pin.Member != "m1" || pin.PinID == "" || pin.Time.Before(un.Time) {
		t.Fatalf("events %+v", events)
	}
	if code := w.Stop(t); code != 0 {
		t.Fatalf("interrupted watch exited %d: %s", code, w.Err.String())
	}
}

// unpinThenPin finds the last admin unpin in events and the first pin
// after it (a loaded machine may show more pin events around them).
func unpinThenPin(events []health.PinEvent) (un, pin health.PinEvent, ok bool) {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Event != "unpinned" || events[i].Reason != "admin" {
			continue
		}
		for _, e := range events[i+1:] {
			if e.Event == "pinned" {
				return events[i], e, true
			}
		}
		return health.PinEvent{}, health.PinEvent{}, false
	}
	return health.PinEvent{}, health.PinEvent{}, false
}

// TestWatchElasticAndUsage: the verb is mounted for elastic groups too,
// where a member that is not running leaves its partitions unowned.
func TestWatchElasticAndUsage(t *testing.T) {
	e := newEnv(t, 2)
	// ORDERS is partition-stamped: the work stream sources the stored form.
	e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "*.orders.*:2")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1")
	r := e.mustRun("elastic", "watch", "ORDERS", "g", "--json", "--interval", "50ms", "--count", "2")
	snaps := snapshots(t, r.Out)
	if len(snaps) != 2 || snaps[1].Kind != "elastic" || snaps[1].Statuses[health.StatusUnowned] != 4 || len(snaps[1].Members) != 1 {
		t.Fatalf("elastic watch: %s", r.Out)
	}
	for _, args := range [][]string{
		{"elastic", "watch", "ORDERS", "g", "--interval", "0s"},
		{"static", "watch", "ORDERS"},
	} {
		if r := clitest.Run(t, cmd.Run, e.env, args...); r.Code != 2 {
			t.Errorf("cg %v: exit %d, want 2 (%s)", args, r.Code, r.Err)
		}
	}
	if r := clitest.Run(t, cmd.Run, e.env, "static", "watch", "ORDERS", "nope", "--count", "1"); r.Code != 1 || !strings.Contains(r.Err, "cg static ls ORDERS") {
		t.Errorf("watch of an unknown group: exit %d %q", r.Code, r.Err)
	}
}
