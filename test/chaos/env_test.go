package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
)

const (
	streamName = "ORDERS"
	groupName  = "g"
	// priorityGroup is the priority group cg pins in.
	priorityGroup = "PCG"
)

// env is one scenario: its server(s), its member processes, its traffic,
// and what it did to them.
type env struct {
	t             *testing.T
	name          string
	ctx           context.Context // the scenario's deadline
	limit         time.Duration
	began         time.Time
	url           string
	nc            *nats.Conn
	js            jetstream.JetStream
	kind          string // static or elastic
	n             int    // partitions
	sleep         string // --sleep of every member
	ttl           time.Duration
	grace         time.Duration
	cfgDir        string
	maxAckPending int // max-ack-pending of the members
	extra         []string
	// partitionGaps: measure handover gaps per partition (elastic).
	partitionGaps bool
	// layout is the group's layout: "" (cg's default, member) or
	// "partition" (one pinned consumer per partition, so a member has one
	// pin per partition it owns). CG_CHAOS_LAYOUT sets it for every
	// scenario; a scenario of one layout sets it after newEnv.
	layout string
	// members are the group's members as set up.
	members []string

	mu    sync.Mutex
	procs []*proc
	next  map[string]int // instance numbers per member
	disr  []*disruption
	kills []kill
	pub   *publisher
	// resumes are the takeovers measured, for the report.
	resumes []resumeFig
}

type envOpts struct {
	kind  string
	sleep string
	// ttl is the pinned TTL the members are started with (and, without a
	// --pinned-ttl flag, their ack wait). Default 2s, cg's default.
	ttl time.Duration
	// limit bounds the whole scenario.
	limit time.Duration
	// noLiveness turns the standbys' liveness check off (when cg has one),
	// leaving failover to the pin release and the pinned TTL.
	noLiveness bool
}

func newEnv(t *testing.T, name, url string, o envOpts) *env {
	t.Helper()
	if o.ttl == 0 {
		o.ttl = 2 * time.Second
	}
	if o.limit == 0 {
		o.limit = 90 * time.Second
	}
	if o.sleep == "" {
		o.sleep = "2ms"
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.limit)
	t.Cleanup(cancel)
	e := &env{t: t, name: name, ctx: ctx, limit: o.limit, began: time.Now(), url: url, kind: o.kind, sleep: o.sleep, ttl: o.ttl,
		grace: 500 * time.Millisecond, cfgDir: t.TempDir(), maxAckPending: 1, next: map[string]int{}, layout: chaosLayout}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond), nats.Timeout(2*time.Second))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	e.nc = nc
	if e.js, err = jetstream.New(nc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			e.saveOutputs()
		}
	})
	if concurrency > 1 {
		// A killed concurrent member leaves up to its max ack pending
		// unacked: that many may come again.
		e.extra = append(e.extra, "--concurrency", strconv.Itoa(concurrency))
		e.maxAckPending = 4 * concurrency
	}
	if o.noLiveness && hasLivenessCheck {
		e.extra = append(e.extra, "--liveness-check", "0s")
	}
	t.Cleanup(e.killAll)
	return e
}

// memberArgs are the flags every instance runs with.
func (e *env) memberArgs() []string {
	args := append([]string{"--json", "--verify", "--sleep", e.sleep}, e.extra...)
	if hasPinnedTTL {
		return append(args, "--pinned-ttl", e.ttl.String())
	}
	return append(args, "--ack-wait", e.ttl.String())
}

// start runs one more instance of member.
func (e *env) start(member string) *proc {
	e.t.Helper()
	e.mu.Lock()
	e.next[member]++
	name := fmt.Sprintf("%s#%d", member, e.next[member])
	e.mu.Unlock()
	args := append([]string{e.kind, "consume", streamName, groupName, member}, e.memberArgs()...)
	p, err := startProc(name, member, e.url, e.cfgDir, args)
	if err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

// startJoined starts an instance and waits until it has joined.
func (e *env) startJoined(member string) *proc {
	e.t.Helper()
	p := e.start(member)
	e.waitFor(p.name+" joined", 20*time.Second, func() bool {
		for _, l := range p.snapshot() {
			if l.isEvent("joined") {
				return true
			}
		}
		return false
	})
	return p
}

func (e *env) allProcs() []*proc {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.procs)
}

