package check_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/check"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

type env struct {
	t   *testing.T
	s   *server.Server
	js  jetstream.JetStream
	env func(string) string
}

func newEnv(t *testing.T) *env {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	return &env{t: t, s: s, js: js, env: clitest.Env("NATS_URL=" + s.ClientURL())}
}

// partitioned creates a stream over name.* stamped into n partitions.
func (e *env) partitioned(name string, n int) {
	e.t.Helper()
	subj := strings.ToLower(name)
	_, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: name, Subjects: []string{subj + ".*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: subj + ".*", Destination: fmt.Sprintf("{{partition(%d,1)}}.%s.{{wildcard(1)}}", n, subj)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) run(args ...string) clitest.Result {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.env, args...)
}

func (e *env) mustRun(args ...string) {
	e.t.Helper()
	if r := e.run(args...); r.Code != 0 {
		e.t.Fatalf("cg %v: exit %d, stderr %q", args, r.Code, r.Err)
	}
}

// check runs cg check --json with args and decodes the report.
func (e *env) check(args ...string) (int, check.Report) {
	e.t.Helper()
	r := e.run(append([]string{"check", "--json"}, args...)...)
	var rep check.Report
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		e.t.Fatalf("cg check %v: exit %d, not JSON: %v\nstdout %q\nstderr %q", args, r.Code, err, r.Out, r.Err)
	}
	if rep.ExitCode != r.Code {
		e.t.Fatalf("cg check %v: exit %d but exit_code %d", args, r.Code, rep.ExitCode)
	}
	return r.Code, rep
}

// expect checks the exit code and that a finding with code (and, when
// given, member) is there.
func (e *env) expect(wantExit int, code, member string, args ...string) check.Finding {
	e.t.Helper()
	exit, rep := e.check(args...)
	f, ok := find(rep, code, member)
	if exit != wantExit || !ok {
		e.t.Fatalf("cg check %v: exit %d (want %d), want finding %s %s; got %s", args, exit, wantExit, code, member, dump(rep))
	}
	return f
}

