package group_test

// Words that match what happened: the outputs of release, reset and
// step-down say what was done and what happens next, held to it here
// against a real server.

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// release says what happens: a name that is not a member is refused (one
// error line naming the members, exit 1, nothing written), and a release
// for a member with no running instance says it is recorded for the next
// instance, which then acts on it when the parked message comes back.
func TestReleaseSaysWhatHappens(t *testing.T) {
	e := shopEnv(t)
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1", "m2")
	before := clitest.Inventory(t, e.js)
	for _, c := range []struct{ kind, stream, group, members string }{
		{"static", "SHOP", "g", "members: m1"},
		{"elastic", "PLAIN", "e", "members: m1, m2"},
	} {
		for _, extra := range [][]string{nil, {"--skip"}, {"--seq", "3"}} {
			args := append([]string{c.kind, "release", c.stream, c.group, "nobody"}, extra...)
			r := clitest.Run(t, cmd.Run, e.env, args...)
			if r.Code != 1 || strings.Contains(r.Err, "parked") {
				t.Errorf("%v: exit %d, want 1 without a word of parked messages; stderr %q", args, r.Code, r.Err)
			}
			clitest.OneLine(t, strings.Join(args, " "), r.Err, `"nobody" is not a member of `+c.kind+` group "`+c.group+`"`, c.members, "cg "+c.kind+" info "+c.stream+" "+c.group)
		}
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("a refused release changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// Park a message, then stop its instance.
	e.publish("shop.k1.refund", "shop.k1.created")
	policy := []string{"--max-deliver", "2", "--on-poison", "park", "--dead-letter", "dlq.shop", "--fail-subject", "shop.*.refund"}
	a := clitest.Start(cmd.Run, e.env, append([]string{"--json", "static", "consume", "SHOP", "g", "m1", "--sleep", "0s"}, policy...)...)
	a.WaitOut(t, 30*time.Second, "the poison message parked", func(out string) bool { return strings.Contains(out, `"action":"park"`) })
	if code := a.Stop(t); code != 0 {
		t.Fatalf("consume exit %d: %s", code, a.Err)
	}
	clitest.Eventually(t, 20*time.Second, "no instance of m1 running", func() bool {
		var v struct {
			Members []struct {
				Active bool `json:"active"`
				Pinned bool `json:"pinned"`
			} `json:"members"`
		}
		_ = json.Unmarshal([]byte(e.mustRun("--json", "static", "info", "SHOP", "g").Out), &v)
		return len(v.Members) == 1 && !v.Members[0].Active && !v.Members[0].Pinned
	})

	r := e.mustRun("static", "release", "SHOP", "g", "m1", "--skip")
	clitest.OneLine(t, "release with no instance", r.Err, "release of parked message 1", "recorded: no instance of m1 is running",
		"the next one started with a retry policy", "dead-letters it to dlq.shop", "when the message is redelivered to it")
	if strings.Contains(r.Err, "running instance") {
		t.Fatalf("release claims a running instance acts: %s", r.Err)
	}
	if n := len(e.deadLetters()); n != 0 {
		t.Fatalf("%d dead letters before any instance ran", n)
	}

	// What it said: the next instance dead-letters it, and the key goes on.
	b := clitest.Start(cmd.Run, e.env, append([]string{"--json", "static", "consume", "SHOP", "g", "m1", "--sleep", "0s"}, policy...)...)
	defer b.Stop(t)
	b.WaitOut(t, 30*time.Second, "the next instance skips the message and handles its key's next one", func(out string) bool {
		return strings.Contains(out, `"action":"dead-letter"`) && strings.Contains(out, `"subject":"shop.k1.created"`)
	})
	if dls := e.deadLetters(); len(dls) != 1 || dls[0].Header.Get("Cg-Reason") != "skip" || dls[0].Header.Get("Cg-Sequence") != "1" {
		t.Fatalf("dead letters after the recorded skip: %d %v", len(dls), dls)
	}
}

// What docs/replay.md says of the plan's counting consumers: cg does not
// delete them, the server removes them by inactivity about 2 s after they
// were made, and nothing else is left on the stream.
func TestResetCountingConsumersGoByInactivity(t *testing.T) {
	e := resetEnv(t)
	counting := func() (n int, threshold time.Duration) {
		for _, ci := range e.consumerInfos() {
			if ci.Config.Description == "cg reset count" {
				n++
				threshold = ci.Config.InactiveThreshold
			}
		}
		return n, threshold
	}
	start := time.Now()
	if r := e.run("static", "reset", "ORDERS", "g", "--to-seq", "21", "--dry-run"); r.Code != 0 {
		t.Fatalf("reset --dry-run: %s", r)
	}
	n, threshold := counting()
	// Seen right after the plan (unless this machine took longer than the
	// server's 2 s to get here): left for the server, not deleted.
	if time.Since(start) < 1500*time.Millisecond && n == 0 {
		t.Fatal("no counting consumer left right after the plan: docs/replay.md says the server removes them, not cg")
	}
	if n > 0 && threshold != 2*time.Second {
		t.Fatalf("counting consumers' inactive threshold %s, docs/replay.md says about 2 s", threshold)
	}
	natstest.Eventually(t, 15*time.Second, "the counting consumers removed by the server", func() bool {
		n, _ := counting()
		return n == 0
	})
	if names := e.consumerNames(); strings.Join(names, ",") != "g-m1,g-m2" {
		t.Fatalf("consumers left on ORDERS: %v", names)
	}
}

func (e *env) consumerNames() []string {
	e.t.Helper()
	var names []string
	for _, ci := range e.consumerInfos() {
		names = append(names, ci.Name)
	}
	slices.Sort(names)
	return names
}

// consumerInfos lists the consumers of ORDERS.
func (e *env) consumerInfos() []*jetstream.ConsumerInfo {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), "ORDERS")
	if err != nil {
		e.t.Fatal(err)
	}
	l := s.ListConsumers(context.Background())
	var out []*jetstream.ConsumerInfo
	for ci := range l.Info() {
		out = append(out, ci)
	}
	if err := l.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// step-down says who is pinned next: a standby (or the same instance)
// while an instance pulls; when the pin outlived its instance (gone
// without a stop, so nothing pulls), the next instance to pull.
func TestStepDownSaysWhoIsPinnedNext(t *testing.T) {
	e := newEnv(t, 2)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "2", "m1")
	e.publishPerPartition(2, 1) // the server pins an instance as it delivers
	nc, err := nats.Connect(e.env("NATS_URL"))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// A pinned TTL far beyond the test: the pin stays after the instance
	// goes, until a step-down.
	m, err := cg.New(js).JoinStatic(context.Background(), "ORDERS", "g", "m1", func(_ context.Context, m *cg.Msg) { _ = m.Ack() },
		cg.JoinOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	memberState := func() (pinned bool, waiting int) {
		var v struct {
			Pinned  bool `json:"pinned"`
			Waiting int  `json:"waiting"`
		}
		_ = json.Unmarshal([]byte(e.mustRun("--json", "static", "member-info", "ORDERS", "g", "m1").Out), &v)
		return v.Pinned, v.Waiting
	}
	clitest.Eventually(t, 20*time.Second, "m1 pinned and pulling", func() bool { p, w := memberState(); return p && w == 1 })
	r := e.mustRun("static", "step-down", "ORDERS", "g", "m1")
	clitest.OneLine(t, "step-down with an instance pulling", r.Err, "unpinned instance", "of consumer g-m1", "the server pins a standby (or the same instance, if it is alone) on its next pull")

	// The instance takes the pin again with its next delivery; then its
	// connection goes without a stop: the pin stays, nothing pulls.
	e.publishPerPartition(2, 1)
	clitest.Eventually(t, 20*time.Second, "m1 pinned again", func() bool { p, w := memberState(); return p && w == 1 })
	nc.Close()
	clitest.Eventually(t, 20*time.Second, "the pin left without an instance", func() bool { p, w := memberState(); return p && w == 0 })
	r = e.mustRun("static", "step-down", "ORDERS", "g", "m1")
	clitest.OneLine(t, "step-down with nothing pulling", r.Err, "unpinned instance", "no instance was pulling, so the server pins whichever instance of the member pulls next")
	if strings.Contains(r.Err, "standby") {
		t.Fatalf("step-down names a standby where none was: %s", r.Err)
	}
	if p, _ := memberState(); p {
		t.Fatal("still pinned after the step-down")
	}
}