func (e *env) killAll() {
	for _, p := range e.allProcs() {
		if !p.exited() {
			_ = p.cmd.Process.Kill()
			p.wait(10 * time.Second)
		}
	}
}

// cli runs a cg command against the scenario's server.
func (e *env) cli(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cgBin, args...)
	cmd.Env = hermeticEnv(e.url, e.cfgDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *env) mustCLI(args ...string) string {
	e.t.Helper()
	out, err := e.cli(args...)
	if err != nil {
		e.t.Fatalf("cg %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// createStream makes ORDERS on orders.*, partition-stamped for static groups.
func (e *env) createStream(replicas int) {
	e.t.Helper()
	sc := jetstream.StreamConfig{Name: streamName, Subjects: []string{"orders.*"}, Replicas: replicas}
	if e.kind == "static" {
		sc.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "orders.*",
			Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}", e.n)}
	}
	// A fresh cluster has a meta leader before every peer is known to it:
	// placing three replicas is refused ("no suitable peers") for a moment.
	e.waitFor("the stream created", 30*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
		defer cancel()
		_, err := e.js.CreateStream(ctx, sc)
		if err != nil {
			e.t.Logf("create stream: %v", err)
		}
		return err == nil
	})
}

// setupStatic makes the stream and a balanced static group of n partitions.
func (e *env) setupStatic(n, replicas int, members ...string) {
	e.t.Helper()
	e.n = n
	e.members = members
	e.createStream(replicas)
	args := append([]string{"static", "create", "balanced", streamName, groupName, fmt.Sprint(n)}, members...)
	e.mustCLI(append(args, e.layoutArgs()...)...)
}

// layoutName is the group's layout by name.
func (e *env) layoutName() string {
	if e.layout == "" {
		return "member"
	}
	return e.layout
}

// layoutArgs are the create flags for the scenario's layout.
func (e *env) layoutArgs() []string {
	if e.layout == "" {
		return nil
	}
	return []string{"--layout", e.layout}
}

// partitionConsumer is where partition k's consumer of a partition-layout
// group lives.
func (e *env) partitionConsumer(k int) (stream, consumer string) {
	name := fmt.Sprintf("%s-p%d", groupName, k)
	if e.kind == "elastic" {
		return streamName + "-" + groupName, name
	}
	return streamName, name
}

// partitionInfo is partition k's consumer of a partition-layout group.
func (e *env) partitionInfo(k int) (*jetstream.ConsumerInfo, error) {
	s, c := e.partitionConsumer(k)
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	cons, err := e.js.Consumer(ctx, s, c)
	if err != nil {
		return nil, err
	}
	return cons.CachedInfo(), nil
}

// partitionPin is the pin id the server holds for partition k's consumer
// ("" for none).
func (e *env) partitionPin(k int) string {
	ci, err := e.partitionInfo(k)
	if err != nil {
		return ""
	}
	for _, pg := range ci.PriorityGroups {
		if pg.Group == priorityGroup {
			return pg.PinnedClientID
		}
	}
	return ""
}

// setupElastic makes the stream and an elastic group of n partitions
// keyed by the subject's token, with members added.
func (e *env) setupElastic(n int, members ...string) {
	e.t.Helper()
	e.n = n
	e.members = members
	e.createStream(1)
	e.mustCLI(append([]string{"elastic", "create", streamName, groupName, fmt.Sprint(n), "--filter", "orders.*:1"}, e.layoutArgs()...)...)
	e.mustCLI(append([]string{"elastic", "add", streamName, groupName}, members...)...)
}

// publish starts keyed traffic over per keys per partition, one message
// every `every`, at most as many as fit in the scenario's time limit (so
// the traffic never runs dry before the scenario ends, however slow the
// machine, and never goes on after it).
func (e *env) publish(per int, every time.Duration) *publisher {
	e.pub = newPublisher(e.ctx, e.js, keysFor(e.n, per), every, int(e.limit/every))
	return e.pub
}

// memberConsumer is where member's consumer lives.
func (e *env) memberConsumer(member string) (stream, consumer string) {
	if e.kind == "elastic" {
		return streamName + "-" + groupName, member
	}
	return streamName, groupName + "-" + member
}

func (e *env) consumerInfo(member string) (*jetstream.ConsumerInfo, error) {
	s, c := e.memberConsumer(member)
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	cons, err := e.js.Consumer(ctx, s, c)
	if err != nil {
		return nil, err
	}
	return cons.CachedInfo(), nil
}

// serverPin is the pin id the server holds for member ("" for none).
func (e *env) serverPin(member string) string {
	ci, err := e.consumerInfo(member)
	if err != nil {
		return ""
	}
	for _, pg := range ci.PriorityGroups {
		if pg.Group == priorityGroup {
			return pg.PinnedClientID
		}
	}
	return ""
}

// msgs are the "msg" lines of member's instances received after since.
func (e *env) msgs(member string, since time.Time) []*line {
	var out []*line
	for _, p := range e.allProcs() {
		if member != "" && p.member != member {
			continue
		}
		for _, l := range p.snapshot() {
			if l.isMsg() && l.at.After(since) {
				out = append(out, l)
			}
		}
	}
	return out
}

// disrupt records a disruption starting now.
func (e *env) disrupt(what string, inflight int, members ...string) *disruption {
	d := &disruption{what: what, members: members, start: time.Now(), inflight: inflight}
	e.mu.Lock()
	e.disr = append(e.disr, d)
	e.mu.Unlock()
	return d
}

// recovered ends a disruption's window now.
func (e *env) recovered(d *disruption) { d.end = time.Now() }

// waitHandled waits until each member has handled k messages after since.
func (e *env) waitHandled(what string, since time.Time, k int, timeout time.Duration, members ...string) {
	e.t.Helper()
	e.waitFor(what, timeout, func() bool {
		for _, m := range members {
			if len(e.msgs(m, since)) < k {
				return false
			}
		}
		return true
	})
}

// steady lets traffic flow undisturbed: each member handles k messages
// after since, and at least the grace of the last disruption passes, so a
// pin change in this stretch is a flap.
func (e *env) steady(since time.Time, k int, members ...string) {
	e.t.Helper()
	until := since.Add(e.grace + 100*time.Millisecond)
	e.waitFor("steady traffic", 30*time.Second, func() bool {
		if time.Now().Before(until) {
			return false
		}
		for _, m := range members {
			if len(e.msgs(m, since)) < k {
				return false
			}
		}
		return true
	})
}

// waitFor polls cond until it holds, failing the scenario with the state
// of every instance when timeout (or the scenario's deadline) passes.
func (e *env) waitFor(what string, timeout time.Duration, cond func() bool) {
	e.t.Helper()
	if !clitest.Poll(e.ctx, timeout, cond) {
		e.t.Fatalf("%s: timed out after %v waiting for %s\n%s", e.name, timeout, what, e.dump())
	}
}

// poll is waitFor that reports a timeout instead of failing.
func (e *env) poll(timeout time.Duration, cond func() bool) bool {
	return clitest.Poll(e.ctx, timeout, cond)
}

// dump describes every instance and member consumer, for a failure.
func (e *env) dump() string {
	var b strings.Builder
	if e.pub != nil {
		e.pub.mu.Lock()
		fmt.Fprintf(&b, "publisher: %d published, %d retries, last error %v\n", e.pub.count, e.pub.retries, e.pub.lastErr)
		e.pub.mu.Unlock()
	}
	members := map[string]bool{}
	for _, p := range e.allProcs() {
		members[p.member] = true
		state := "running"
		if p.exited() {
			_, err := p.wait(0)
			state = fmt.Sprintf("exited (%v)", err)
		}
		msgs := e.procMsgs(p)
		var ackFailed int
		var maxDelivered uint64
		lastAckErr := ""
		for _, l := range msgs {
			if !l.Acked {
				ackFailed++
				lastAckErr = l.AckError
			}
			maxDelivered = max(maxDelivered, l.Delivered)
		}
		fmt.Fprintf(&b, "--- %s: %s, %d msgs (%d acks failed, last %q; most deliveries of one message %d), pins %v\n",
			p.name, state, len(msgs), ackFailed, lastAckErr, maxDelivered, shortPins(p.pins()))
		for _, l := range p.tail(8) {
			fmt.Fprintf(&b, "    %s\n", l)
		}
		if s := strings.TrimSpace(p.stderr.String()); s != "" {
			lines := strings.Split(s, "\n")
			fmt.Fprintf(&b, "    stderr: %s\n", strings.Join(lines[max(0, len(lines)-5):], "\n            "))
		}
	}
	for k := range e.n {
		if e.layout != "partition" {
			break
		}
		ci, err := e.partitionInfo(k)
		if err != nil {
			fmt.Fprintf(&b, "consumer of partition %d: %v\n", k, err)
			continue
		}
		fmt.Fprintf(&b, "consumer of partition %d: pending %d, ack pending %d, waiting %d, delivered %d, ack floor %d, priority %+v\n",
			k, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.Delivered.Stream, ci.AckFloor.Stream, ci.PriorityGroups)
	}
	for m := range members {
		if e.layout == "partition" {
			break
		}
		ci, err := e.consumerInfo(m)
		if err != nil {
			fmt.Fprintf(&b, "consumer of %s: %v\n", m, err)
			continue
		}
		fmt.Fprintf(&b, "consumer of %s: pending %d, ack pending %d, waiting %d, delivered %d, ack floor %d, priority %+v\n",
			m, ci.NumPending, ci.NumAckPending, ci.NumWaiting, ci.Delivered.Stream, ci.AckFloor.Stream, ci.PriorityGroups)
	}
	return b.String()
}

func (e *env) procMsgs(p *proc) []*line {
	var out []*line
	for _, l := range p.snapshot() {
		if l.isMsg() {
			out = append(out, l)
		}
	}
	return out
}

func shortPins(pins []string) []string {
	out := make([]string, len(pins))
	for i, p := range pins {
		out[i] = "…" + short(p)
	}
	return out
}

// kill kills an instance with SIGKILL and records it: it may have acked a
// message it did not live to print.
func (e *env) kill(p *proc) {
	e.t.Helper()
	at := time.Now()
	if err := p.signal(syscall.SIGKILL); err != nil {
		e.t.Fatal(err)
	}
	if ok, _ := p.wait(10 * time.Second); !ok {
		e.t.Fatalf("%s did not die", p.name)
	}
	e.mu.Lock()
	e.kills = append(e.kills, kill{proc: p.name, member: p.member, at: at})
	e.mu.Unlock()
}

// drained waits until the members' consumers have nothing left and every
// published message has been handled (less what killed instances may have
// acked unprinted).
func (e *env) drained(members []string, timeout time.Duration) {
	e.t.Helper()
	e.pub.mu.Lock()
	want := e.pub.count
	e.pub.mu.Unlock()
	e.mu.Lock()
	slack := len(e.kills)
	e.mu.Unlock()
	if e.layout == "partition" {
		// A killed instance may have acked one message unprinted on each
		// partition it held.
		slack *= e.n
	}
	e.waitFor("every published message handled", timeout, func() bool {
		seen := map[keySeq]bool{}
		for _, l := range e.msgs("", time.Time{}) {
			seen[keySeq{l.Key, l.KeySeq}] = true
		}
		if len(seen) < want-slack {
			return false
		}
		if e.kind == "elastic" {
			ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
			defer cancel()
			s, err := e.js.Stream(ctx, streamName+"-"+groupName)
			if err != nil {
				return false
			}
			// An empty work stream says nothing of a message still being
			// sourced into it (with slack, the count alone cannot tell):
			// its source must have caught up too.
			si := s.CachedInfo()
			for _, src := range si.Sources {
				if src.Lag != 0 {
					return false
				}
			}
			return len(si.Sources) > 0 && si.State.Msgs == 0 && (len(seen) >= want || slack > 0)
		}
		if e.layout == "partition" {
			for k := range e.n {
				ci, err := e.partitionInfo(k)
				if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
					return false
				}
			}
			return true
		}
		for _, m := range members {
			ci, err := e.consumerInfo(m)
			if err != nil || ci.NumPending != 0 || ci.NumAckPending != 0 {
				return false
			}
		}
		return true
	})
}

