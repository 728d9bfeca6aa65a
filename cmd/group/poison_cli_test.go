package group_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// Bad poison flags: one line naming the mistake, exit 2, nothing joined
// (no member consumer made), for both kinds.
func TestConsumePoisonBadInput(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1")
	before := clitest.Inventory(t, e.js)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--max-deliver", "0"}, []string{"--max-deliver", "minimum 1"}},
		{[]string{"--max-deliver", "x"}, []string{"--max-deliver", "whole number"}},
		{[]string{"--backoff", "1s,x"}, []string{"--backoff", "delay 2", "not a duration"}},
		{[]string{"--backoff", "5"}, []string{"--backoff", "no unit"}},
		{[]string{"--backoff", "1s,,2s"}, []string{"--backoff", "delay 2 is empty"}},
		{[]string{"--backoff", "-1s"}, []string{"--backoff", "negative"}},
		{[]string{"--max-deliver", "1", "--backoff", "1s"}, []string{"--backoff", "--max-deliver 1"}},
		{[]string{"--on-poison", "drop"}, []string{"--on-poison", "dead-letter, park or stop"}},
		{[]string{"--on-poison", "dead-letter"}, []string{"--dead-letter SUBJECT"}},
		{[]string{"--dead-letter", "dlq.>"}, []string{"--dead-letter", "without wildcards"}},
		{[]string{"--dead-letter", "dlq.*.x"}, []string{"--dead-letter", "without wildcards"}},
		{[]string{"--dead-letter", "dlq..x"}, []string{"--dead-letter", "not a valid subject"}},
		{[]string{"--dead-letter", ""}, []string{"--dead-letter", "name the subject"}},
		{[]string{"--dead-letter", "$JS.x"}, []string{"--dead-letter", "server's"}},
		{[]string{"--on-poison", "stop", "--dead-letter", "dlq.x"}, []string{"--dead-letter dlq.x", "--on-poison stop"}},
		{[]string{"--fail-subject", "orders..x"}, []string{"--fail-subject", "pattern"}},
		{[]string{"--fail-subject", ""}, []string{"--fail-subject", "pattern"}},
	} {
		for _, kind := range []string{"static", "elastic"} {
			where := map[string][]string{"static": {"ORDERS", "g"}, "elastic": {"PLAIN", "e"}}[kind]
			args := append([]string{kind, "consume", where[0], where[1], "m1", "--count", "1"}, c.args...)
			r := clitest.Run(t, cmd.Run, e.env, args...)
			if r.Code != 2 {
				t.Errorf("%v: exit %d, want 2; stderr %q", c.args, r.Code, r.Err)
				continue
			}
			// One error line; cobra's usage errors add a "Run ... --help" line.
			errs := clitest.ErrorLines(r.Err)
			if len(errs) != 1 {
				t.Errorf("%v: %d error lines, want 1: %q", c.args, len(errs), r.Err)
				continue
			}
			clitest.OneLine(t, strings.Join(c.args, " "), errs[0], c.want...)
		}
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("a refused consume changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// plainStream makes a stream without a partition transform, for elastic groups.
func (e *env) plainStream(name, subject string) {
	e.t.Helper()
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		e.t.Fatal(err)
	}
}

// shopEnv is a server with SHOP partitioned 4 ways by customer on
// shop.<customer>.<event>, the dead-letter stream DLQ on dlq.shop, and the
// static group g with the one member m1.
func shopEnv(t *testing.T) *env {
	e := newEnv(t, 4)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "SHOP", Subjects: []string{"shop.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "shop.*.*", Destination: "{{partition(4,1)}}.shop.{{wildcard(1)}}.{{wildcard(2)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.shop"}}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("static", "create", "balanced", "SHOP", "g", "4", "m1")
	return e
}

// publish publishes each subject once, in order.
func (e *env) publish(subjects ...string) {
	e.t.Helper()
	for _, s := range subjects {
		if _, err := e.js.Publish(context.Background(), s, []byte(s)); err != nil {
			e.t.Fatal(err)
		}
	}
}

// deadLetters returns the messages in DLQ.
func (e *env) deadLetters() []*jetstream.RawStreamMsg {
	e.t.Helper()
	s, err := e.js.Stream(context.Background(), "DLQ")
	if err != nil {
		e.t.Fatal(err)
	}
	si, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := si.State.FirstSeq; seq > 0 && seq <= si.State.LastSeq; seq++ {
		m, err := s.GetMsg(context.Background(), seq)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// consumeLine is what the tests read of consume --json lines.
type consumeLine struct {
	Type      string `json:"type"`
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	Delivered uint64 `json:"delivered"`
	Acked     any    `json:"acked"` // a bool on msg lines, a count on the summary
	Failed    any    `json:"failed"`
	Action    string `json:"action"`
	Reason    string `json:"reason"`
	// summary
	Handled      int `json:"handled"`
	DeadLettered int `json:"dead_lettered"`
	Parked       int `json:"parked"`
}

func consumeLines(t *testing.T, out string) []consumeLine {
	t.Helper()
	var ls []consumeLine
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var c consumeLine
		if err := json.Unmarshal([]byte(l), &c); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		ls = append(ls, c)
	}
	return ls
}

// One poison message dead-lettered through the CLI: its key's later
// messages are handled only after the dead letter, which lands once with
// its headers; the summary, info and watch count it.
func TestConsumeDeadLetter(t *testing.T) {
	e := shopEnv(t)
	e.publish("shop.k1.refund", "shop.k1.created", "shop.k2.created", "shop.k1.created", "shop.k2.created", "shop.k1.created", "shop.k2.created")
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "SHOP", "g", "m1", "--count", "6", "--sleep", "0s",
		"--max-deliver", "2", "--dead-letter", "dlq.shop", "--fail-subject", "shop.*.refund")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	ls := consumeLines(t, r.Out)
	var failed, acked []consumeLine
	deadAt, firstK1 := -1, -1
	for i, l := range ls {
		switch {
		case l.Type == "msg" && l.Failed == true:
			failed = append(failed, l)
		case l.Type == "msg" && l.Acked == true:
			acked = append(acked, l)
			if strings.HasPrefix(l.Subject, "shop.k1.") && firstK1 < 0 {
				firstK1 = i
			}
		case l.Type == "poison":
			if l.Action != "dead-letter" || deadAt >= 0 {
				t.Fatalf("poison line %+v (dead-letter line before at %d)", l, deadAt)
			}
			deadAt = i
		}
	}
	if len(failed) != 2 || failed[0].Delivered != 1 || failed[1].Delivered != 2 || failed[0].StreamSeq != 1 {
		t.Fatalf("failed deliveries %+v, want seq 1 delivered 1 then 2\n%s", failed, r.Out)
	}
	if len(acked) != 6 || deadAt < 0 || firstK1 < deadAt {
		t.Fatalf("%d acked, dead-letter line %d, first later k1 message %d: the key's later messages must follow the dead letter\n%s", len(acked), deadAt, firstK1, r.Out)
	}
	if sum := ls[len(ls)-1]; sum.Type != "summary" || sum.DeadLettered != 1 || sum.Handled != 6 || !strings.Contains(r.Out, `"failed":2`) {
		t.Fatalf("summary %+v\n%s", sum, r.Out)
	}
	dl := e.deadLetters()
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	h := dl[0].Header
	for k, want := range map[string]string{"Cg-Stream": "SHOP", "Cg-Sequence": "1", "Cg-Subject": "shop.k1.refund", "Cg-Group": "g",
		"Cg-Member": "m1", "Cg-Deliveries": "2", "Cg-Kind": "static"} {
		if got := h.Get(k); got != want {
			t.Errorf("dead letter header %s = %q, want %q", k, got, want)
		}
	}
	if !strings.Contains(h.Get("Cg-Error"), "--fail-subject shop.*.refund") || string(dl[0].Data) != "shop.k1.refund" {
		t.Errorf("dead letter: Cg-Error %q, body %q", h.Get("Cg-Error"), dl[0].Data)
	}

	var info struct {
		Members []struct {
			DeadLettered uint64 `json:"dead_lettered"`
		} `json:"members"`
		PoisonPartitions []struct {
			Partition    int    `json:"partition"`
			DeadLettered uint64 `json:"dead_lettered"`
		} `json:"poison_partitions"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("--json", "static", "info", "SHOP", "g").Out), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Members) != 1 || info.Members[0].DeadLettered != 1 || len(info.PoisonPartitions) != 1 || info.PoisonPartitions[0].DeadLettered != 1 {
		t.Fatalf("info --json poison fields: %+v", info)
	}
	// The goldens pin a member with no instance and nothing unacked: the
	// stopped consume's last acks, its unsubscribe and its closed
	// connection reach the server on their own time, so wait for that state.
	clitest.Eventually(t, 20*time.Second, "the stopped instance gone and its acks in", func() bool {
		var v struct {
			Members []struct {
				Active     bool   `json:"active"`
				Pinned     bool   `json:"pinned"`
				Pending    uint64 `json:"pending"`
				AckPending int    `json:"ack_pending"`
			} `json:"members"`
		}
		_ = json.Unmarshal([]byte(e.mustRun("--json", "static", "info", "SHOP", "g").Out), &v)
		return len(v.Members) == 1 && !v.Members[0].Active && !v.Members[0].Pinned && v.Members[0].Pending == 0 && v.Members[0].AckPending == 0
	})
	goldenOut(t, "static-info-dead-lettered", e.mustRun("static", "info", "SHOP", "g"))
	goldenOut(t, "static-watch-dead-lettered", e.mustRun("static", "watch", "SHOP", "g", "--count", "1"))
	// Nothing parked: check has no poison warning (the member has no
	// instance now, which check reports on its own).
	if r := clitest.Run(t, cmd.Run, e.env, "check", "SHOP", "g"); strings.Contains(r.Out, "poison") {
		t.Fatalf("check with only dead letters: %s", r)
	}
}

// --on-poison stop: the instance exits non-zero naming the message, which
// stays pending.
func TestConsumePoisonStop(t *testing.T) {
	e := shopEnv(t)
	e.publish("shop.k2.created", "shop.k1.refund", "shop.k1.created")
	r := clitest.Run(t, cmd.Run, e.env, "static", "consume", "SHOP", "g", "m1", "--sleep", "0s",
		"--max-deliver", "2", "--on-poison", "stop", "--fail-subject", "shop.*.refund")
	if r.Code != 1 {
		t.Fatalf("consume --on-poison stop: %s", r)
	}
	for _, want := range []string{"poison message", "sequence 2", "shop.k1.refund", "2 deliveries"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("stderr does not name the message (%q): %s", want, r.Err)
		}
	}
	if strings.Contains(r.Out, "shop.k1.created") || !strings.Contains(r.Out, "shop.k2.created") {
		t.Fatalf("handled: %s", r.Out)
	}
	if n := len(e.deadLetters()); n != 0 {
		t.Fatalf("%d dead letters under stop", n)
	}
}

// --on-poison park: the poison message's key stops while the others go
// on; info lists the parked message, check warns naming the release
// command; release --retry parks it again (it still fails), release --skip
// dead-letters it and the key's later messages follow.
func TestConsumeParkAndRelease(t *testing.T) {
	e := shopEnv(t)
	e.publish("shop.k1.refund", "shop.k1.created", "shop.k2.created", "shop.k1.created", "shop.k2.created", "shop.k2.created")
	a := clitest.Start(cmd.Run, e.env, "--json", "static", "consume", "SHOP", "g", "m1", "--sleep", "0s", "--concurrency", "4",
		"--max-deliver", "2", "--on-poison", "park", "--dead-letter", "dlq.shop", "--fail-subject", "shop.*.refund")
	defer a.Stop(t)
	count := func(out, what string) int { return strings.Count(out, what) }
	a.WaitOut(t, 30*time.Second, "the poison message parked and k2 handled", func(out string) bool {
		return count(out, `"action":"park"`) == 1 && count(out, `"subject":"shop.k2.created"`) == 3
	})
	if strings.Contains(a.Out.String(), `"subject":"shop.k1.created"`) {
		t.Fatalf("a later message of the parked key was handled:\n%s", a.Out)
	}

	var info struct {
		Members []struct {
			Parked []struct {
				Sequence uint64 `json:"sequence"`
				Subject  string `json:"subject"`
				Key      string `json:"key"`
			} `json:"parked"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("--json", "static", "info", "SHOP", "g").Out), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Members) != 1 || len(info.Members[0].Parked) != 1 || info.Members[0].Parked[0].Sequence != 1 || info.Members[0].Parked[0].Subject != "shop.k1.refund" {
		t.Fatalf("info --json parked: %+v", info)
	}
	if mi := e.mustRun("--json", "static", "member-info", "SHOP", "g", "m1").Out; !strings.Contains(mi, `"parked": [`) || !strings.Contains(mi, `"subject": "shop.k1.refund"`) {
		t.Errorf("member-info --json lacks the parked message:\n%s", mi)
	}
	text := e.mustRun("static", "info", "SHOP", "g").Out
	for _, want := range []string{"1 parked", "Parked messages", "shop.k1.refund", "cg static release SHOP g m1"} {
		if !strings.Contains(text, want) {
			t.Errorf("info lacks %q:\n%s", want, text)
		}
	}
	if w := e.mustRun("static", "watch", "SHOP", "g", "--count", "1").Out; !strings.Contains(w, "Parked messages") || !strings.Contains(w, "0 dead-lettered, 1 parked") {
		t.Errorf("watch lacks the parked message:\n%s", w)
	}
	r := clitest.Run(t, cmd.Run, e.env, "check", "SHOP", "g")
	if r.Code != 1 || !strings.Contains(r.Out, "parked-message") || !strings.Contains(r.Out, "'cg static release SHOP g m1'") || !strings.Contains(r.Out, "sequence 1 (subject shop.k1.refund") {
		t.Fatalf("check on a parked key: %s", r)
	}
	r = clitest.Run(t, cmd.Run, e.env, "--json", "check", "SHOP", "g")
	if !strings.Contains(r.Out, `"code": "parked-message"`) && !strings.Contains(r.Out, `"code":"parked-message"`) {
		t.Fatalf("check --json: %s", r.Out)
	}

	// Bad release input: one line, exit 2.
	for _, bad := range [][]string{{"--retry", "--skip"}, {"--seq", "0"}} {
		r := clitest.Run(t, cmd.Run, e.env, append([]string{"static", "release", "SHOP", "g", "m1"}, bad...)...)
		if r.Code != 2 || len(clitest.ErrorLines(r.Err)) != 1 {
			t.Errorf("release %v: %s", bad, r)
		}
	}
	if r := clitest.Run(t, cmd.Run, e.env, "static", "release", "SHOP", "g", "m1", "--seq", "99"); r.Code != 1 || !strings.Contains(r.Err, "no parked message at sequence 99") {
		t.Errorf("release --seq 99: %s", r)
	}

	// Retry: one more delivery, which fails, so it parks again.
	r = e.mustRun("static", "release", "SHOP", "g", "m1")
	if !strings.Contains(r.Err, "released parked message 1") || !strings.Contains(r.Err, "retries it once more") {
		t.Fatalf("release: %s", r)
	}
	a.WaitOut(t, 30*time.Second, "the retried message parked again", func(out string) bool { return count(out, `"action":"park"`) == 2 })
	if strings.Contains(a.Out.String(), `"subject":"shop.k1.created"`) || len(e.deadLetters()) != 0 {
		t.Fatalf("after a retry that failed again, the key moved on or a dead letter was sent:\n%s", a.Out)
	}

	// Skip: dead-lettered, then the key's later messages are handled.
	r = e.mustRun("--json", "static", "release", "SHOP", "g", "m1", "--skip")
	if !strings.Contains(r.Out, `"action": "skip"`) || !strings.Contains(r.Out, `"sequence": 1`) {
		t.Fatalf("release --skip --json: %s", r.Out)
	}
	a.WaitOut(t, 30*time.Second, "the key's later messages handled after the skip", func(out string) bool {
		return count(out, `"subject":"shop.k1.created"`) == 2
	})
	out := a.Out.String()
	if dl := strings.Index(out, `"action":"dead-letter"`); dl < 0 || dl > strings.Index(out, `"subject":"shop.k1.created"`) {
		t.Fatalf("the key's later messages came before its dead letter:\n%s", out)
	}
	dls := e.deadLetters()
	if len(dls) != 1 || dls[0].Header.Get("Cg-Reason") != "skip" || dls[0].Header.Get("Cg-Sequence") != "1" {
		t.Fatalf("dead letters after the skip: %d %v", len(dls), dls)
	}
	clitest.Eventually(t, 20*time.Second, "nothing parked", func() bool {
		r := clitest.Run(t, cmd.Run, e.env, "static", "release", "SHOP", "g", "m1")
		return r.Code == 0 && strings.Contains(r.Err, "nothing to release")
	})
	if code := a.Stop(t); code != 0 {
		t.Fatalf("consume exit %d: %s", code, a.Err)
	}
	if !strings.Contains(a.Out.String(), `"parked":2`) || !strings.Contains(a.Out.String(), `"dead_lettered":1`) {
		t.Fatalf("summary: %s", a.Out)
	}
}

// Elastic: the same flags dead-letter a poison message from the work
// stream; its headers name both the group's stream and the work stream.
func TestElasticConsumeDeadLetter(t *testing.T) {
	e := newEnv(t, 4)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*.*"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.ev"}}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("elastic", "create", "EV", "e", "4", "--filter", "ev.*.*:1")
	e.mustRun("elastic", "add", "EV", "e", "m1")
	e.publish("ev.k1.refund", "ev.k1.created", "ev.k2.created")
	r := clitest.Run(t, cmd.Run, e.env, "elastic", "consume", "EV", "e", "m1", "--count", "2", "--sleep", "0s",
		"--max-deliver", "2", "--backoff", "100ms", "--dead-letter", "dlq.ev", "--fail-subject", "ev.*.refund")
	if r.Code != 0 {
		t.Fatalf("elastic consume: %s", r)
	}
	if !strings.Contains(r.Err, "dead-letter: dead-lettered message") || !strings.Contains(r.Err, "1 dead-lettered") {
		t.Fatalf("stderr lacks the dead-letter event or the summary's count:\n%s", r.Err)
	}
	if !strings.Contains(r.Out, "ev.k1.created") || !strings.Contains(r.Out, "failed (--fail-subject ev.*.refund)") {
		t.Fatalf("stdout lacks the failed delivery or the key's later message:\n%s", r.Out)
	}
	dls := e.deadLetters()
	if len(dls) != 1 || dls[0].Header.Get("Cg-Stream") != "EV" || dls[0].Header.Get("Cg-Consumed-Stream") != "EV-e" || dls[0].Header.Get("Cg-Kind") != "elastic" {
		t.Fatalf("elastic dead letters: %d %+v", len(dls), dls)
	}
	var info struct {
		Members []struct {
			DeadLettered uint64 `json:"dead_lettered"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(e.mustRun("--json", "elastic", "info", "EV", "e").Out), &info); err != nil {
		t.Fatal(err)
	}
	if len(info.Members) != 1 || info.Members[0].DeadLettered != 1 {
		t.Fatalf("elastic info --json: %+v", info)
	}
}

// A group made without the poison bucket (by the reference, or before cg
// had one): consume with a retry policy refuses in one line saying how to
// make it, and joins nothing; without a policy it runs as before.
func TestConsumePoisonNoBucket(t *testing.T) {
	e := newEnv(t, 4)
	clitest.Store(t, e.js, cg.StaticBucket, "ORDERS.ref", `{"max_members":4,"filters":[">"],"members":["m1"]}`)
	before := clitest.Inventory(t, e.js)
	r := clitest.Run(t, cmd.Run, e.env, "static", "consume", "ORDERS", "ref", "m1", "--count", "1", "--max-deliver", "3")
	if r.Code != 1 || len(clitest.ErrorLines(r.Err)) != 1 || !strings.Contains(r.Err, cg.PoisonBucket) || !strings.Contains(r.Err, "'cg static create ...'") {
		t.Fatalf("consume --max-deliver on a group without the bucket: %s", r)
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("the refused consume changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}