// eventually polls check until the exit code and finding are there.
func (e *env) eventually(wantExit int, code, member string, args ...string) check.Finding {
	e.t.Helper()
	var (
		exit int
		rep  check.Report
		f    check.Finding
		ok   bool
	)
	deadline := time.Now().Add(15 * time.Second)
	for {
		exit, rep = e.check(args...)
		f, ok = find(rep, code, member)
		if exit == wantExit && (code == "" || ok) {
			return f
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("cg check %v: still exit %d (want %d, finding %q %s): %s", args, exit, wantExit, code, member, dump(rep))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func find(rep check.Report, code, member string) (check.Finding, bool) {
	for _, f := range rep.Findings {
		if f.Code == code && (member == "" || f.Member == member) {
			return f, true
		}
	}
	return check.Finding{}, false
}

func dump(rep check.Report) string {
	b, _ := json.MarshalIndent(rep, "", "  ")
	return string(b)
}

// join starts a member instance on a connection of its own, stopped when
// the test ends.
func (e *env) join(kind, stream, group, member string) *cg.Member {
	e.t.Helper()
	_, js := natstest.JetStream(e.t, e.s)
	c := cg.New(js)
	h := func(_ context.Context, m *cg.Msg) { _ = m.Ack() }
	opts := cg.JoinOptions{AckWait: time.Second}
	var (
		m   *cg.Member
		err error
	)
	if kind == "static" {
		m, err = c.JoinStatic(context.Background(), stream, group, member, h, opts)
	} else {
		m, err = c.JoinElastic(context.Background(), stream, group, member, h, opts)
	}
	if err != nil {
		e.t.Fatalf("join %s %s/%s %s: %v", kind, stream, group, member, err)
	}
	e.t.Cleanup(m.Stop)
	return m
}

// publishTo publishes one message on subject prefix.<key> for a key
// landing in partition p of n.
func (e *env) publishTo(prefix string, p, n int) {
	e.t.Helper()
	for i := 0; ; i++ {
		key := fmt.Sprintf("k%d", i)
		if partition.PartitionOfKey(key, n) != p {
			continue
		}
		if _, err := e.js.Publish(context.Background(), prefix+"."+key, nil); err != nil {
			e.t.Fatal(err)
		}
		return
	}
}

func TestStaticGroupHealth(t *testing.T) {
	e := newEnv(t)
	e.partitioned("ORDERS", 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2") // m1 0-1, m2 2-3

	// Nobody joined and nothing waits: a warning per member.
	r := e.run("check", "ORDERS", "g")
	if r.Code != 1 || !strings.HasPrefix(r.Out, "WARNING: 2 warnings; 1 group checked, nats-server ") ||
		strings.Count(r.Out, "member-no-instance") != 2 || r.Err != "" {
		t.Fatalf("never joined: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}

	// Healthy: every member has a live instance.
	m1 := e.join("static", "ORDERS", "g", "m1")
	m2 := e.join("static", "ORDERS", "g", "m2")
	e.eventually(0, "", "", "ORDERS", "g")
	if r := e.run("check", "ORDERS", "g"); r.Code != 0 || !strings.HasPrefix(r.Out, "OK: 1 group checked, nats-server ") || strings.Count(r.Out, "\n") != 1 {
		t.Fatalf("healthy: exit %d %q", r.Code, r.Out)
	}

	// m2 stops: a warning while nothing waits for it...
	m2.Stop()
	e.eventually(1, "member-no-instance", "m2", "ORDERS", "g")
	// ...critical once messages wait on its partitions.
	e.publishTo("orders", 2, 4)
	f := e.eventually(2, "partition-unserved", "m2", "ORDERS", "g")
	if f.Pending != 1 || f.Severity != "critical" || fmt.Sprint(f.Partitions) != "[2 3]" || !strings.Contains(f.Hint, "cg static consume ORDERS g m2") {
		t.Fatalf("partition-unserved: %+v", f)
	}
	r = e.run("check", "ORDERS", "g")
	if r.Code != 2 || !strings.HasPrefix(r.Out, "CRITICAL: 1 critical; 1 group checked") {
		t.Fatalf("text: exit %d\n%s", r.Code, r.Out)
	}
	t.Logf("sample output:\n%s", r.Out)

	// Filters changed behind cg's back.
	ctx := context.Background()
	cons, err := e.js.Consumer(ctx, "ORDERS", "g-m1")
	if err != nil {
		t.Fatal(err)
	}
	cc := cons.CachedInfo().Config
	cc.FilterSubjects = []string{"0.>"}
	if _, err := e.js.UpdateConsumer(ctx, "ORDERS", cc); err != nil {
		t.Fatal(err)
	}
	e.expect(2, "consumer-filter-drift", "m1", "ORDERS", "g")
	m1.Stop()

	// A leftover named like the group's, next to another group's consumer
	// that only looks like one (group g-x, member m1: g-x-m1).
	e.mustRun("static", "create", "balanced", "ORDERS", "g-x", "4", "m1")
	for _, name := range []string{"g-old", "g-x-m1"} {
		if _, err := e.js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: name, AckPolicy: jetstream.AckExplicitPolicy,
			PriorityGroups: []string{cg.PriorityGroup}, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	_, rep := e.check("ORDERS", "g")
	f, ok := find(rep, "consumer-leftover", "")
	if !ok || f.Consumer != "g-old" || f.Severity != "warning" || strings.Count(dump(rep), "consumer-leftover") != 1 {
		t.Fatalf("leftover: %s", dump(rep))
	}

	// Scopes: the stream's groups, every group, one kind.
	if _, rep := e.check("ORDERS"); len(rep.Groups) != 2 || rep.Groups[0].Group != "g" || rep.Groups[1].Group != "g-x" {
		t.Fatalf("stream scope: %s", dump(rep))
	}
	if _, rep := e.check(); len(rep.Groups) != 2 {
		t.Fatalf("no scope: %s", dump(rep))
	}
	e.expect(2, "group-missing", "", "ORDERS", "g", "--kind", "elastic")
	e.expect(2, "group-missing", "", "ORDERS", "nope")
	e.expect(2, "stream-missing", "", "NOPE")
}

func TestStaticStreamDrift(t *testing.T) {
	e := newEnv(t)
	e.partitioned("SHIP", 4)
	e.mustRun("static", "create", "balanced", "SHIP", "g", "4", "m1", "--filter", "ship.*")
	e.expect(1, "member-no-instance", "m1", "SHIP", "g")

	ctx := context.Background()
	s, err := e.js.Stream(ctx, "SHIP")
	if err != nil {
		t.Fatal(err)
	}
	update := func(st *jetstream.SubjectTransformConfig) {
		t.Helper()
		sc := s.CachedInfo().Config
		sc.SubjectTransform = st
		if _, err := e.js.UpdateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	update(&jetstream.SubjectTransformConfig{Source: "ship.*", Destination: "{{partition(3,1)}}.ship.{{wildcard(1)}}"})
	e.expect(2, "stream-partitions-mismatch", "", "SHIP", "g")
	update(&jetstream.SubjectTransformConfig{Source: "ship.*", Destination: "{{partition(4,1)}}.sent.{{wildcard(1)}}"})
	e.expect(2, "stream-filter-mismatch", "", "SHIP", "g")
	update(nil)
	e.expect(2, "stream-not-partitioned", "", "SHIP", "g")
	if err := e.js.DeleteStream(ctx, "SHIP"); err != nil {
		t.Fatal(err)
	}
	e.expect(2, "stream-missing", "", "SHIP", "g")
}

func TestElasticGroupHealth(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*"}}); err != nil {
		t.Fatal(err)
	}
	e.mustRun("elastic", "create", "EV", "eg", "4", "--filter", "ev.*:1")

	// No members: nobody owns a partition. A group that was never given
	// members is not started yet rather than broken, so that is a warning
	// (whatever create accepts, check does not call critical), saying how
	// many messages wait in the work stream for the members to come.
	f := e.expect(1, "partition-unowned", "", "EV", "eg")
	if len(f.Partitions) != 4 || f.Kind != "elastic" {
		t.Fatalf("unowned: %+v", f)
	}
	e.publishTo("ev", 1, 4)
	natstest.Eventually(t, 10*time.Second, "the unowned warning counts the message waiting in the work stream", func() bool {
		f := e.expect(1, "partition-unowned", "", "EV", "eg")
		return strings.Contains(f.Message, "1 message waits in the work stream")
	})
	if wq, err := e.js.Stream(ctx, "EV-eg"); err != nil || wq.Purge(ctx) != nil {
		t.Fatalf("purge the work stream: %v", err)
	}
	e.mustRun("elastic", "add", "EV", "eg", "m1", "m2")
	e.expect(1, "member-no-instance", "m1", "EV", "eg")

	// Messages sourced onto m2's partitions, no instance of m2: critical,
	// seen by probing the work stream (m2 has no consumer).
	e.publishTo("ev", 3, 4)
	e.eventually(2, "partition-unserved", "m2", "EV", "eg")

	// Both members live: healthy, m2's backlog consumed.
	e.join("elastic", "EV", "eg", "m1")
	e.join("elastic", "EV", "eg", "m2")
	e.eventually(0, "", "", "EV", "eg")

	// A consumer on the work stream that belongs to no member.
	if _, err := e.js.CreateConsumer(ctx, "EV-eg", jetstream.ConsumerConfig{Name: "ghost", FilterSubject: "zzz.>", AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	if f := e.expect(1, "consumer-leftover", "", "EV", "eg"); f.Consumer != "ghost" {
		t.Fatalf("leftover: %+v", f)
	}
	if err := e.js.DeleteConsumer(ctx, "EV-eg", "ghost"); err != nil {
		t.Fatal(err)
	}

	// The work stream's source transform changed behind cg's back.
	ws, err := e.js.Stream(ctx, "EV-eg")
	if err != nil {
		t.Fatal(err)
	}
	sc := ws.CachedInfo().Config
	sc.Sources[0].SubjectTransforms = []jetstream.SubjectTransformConfig{{Source: "ev.*", Destination: "{{Partition(2,1)}}.ev.{{Wildcard(1)}}"}}
	if _, err := e.js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	e.expect(2, "work-stream-drift", "", "EV", "eg")

	// The work stream deleted.
	if err := e.js.DeleteStream(ctx, "EV-eg"); err != nil {
		t.Fatal(err)
	}
	e.expect(2, "work-stream-missing", "", "EV", "eg")
}

func TestInvalidStoredConfig(t *testing.T) {
	e := newEnv(t)
	e.partitioned("ORDERS", 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	ctx := context.Background()
	kv, err := e.js.KeyValue(ctx, cg.StaticBucket)
	if err != nil {
		t.Fatal(err)
	}
	for key, value := range map[string]string{"ORDERS.bad": "{not json", "ORDERS.zero": `{"max_members":0}`} {
		if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	f := e.expect(2, "config-invalid", "", "ORDERS", "bad")
	if !strings.Contains(f.Message, "ORDERS.bad") || !strings.Contains(f.Message, "not valid JSON") {
		t.Fatalf("bad JSON: %+v", f)
	}
	e.expect(2, "config-invalid", "", "ORDERS", "zero")
	// Checking the whole stream reports them next to the good group.
	_, rep := e.check("ORDERS")
	if len(rep.Groups) != 3 || rep.Counts.Critical != 2 {
		t.Fatalf("stream: %s", dump(rep))
	}
}

func TestCouldNotCheck(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "nats://" + l.Addr().String()
	l.Close()
	env := clitest.Env("NATS_URL=" + url)

	r := clitest.Run(t, cmd.Run, env, "check")
	if r.Code != 3 || !strings.HasPrefix(r.Out, "UNKNOWN: cannot connect to NATS at "+url) || r.Err != "" {
		t.Fatalf("unreachable: exit %d\nstdout %q\nstderr %q", r.Code, r.Out, r.Err)
	}
	r = clitest.Run(t, cmd.Run, env, "check", "ORDERS", "--json")
	var rep check.Report
	if r.Code != 3 || json.Unmarshal([]byte(r.Out), &rep) != nil || rep.Status != "unknown" || rep.ExitCode != 3 || !strings.Contains(rep.Error, "connection refused") {
		t.Fatalf("unreachable --json: exit %d %q", r.Code, r.Out)
	}

	// Permission denied: this user may use JetStream but not read the
	// groups' buckets.
	opts := natstest.Options(t.TempDir())
	opts.Users = []*server.User{{Username: "u", Password: "p", Permissions: &server.Permissions{
		Publish: &server.SubjectPermission{Deny: []string{"$JS.API.STREAM.INFO.KV_" + cg.StaticBucket, "$JS.API.STREAM.INFO.KV_" + cg.ElasticBucket}}}}}
	s := natstest.Start(t, opts)
	// No deadline on the context, as from the command line: --timeout
	// bounds each request.
	r = clitest.RunCtx(context.Background(), cmd.Run, clitest.Env("NATS_URL=nats://u:p@"+strings.TrimPrefix(s.ClientURL(), "nats://")), "check", "--timeout", "300ms")
	if r.Code != 3 || !strings.HasPrefix(r.Out, "UNKNOWN: ") || !strings.Contains(r.Out, "Permissions Violation") {
		t.Fatalf("permission denied: exit %d\nstdout %q\nstderr %q", r.Code, r.Out, r.Err)
	}

	// Bad usage is UNKNOWN too, never a dial.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "a", "b", "c"}, "too many arguments (3)"},
		{[]string{"check", "a.b"}, `stream name "a.b"`},
		{[]string{"check", "ORDERS", "g>"}, `group name "g>"`},
		{[]string{"check", "--kind", "dynamic"}, `--kind "dynamic" must be static or elastic`},
		{[]string{"check", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"check", "--timeout", "5"}, `invalid argument "5" for "--timeout"`},
	} {
		r := clitest.Run(t, cmd.Run, env, tc.args...)
		if r.Code != 3 || !strings.Contains(r.Err, tc.want) || !strings.Contains(r.Err, "Run 'cg check --help' for usage.") || r.Out != "" {
			t.Errorf("cg %v: exit %d, stderr %q (want %q)", tc.args, r.Code, r.Err, tc.want)
		}
	}
	if r := clitest.Run(t, cmd.Run, env, "check", "--help"); r.Code != 0 || !strings.Contains(r.Out, "3 UNKNOWN") {
		t.Fatalf("--help: exit %d", r.Code)
	}
}

// A group created over a stream that already holds messages, none of
// whose members has run yet, is new rather than broken: check warns, with
// the messages waiting, and does not call it critical (whatever create
// accepts, check does not call critical). Once a member has run and gone,
// messages waiting for it are critical again (TestStaticGroupHealth).
func TestCheckRightAfterCreateOnAFullStream(t *testing.T) {
	e := newEnv(t)
	e.partitioned("ORDERS", 4)
	ctx := context.Background()
	if _, err := e.js.CreateStream(ctx, jetstream.StreamConfig{Name: "EV", Subjects: []string{"ev.*"}}); err != nil {
		t.Fatal(err)
	}
	for p := 0; p < 4; p++ {
		e.publishTo("orders", p, 4)
		e.publishTo("ev", p, 4)
	}
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.mustRun("elastic", "create", "EV", "eg", "4", "--filter", "ev.*:1")
	natstest.Eventually(t, 10*time.Second, "the work stream sources the 4 messages", func() bool {
		ws, err := e.js.Stream(ctx, "EV-eg")
		return err == nil && ws.CachedInfo().State.Msgs == 4
	})
	exit, rep := e.check()
	if exit != 1 {
		t.Fatalf("check right after create: exit %d, want 1 (warnings): %s", exit, dump(rep))
	}
	for _, m := range []string{"m1", "m2"} {
		f, ok := find(rep, "member-no-instance", m)
		if !ok || !strings.Contains(f.Message, "never run") || !strings.Contains(f.Hint, "cg static consume ORDERS g "+m) {
			t.Errorf("member %s: want a never-run warning with the consume hint: %+v", m, f)
		}
	}
	if f, ok := find(rep, "partition-unowned", ""); !ok || f.Severity != "warning" || !strings.Contains(f.Message, "4 messages wait") {
		t.Errorf("elastic group with no members: want a warning counting 4 waiting messages: %+v", f)
	}
}