// stopAll stops every running instance gracefully (continuing stopped
// ones first) and waits for their output to end.
func (e *env) stopAll() {
	e.t.Helper()
	for _, p := range e.allProcs() {
		if !p.exited() {
			_ = p.signal(syscall.SIGCONT)
			_ = p.signal(syscall.SIGTERM)
		}
	}
	for _, p := range e.allProcs() {
		if ok, _ := p.wait(20 * time.Second); !ok {
			e.t.Errorf("%s did not stop on SIGTERM within 20s; killing it\n%s", p.name, strings.Join(p.tail(10), "\n"))
			_ = p.cmd.Process.Kill()
			p.wait(10 * time.Second)
		}
	}
}

// report is one scenario's figures.
type report struct {
	scenario string
	r        result
	extra    string
	took     time.Duration
	layout   string // member or partition
	kind     string // static or elastic
	resumes  []resumeFig
}

var (
	reportsMu sync.Mutex
	reports   []report
)

// finish ends the scenario: it stops the traffic, waits until everything
// published was handled, stops the members, counts, logs the summary line
// and checks the counts. extra is appended to the summary.
func (e *env) finish(members []string, extra func() string) result {
	e.t.Helper()
	last, sseq, retries := e.pub.finish()
	e.drained(members, 45*time.Second)
	e.stopAll()

	in := input{published: last, sseq: sseq, grace: e.grace, eps: 50 * time.Millisecond, partitionGaps: e.partitionGaps,
		partitionPins: e.layout == "partition", publishedBetween: e.pub.publishedBetween}
	e.mu.Lock()
	in.disr = slices.Clone(e.disr)
	in.kills = slices.Clone(e.kills)
	e.mu.Unlock()
	for _, p := range e.allProcs() {
		for _, l := range p.snapshot() {
			switch {
			case l.isMsg():
				in.msgs = append(in.msgs, obs{proc: p.name, member: p.member, partition: l.Partition, key: l.Key, seq: l.KeySeq, sseq: l.StreamSeq,
					delivered: l.Delivered, pin: l.PinID, acked: l.Acked, at: l.at, start: l.started(), idx: l.idx})
			case l.isEvent("pinned"):
				po := pinObs{proc: p.name, member: p.member, pin: l.PinID, at: l.at, partition: -1}
				if len(l.Partitions) == 1 {
					po.partition = l.Partitions[0]
				}
				in.pins = append(in.pins, po)
			}
		}
	}
	r := analyze(in)
	for _, g := range r.longGaps {
		e.t.Logf("gap %s", g)
	}
	if w := r.worstGap; w[1].Sub(w[0]) > 2*time.Second {
		// What the members said while nothing was handled.
		var evs []string
		for _, p := range e.allProcs() {
			for _, l := range p.snapshot() {
				if l.Type == "event" && l.at.After(w[0]) && l.at.Before(w[1].Add(50*time.Millisecond)) {
					evs = append(evs, fmt.Sprintf("%s %s %s %s", l.at.Format("15:04:05.000"), p.name, l.Event, l.Reason))
				}
			}
		}
		slices.Sort(evs)
		e.t.Logf("events during the longest gap (%v):\n  %s", w[1].Sub(w[0]).Round(time.Millisecond), strings.Join(firstN(evs, 40), "\n  "))
	}
	med, mx := medianMax(r.gaps)
	events := map[string]int{}
	warnings := map[string]int{}
	for _, p := range e.allProcs() {
		for _, l := range p.snapshot() {
			if l.Type == "event" {
				events[l.Event]++
			}
			if l.isEvent("warning") || l.isEvent("fenced") {
				warnings[l.Event+": "+l.Reason]++
			}
		}
	}
	for w, n := range warnings {
		e.t.Logf("%dx %s", n, w)
	}
	ex := fmt.Sprintf("fenced=%d warnings=%d", events["fenced"], events["warning"])
	if rs := e.resumeSummary(); rs != "" {
		ex = rs + " " + ex
	}
	if extra != nil {
		ex = extra() + " " + ex
	}
	took := time.Since(e.began)
	e.t.Logf("SUMMARY %-16s msgs=%d handled=%d lost=%d (vouched %d) order_violations=%d (jitter %d) dups=%d/%d republished=%d gap_med=%v gap_max=%v (n=%d) flaps=%d pin_changes=%d retries=%d %s took=%v",
		e.name, r.published, r.handled, len(r.lost), len(r.vouched), len(r.violations), r.jitter, r.dups, r.bound, r.republished,
		med.Round(time.Millisecond), mx.Round(time.Millisecond), len(r.gaps), len(r.flaps), r.pinChanges, retries, ex, took.Round(100*time.Millisecond))
	reportsMu.Lock()
	e.mu.Lock()
	resumes := slices.Clone(e.resumes)
	e.mu.Unlock()
	reports = append(reports, report{scenario: e.name, r: r, extra: ex, took: took, layout: e.layoutName(), kind: e.kind, resumes: resumes})
	reportsMu.Unlock()

	if len(r.lost) > 0 {
		e.t.Errorf("%d messages never handled: %v", len(r.lost), firstN(r.lost, 20))
	}
	if len(r.violations) > 0 {
		e.t.Errorf("per-key order broken %d times: %v", len(r.violations), firstN(r.violations, 10))
	}
	if r.dups > r.bound {
		e.t.Errorf("%d duplicates, more than the %d messages in flight at the disruptions", r.dups, r.bound)
	}
	if len(r.flaps) > 0 {
		e.t.Errorf("%d pin flaps under steady load: %v", len(r.flaps), firstN(r.flaps, 10))
	}
	if r.unkeyed > 0 {
		e.t.Errorf("%d messages handled without key headers", r.unkeyed)
	}
	for _, p := range e.allProcs() {
		for _, l := range p.snapshot() {
			if l.isEvent("stopped") && l.Error != "" {
				e.t.Errorf("%s stopped with an error: %s", p.name, l.Error)
			}
		}
	}
	return r
}

func firstN[T any](s []T, n int) []T { return s[:min(n, len(s))] }

// saveOutputs writes every instance's whole output (stdout, then stderr)
// to a directory that outlives the test, for a failure's post-mortem.
func (e *env) saveOutputs() {
	dir, err := os.MkdirTemp("", "cg-chaos-"+e.name+"-")
	if err != nil {
		return
	}
	for _, p := range e.allProcs() {
		var b strings.Builder
		for _, l := range p.snapshot() {
			fmt.Fprintf(&b, "%s %s\n", l.at.Format("15:04:05.000000"), l.raw)
		}
		fmt.Fprintf(&b, "--- stderr\n%s", p.stderr.String())
		_ = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(p.name, "#", "-")+".log"), []byte(b.String()), 0o644)
	}
	e.t.Logf("every instance's output is in %s", dir)
}
