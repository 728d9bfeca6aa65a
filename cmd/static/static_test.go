package static_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

func newEnv(t *testing.T) *env {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.*"}}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, js: js, env: clitest.Env("NATS_URL=" + s.ClientURL())}
}

func (e *env) run(args ...string) clitest.Result {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.env, args...)
}

func (e *env) publish(n int, keys ...string) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		if _, err := e.js.Publish(context.Background(), "orders."+keys[i%len(keys)], nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) kvKeys() []string {
	kv, err := e.js.KeyValue(context.Background(), cg.StaticBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	keys, _ := kv.Keys(context.Background())
	return keys
}

func TestCreateBalancedAndJSON(t *testing.T) {
	e := newEnv(t)
	r := e.run("static", "create", "balanced", "ORDERS", "fulfillment", "10", "m1", "m2", "m3")
	if r.Code != 0 || !strings.Contains(r.Out, "m1=0-2,9") || !strings.Contains(r.Out, "m2=3-5") || !strings.Contains(r.Out, "m3=6-8") {
		t.Fatalf("create: code %d out %q err %q", r.Code, r.Out, r.Err)
	}
	r = e.run("static", "create", "balanced", "ORDERS", "fulfillment", "10", "m1", "m2", "m3", "--json")
	var out struct {
		Created   bool             `json:"created"`
		Ownership map[string][]int `json:"ownership"`
		Consumers []string         `json:"consumers"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Out), &out) != nil {
		t.Fatalf("identical re-create: code %d out %q err %q", r.Code, r.Out, r.Err)
	}
	if out.Created || fmt.Sprint(out.Ownership["m1"]) != "[0 1 2 9]" || len(out.Consumers) != 3 || out.Consumers[0] != "fulfillment-m1" {
		t.Fatalf("json: %+v", out)
	}
	r = e.run("static", "create", "balanced", "ORDERS", "fulfillment", "10", "m1", "m2")
	if r.Code != 1 || !strings.Contains(r.Err, "members [m1 m2 m3] (asked [m1 m2])") {
		t.Fatalf("different create: code %d err %q", r.Code, r.Err)
	}
	r = e.run("static", "ls", "ORDERS", "--json")
	var ls []struct {
		Group   string   `json:"group"`
		Members []string `json:"members"`
	}
	if r.Code != 0 || json.Unmarshal([]byte(r.Out), &ls) != nil || len(ls) != 1 || ls[0].Group != "fulfillment" || len(ls[0].Members) != 3 {
		t.Fatalf("ls: code %d out %q", r.Code, r.Out)
	}
}

func TestCreateRefusesBadInputCreatingNothing(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"balanced", "ORDERS", "a.b", "10", "m1"}, 2, `group name "a.b": must not contain '.'`},
		{[]string{"balanced", "ORDERS", "g", "10", "m*"}, 2, `member name "m*": must not contain the wildcards`},
		{[]string{"balanced", "ORDERS", "g", "10", "m 1"}, 2, `member name "m 1": must not contain white space`},
		{[]string{"balanced", "ORDERS", "g", "10", ""}, 2, `member name "": must not be empty`},
		{[]string{"balanced", "OR>DERS", "g", "10", "m1"}, 2, `stream name "OR>DERS"`},
		{[]string{"balanced", "ORDERS", "g", "10", "m1", "m1"}, 2, `member "m1": is listed twice`},
		{[]string{"balanced", "ORDERS", "g", "2", "m1", "m2", "m3"}, 2, "more members than partitions"},
		{[]string{"balanced", "ORDERS", "g", "ten", "m1"}, 2, `max-members "ten"`},
		{[]string{"balanced", "ORDERS", "g", "0", "m1"}, 2, `max-members "0"`},
		{[]string{"balanced", "ORDERS", "g", "10"}, 2, "missing <member>"},
		{[]string{"balanced", "ORDERS", "g", "10", "m1", "--filter", "a..b"}, 2, "empty token"},
		{[]string{"mapped", "ORDERS", "g", "10", "m1:0-4", "m2:5,6,x"}, 2, `mapping "m2:5,6,x": partition "x"`},
		{[]string{"mapped", "ORDERS", "g", "10", "m1"}, 2, `mapping "m1": has no ':'`},
		{[]string{"mapped", "ORDERS", "g", "10", "m1:0-4", "m2:5-8"}, 2, "partitions 9 are not mapped"},
		{[]string{"mapped", "ORDERS", "g", "10", "m1:0-5", "m2:5-9"}, 2, `"m2" partition 5: partition 5 is already mapped to "m1"`},
		{[]string{"mapped", "ORDERS", "g", "10", "m1:0-9", "m2:10"}, 2, `"m2" partition 10: out of range`},
		{[]string{"mapped", "ORDERS", "g", "10", "m1:0-4", "m1:5-9"}, 2, `"m1": member appears in more than one mapping`},
		// Refused by the engine, still the command line's fault.
		{[]string{"balanced", "ORDERS", strings.Repeat("g", 100), "10", strings.Repeat("m", 190)}, 2, "the server allows 255"},
		{[]string{"mapped", "ORDERS", strings.Repeat("g", 100), "10", strings.Repeat("m", 190) + ":0-9"}, 2, "the server allows 255"},
		{[]string{"balanced", "ORDERS", "g", "8", "m1"}, 1, "partitions into 10 ({{partition(10,...)}}) but max-members is 8"},
		{[]string{"balanced", "PLAIN", "g", "10", "m1"}, 1, `stream "PLAIN" has no subject transform`},
		{[]string{"balanced", "NOPE", "g", "10", "m1"}, 1, `stream not found: "NOPE"`},
	} {
		r := e.run(append([]string{"static", "create"}, tc.args...)...)
		if r.Code != tc.code || !strings.Contains(r.Err, tc.want) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, r.Code, tc.code, r.Err, tc.want)
		}
		if lines := strings.Count(strings.TrimSpace(r.Err), "\n"); lines > 1 {
			t.Errorf("%v: error spans %d lines: %q", tc.args, lines+1, r.Err)
		}
	}
	if keys := e.kvKeys(); len(keys) != 0 {
		t.Fatalf("refused creates stored %v", keys)
	}
}

func TestConsumeInfoStepDownDelete(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1", "m2"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	e.publish(40, "alice", "bob", "carol", "dave", "erin", "frank")
	// m1's share of the traffic, by the math.
	want := 0
	for i := 0; i < 40; i++ {
		p := partition.PartitionOfKey([]string{"alice", "bob", "carol", "dave", "erin", "frank"}[i%6], 10)
		if p < 5 {
			want++
		}
	}
	r := e.run("static", "consume", "ORDERS", "g", "m1", "--sleep", "0s", "--count", fmt.Sprint(want), "--json")
	if r.Code != 0 {
		t.Fatalf("consume: %d %s", r.Code, r.Err)
	}
	msgs, events := 0, map[string]int{}
	var summary map[string]any
	for _, l := range clitest.Lines(t, r.Out) {
		switch l["type"] {
		case "msg":
			msgs++
			if p := int(l["partition"].(float64)); p > 4 {
				t.Errorf("m1 got partition %d", p)
			}
			if s := l["subject"].(string); !strings.HasPrefix(s, "orders.") {
				t.Errorf("subject not stripped: %s", s)
			}
			if l["acked"] != true {
				t.Errorf("not acked: %v", l)
			}
		case "event":
			events[l["event"].(string)]++
		case "summary":
			summary = l
		}
	}
	if msgs != want || summary == nil || int(summary["handled"].(float64)) != want || summary["reason"] != "count reached" {
		t.Fatalf("msgs %d want %d, summary %v", msgs, want, summary)
	}
	if events["joined"] != 1 || events["pinned"] != 1 || events["stopped"] != 1 {
		t.Fatalf("events %v", events)
	}

	// A running instance shows as active and pinned; step-down moves the pin.
	a := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m2", "--sleep", "0s", "--json")
	natstest.Eventually(t, 20*time.Second, "m2 pinned", func() bool { return strings.Contains(a.Out.String(), `"event":"pinned"`) })
	var gi struct {
		Members []health.MemberStatus `json:"members"`
	}
	// m2 may still be working through its backlog: poll until it drains.
	natstest.Eventually(t, 20*time.Second, "m2's backlog drained", func() bool {
		r = e.run("static", "info", "ORDERS", "g", "--json")
		if r.Code != 0 || json.Unmarshal([]byte(r.Out), &gi) != nil {
			t.Fatalf("info: %d %s %s", r.Code, r.Out, r.Err)
		}
		return len(gi.Members) == 2 && gi.Members[1].Pending == 0 && gi.Members[1].AckPending == 0
	})
	if !gi.Members[1].Pinned || !gi.Members[1].Active || gi.Members[0].Pinned || !gi.Members[0].ConsumerExists || gi.Members[0].Pending != 0 {
		t.Fatalf("info members: %+v", gi.Members)
	}
	r = e.run("static", "info", "ORDERS", "g")
	if r.Code != 0 || !strings.Contains(r.Out, "m1=0-4  m2=5-9") || !strings.Contains(r.Out, "active") {
		t.Fatalf("info text: %q", r.Out)
	}
	firstPin := gi.Members[1].PinID
	r = e.run("static", "sd", "ORDERS", "g", "m2", "--json")
	if r.Code != 0 || !strings.Contains(r.Out, firstPin) {
		t.Fatalf("step-down: %d %q %q", r.Code, r.Out, r.Err)
	}
	e.publish(12, "alice", "bob", "carol", "dave", "erin", "frank")
	natstest.Eventually(t, 20*time.Second, "a new pin for m2", func() bool {
		ms, err := cg.New(e.js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m2")
		return err == nil && ms.Pinned && ms.PinID != firstPin
	})
	r = e.run("static", "step-down", "ORDERS", "g", "m3")
	if r.Code != 1 || !strings.Contains(r.Err, `"m3" is not a member`) {
		t.Fatalf("step-down unknown member: %d %q", r.Code, r.Err)
	}
	r = e.run("static", "member-info", "ORDERS", "g", "m1", "--json")
	if r.Code != 0 || !strings.Contains(r.Out, `"consumer": "g-m1"`) {
		t.Fatalf("member-info: %d %q", r.Code, r.Out)
	}
	var ms health.MemberStatus
	if err := json.Unmarshal([]byte(r.Out), &ms); err != nil || ms.Lag == nil {
		t.Fatalf("member-info --json lag: %v %q", err, r.Out)
	}
	if r = e.run("static", "member-info", "ORDERS", "g", "m1"); r.Code != 0 || !strings.Contains(r.Out, fmt.Sprintf("Lag:            %d messages unacked", ms.Lag.Pending)) {
		t.Fatalf("member-info text lag (want %d): %q", ms.Lag.Pending, r.Out)
	}

	// delete: refused without --force off a terminal, then done; the
	// running instance stops cleanly with exit 0.
	if r = e.run("static", "delete", "ORDERS", "g"); r.Code != 2 || !strings.Contains(r.Err, "--force") {
		t.Fatalf("delete without force: %d %q", r.Code, r.Err)
	}
	if r = e.run("static", "rm", "ORDERS", "g", "--force"); r.Code != 0 || !strings.Contains(r.Err, "g-m1 g-m2") {
		t.Fatalf("delete: %d %q", r.Code, r.Err)
	}
	if code := a.Wait(t); code != 0 {
		t.Fatalf("consume after delete exited %d: %s", code, a.Err.String())
	}
	if !strings.Contains(a.Out.String(), `"reason":"group deleted"`) {
		t.Fatalf("consume summary: %s", a.Out.String())
	}
	if r = e.run("static", "delete", "ORDERS", "g", "--force"); r.Code != 1 || !strings.Contains(r.Err, "group not found") {
		t.Fatalf("delete unknown: %d %q", r.Code, r.Err)
	}
	if r = e.run("static", "info", "ORDERS", "nope"); r.Code != 1 || !strings.Contains(r.Err, "cg static ls ORDERS") {
		t.Fatalf("info unknown: %d %q", r.Code, r.Err)
	}
}

func TestConsumeInterruptedExitsZeroWithSummary(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	a := clitest.Start(cmd.Run, e.env, "static", "consume", "ORDERS", "g", "m1", "--sleep", "1ms")
	e.publish(5, "alice", "bob")
	natstest.Eventually(t, 20*time.Second, "5 messages", func() bool { return strings.Count(a.Out.String(), "acked") == 5 })
	if code := a.Stop(t); code != 0 {
		t.Fatalf("interrupted consume exited %d: %s", code, a.Err.String())
	}
	if !strings.Contains(a.Err.String(), "handled 5 messages (5 acked, 0 ack failed)") || !strings.Contains(a.Err.String(), "interrupted") {
		t.Fatalf("summary: %s", a.Err.String())
	}
	for _, bad := range [][]string{{"--sleep", "5"}, {"--sleep", "-1s"}, {"--ack-wait", "x"}, {"--max-ack-pending", "0"}, {"--count", "-3"}} {
		r := e.run(append([]string{"static", "consume", "ORDERS", "g", "m1"}, bad...)...)
		if r.Code != 2 || !strings.Contains(r.Err, bad[1]) {
			t.Errorf("%v: code %d err %q", bad, r.Code, r.Err)
		}
	}
	if r := e.run("static", "consume", "ORDERS", "g", "zz"); r.Code != 1 || !strings.Contains(r.Err, `"zz" is not a member`) {
		t.Fatalf("unknown member: %d %q", r.Code, r.Err)
	}
}

func TestConsumeVerifyCountsPublishedTraffic(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	if r := e.run("publish", "orders.{key}", "--keys", "5", "--count", "50", "--rate", "0"); r.Code != 0 {
		t.Fatalf("publish: %d %s", r.Code, r.Err)
	}
	r := e.run("static", "consume", "ORDERS", "g", "m1", "--sleep", "0s", "--count", "50", "--verify", "--json")
	if r.Code != 0 {
		t.Fatalf("consume --verify: %d %s", r.Code, r.Err)
	}
	lines := clitest.Lines(t, r.Out)
	sum := lines[len(lines)-1]
	v, ok := sum["verify"].(map[string]any)
	if !ok {
		t.Fatalf("summary without verify: %v", sum)
	}
	if v["processed"].(float64) != 50 || v["order_violations"].(float64) != 0 || v["duplicates"].(float64) != 0 || v["keys"].(float64) != 5 {
		t.Fatalf("verify stats: %v", v)
	}
	fresh := 0
	for _, l := range lines {
		if l["type"] == "msg" && l["check"] == "fresh" && l["key"] != "" {
			fresh++
		}
	}
	if fresh != 50 {
		t.Fatalf("%d fresh, keyed message lines, want 50", fresh)
	}
}
