// Package interop_test checks that cg and the reference library
// github.com/synadia-io/orbit.go/pcgroups (v0.2.2) share groups on a real
// server: each creates what the other reads, administers and joins, and
// the messages are counted, not eyeballed.
package interop_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The reference CLI's consumer settings (pcgroups/cg/main.go consume()).
func refConsumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{MaxAckPending: 1, AckWait: 2 * time.Second, AckPolicy: jetstream.AckExplicitPolicy}
}

// Header names cg's publisher stamps (internal/traffic), so that
// `consume --verify` could read our traffic too.
const (
	keyHeader    = "Cg-Key"
	keySeqHeader = "Cg-Key-Seq"
)

const (
	streamName = "ORDERS"
	groupName  = "g"
)

// ---------------------------------------------------------------- servers

type env struct {
	t   *testing.T
	s   *server.Server
	js  jetstream.JetStream
	cli func(string) string // the CLI's environment
}

func newEnv(t *testing.T) *env {
	t.Helper()
	s, js, cli := clitest.Server(t)
	return &env{t: t, s: s, js: js, cli: cli}
}

// conn is a separate connection, as a separate process would have.
func (e *env) conn() jetstream.JetStream {
	e.t.Helper()
	_, js := natstest.JetStream(e.t, e.s)
	return js
}

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// staticStream makes ORDERS over orders.* stamped with {{partition(n,1)}}.
func (e *env) staticStream(n int) {
	e.t.Helper()
	_, err := e.js.CreateStream(ctxT(e.t, 5*time.Second), jetstream.StreamConfig{
		Name: streamName, Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}", n)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

// plainStream makes ORDERS over orders.* with no transform (elastic).
func (e *env) plainStream() {
	e.t.Helper()
	if _, err := e.js.CreateStream(ctxT(e.t, 5*time.Second), jetstream.StreamConfig{Name: streamName, Subjects: []string{"orders.*"}}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) consumerInfo(stream, name string) *jetstream.ConsumerInfo {
	e.t.Helper()
	ctx := ctxT(e.t, 5*time.Second)
	c, err := e.js.Consumer(ctx, stream, name)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("consumer %s on %s: %v", name, stream, err)
	}
	ci, err := c.Info(ctx)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("consumer %s on %s: %v", name, stream, err)
	}
	return ci
}

func (e *env) consumerNames(stream string) []string {
	e.t.Helper()
	s, err := e.js.Stream(ctxT(e.t, 5*time.Second), stream)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for n := range s.ConsumerNames(ctxT(e.t, 5*time.Second)).Name() {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

func pinOf(ci *jetstream.ConsumerInfo) string {
	if ci == nil {
		return ""
	}
	for _, pg := range ci.PriorityGroups {
		if pg.Group == "PCG" {
			return pg.PinnedClientID
		}
	}
	return ""
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// ---------------------------------------------------------------- the CLI

// The CLI runs in process (internal/clitest, the same runner cmd/'s own
// tests use), so it runs under the race detector with the tests.
type cliResult = clitest.Result

// cliRun runs `cg args...` to completion (60 s at most).
func (e *env) cliRun(args ...string) cliResult {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.cli, args...)
}

// ---------------------------------------------------------------- traffic

// publisher sends keyed messages on orders.<key>, stamping each with its
// key and its per-key sequence (from 1).
type publisher struct {
	t    *testing.T
	js   jetstream.JetStream
	keys []string

	mu    sync.Mutex
	last  map[string]uint64 // last key-seq published per key
	total int
	i     int
	seqs  map[msgKey]uint64 // origin stream sequence of each message
}

type msgKey struct {
	key string
	seq uint64
}

func newPublisher(t *testing.T, js jetstream.JetStream, keys []string) *publisher {
	return &publisher{t: t, js: js, keys: keys, last: map[string]uint64{}, seqs: map[msgKey]uint64{}}
}

func (p *publisher) one(ctx context.Context) error {
	p.mu.Lock()
	key := p.keys[p.i%len(p.keys)]
	p.i++
	p.last[key]++
	ks := p.last[key]
	p.total++
	p.mu.Unlock()
	m := &nats.Msg{Subject: "orders." + key, Header: nats.Header{keyHeader: {key}, keySeqHeader: {strconv.FormatUint(ks, 10)}}}
	ack, err := p.js.PublishMsg(ctx, m)
	if err != nil {
		return fmt.Errorf("publish %s#%d: %w", key, ks, err)
	}
	p.mu.Lock()
	p.seqs[msgKey{key, ks}] = ack.Sequence
	p.mu.Unlock()
	return nil
}

// publish sends n messages round-robin over the keys.
func (p *publisher) publish(n int) {
	p.t.Helper()
	ctx := ctxT(p.t, 30*time.Second)
	for range n {
		if err := p.one(ctx); err != nil {
			p.t.Fatal(err)
		}
	}
}

// paced publishes one message every `every` in the background until the
// returned stop is called (stop waits and reports publish errors).
func (p *publisher) paced(every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				done <- nil
				return
			case <-tick.C:
				// Not derived from ctx: a publish once begun completes, so
				// every counted message is really in the stream.
				pctx, pcancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := p.one(pctx)
				pcancel()
				if err != nil {
					done <- err
					return
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				p.t.Errorf("paced publisher: %v", err)
			}
		})
	}
}

func (p *publisher) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total
}

// snapshot is the last key-seq per key so far.
func (p *publisher) snapshot() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]uint64, len(p.last))
	for k, v := range p.last {
		out[k] = v
	}
	return out
}

func (p *publisher) streamSeq(key string, ks uint64) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seqs[msgKey{key, ks}]
}

// keys returns n keys such that every one of the n partitions (hashed as
// orders.* wildcard 1) has at least one, and only keys whose partition
// keep(p) accepts (nil: all).
func keysCovering(partitions, n int, keep func(p int) bool) []string {
	var out []string
	covered := map[int]bool{}
	for i := 0; len(out) < n || (keep == nil && len(covered) < partitions); i++ {
		k := fmt.Sprintf("k%03d", i)
		p := partition.PartitionOfKey(k, partitions)
		if keep != nil && !keep(p) {
			continue
		}
		covered[p] = true
		out = append(out, k)
		if i > 100000 {
			panic("no keys")
		}
	}
	return out
}

// ---------------------------------------------------------------- handlers

type delivery struct {
	member    string
	instance  string
	key       string
	keySeq    uint64
	seq       uint64 // stream sequence of the delivered message
	delivered uint64 // delivery count
	subject   string // as the handler saw it (partition token stripped)
	partition int    // from cg's Msg; -1 from the reference
	pin       string
}

// recorder logs every handled message, in handling order: a handler
// records before it acks, so with max ack pending 1 the next message of
// a key cannot be recorded before the previous one.
type recorder struct {
	// diagnose, when set, is logged when a wait times out.
	diagnose func() string

	mu      sync.Mutex
	ds      []delivery
	uniq    map[msgKey]int
	ackErrs atomic.Int64
	bad     []string
}

func newRecorder() *recorder { return &recorder{uniq: map[msgKey]int{}} }

func (r *recorder) record(d delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d.key == "" || d.keySeq == 0 {
		r.bad = append(r.bad, fmt.Sprintf("%s/%s: message %q seq %d has no key headers", d.member, d.instance, d.subject, d.seq))
	}
	r.ds = append(r.ds, d)
	r.uniq[msgKey{d.key, d.keySeq}]++
}

func parseKey(h nats.Header) (string, uint64) {
	ks, _ := strconv.ParseUint(h.Get(keySeqHeader), 10, 64)
	return h.Get(keyHeader), ks
}

// ref is a reference handler (pcgroups' func(jetstream.Msg)) that
// records and double-acks, as the reference CLI's handler does.
func (r *recorder) ref(member, instance string) func(jetstream.Msg) {
	return func(msg jetstream.Msg) {
		d := delivery{member: member, instance: instance, subject: msg.Subject(), partition: -1, pin: msg.Headers().Get("Nats-Pin-Id")}
		d.key, d.keySeq = parseKey(msg.Headers())
		if md, err := msg.Metadata(); err == nil {
			d.seq, d.delivered = md.Sequence.Stream, md.NumDelivered
		}
		r.record(d)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := msg.DoubleAck(ctx); err != nil {
			r.ackErrs.Add(1)
		}
	}
}

// cg is a cg handler that records and double-acks.
func (r *recorder) cg(member, instance string) cg.Handler {
	return func(_ context.Context, msg *cg.Msg) {
		d := delivery{member: member, instance: instance, subject: msg.Subject(), partition: msg.Partition(), pin: msg.PinID()}
		d.key, d.keySeq = parseKey(msg.Headers())
		if md, err := msg.Metadata(); err == nil {
			d.seq, d.delivered = md.Sequence.Stream, md.NumDelivered
		}
		r.record(d)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := msg.DoubleAck(ctx); err != nil {
			r.ackErrs.Add(1)
		}
	}
}

func (r *recorder) unique() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.uniq)
}

func (r *recorder) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ds)
}

// handledBy counts deliveries per member/instance.
func (r *recorder) handledBy() map[string]int {
	out := map[string]int{}
	for _, d := range r.deliveries() {
		out[d.member+"/"+d.instance]++
	}
	return out
}

func (r *recorder) countWhere(f func(delivery) bool) int {
	n := 0
	for _, d := range r.deliveries() {
		if f(d) {
			n++
		}
	}
	return n
}

// tally is what a run added up to.
type tally struct {
	Published  int
	Handled    int // deliveries seen by handlers
	Unique     int // distinct messages handled
	Missing    int // published, never handled
	Duplicates int // Handled - Unique
	OutOfOrder int // a message handled for the first time after a later message of its key
	Replays    int // a duplicate handled after a later message of its key had been
	AckErrors  int64
	examples   []string
}

func (tl tally) String() string {
	return fmt.Sprintf("published %d, handled %d (unique %d), missing %d, duplicates %d, out-of-order %d, replays %d, ack errors %d",
		tl.Published, tl.Handled, tl.Unique, tl.Missing, tl.Duplicates, tl.OutOfOrder, tl.Replays, tl.AckErrors)
}

// tally checks per-key order in handling order and counts.
func (r *recorder) tally(p *publisher) tally {
	ds := r.deliveries()
	published := p.snapshot()
	tl := tally{Published: p.count(), Handled: len(ds), AckErrors: r.ackErrs.Load()}
	seen := map[msgKey]bool{}
	maxSeen := map[string]uint64{}
	for _, d := range ds {
		k := msgKey{d.key, d.keySeq}
		switch {
		case seen[k]:
			tl.Duplicates++
			if d.keySeq < maxSeen[d.key] {
				tl.Replays++
			}
		case d.keySeq < maxSeen[d.key]:
			tl.OutOfOrder++
			if len(tl.examples) < 5 {
				tl.examples = append(tl.examples, fmt.Sprintf("%s#%d handled by %s/%s after #%d", d.key, d.keySeq, d.member, d.instance, maxSeen[d.key]))
			}
		}
		seen[k] = true
		maxSeen[d.key] = max(maxSeen[d.key], d.keySeq)
	}
	tl.Unique = len(seen)
	for key, last := range published {
		for ks := uint64(1); ks <= last; ks++ {
			if !seen[msgKey{key, ks}] {
				tl.Missing++
				if len(tl.examples) < 10 {
					tl.examples = append(tl.examples, fmt.Sprintf("%s#%d never handled", key, ks))
				}
			}
		}
	}
	return tl
}

// check fails the test on a missing message or broken per-key order, and
// on more than maxDup duplicates; it logs the counts either way.
func (r *recorder) check(t *testing.T, p *publisher, maxDup int) tally {
	t.Helper()
	tl := r.tally(p)
	t.Logf("COUNTS %s: %s; per instance %v", t.Name(), tl, r.handledBy())
	r.mu.Lock()
	bad := slices.Clone(r.bad)
	r.mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
	if tl.Missing > 0 || tl.OutOfOrder > 0 || tl.Duplicates > maxDup {
		t.Errorf("%s (allowed duplicates %d); examples: %s", tl, maxDup, strings.Join(tl.examples, "; "))
	}
	return tl
}

// waitHandled waits until every published message was handled at least once.
func (r *recorder) waitHandled(t *testing.T, p *publisher, timeout time.Duration) {
	t.Helper()
	if !clitest.Poll(nil, timeout, func() bool { return r.unique() >= p.count() }) {
		tl := r.tally(p)
		if r.diagnose != nil {
			t.Log(r.diagnose())
		}
		t.Fatalf("after %v: %s; per instance %v; examples: %s", timeout, tl, r.handledBy(), strings.Join(tl.examples, "; "))
	}
}

// ---------------------------------------------------------------- instances

// instance is one running member instance of either implementation.
type instance struct {
	name string
	stop func()
	// done reports the instance's end error (nil for a clean end).
	done func(timeout time.Duration) (error, bool)
}

func refStatic(t *testing.T, js jetstream.JetStream, member, name string, r *recorder) *instance {
	t.Helper()
	cc, err := pcgroups.StaticConsume(ctxT(t, 10*time.Second), js, streamName, groupName, member, r.ref(member, name), refConsumerConfig())
	if err != nil {
		t.Fatalf("reference StaticConsume %s (%s): %v", member, name, err)
	}
	t.Cleanup(cc.Stop)
	return refInstance(name, cc)
}

func refElastic(t *testing.T, js jetstream.JetStream, member, name string, r *recorder) *instance {
	t.Helper()
	cc, err := pcgroups.ElasticConsume(ctxT(t, 10*time.Second), js, streamName, groupName, member, r.ref(member, name), refConsumerConfig())
	if err != nil {
		t.Fatalf("reference ElasticConsume %s (%s): %v", member, name, err)
	}
	t.Cleanup(cc.Stop)
	return refInstance(name, cc)
}

func refInstance(name string, cc pcgroups.ConsumerGroupConsumeContext) *instance {
	var (
		mu   sync.Mutex
		got  bool
		gerr error
	)
	return &instance{name: name, stop: cc.Stop, done: func(timeout time.Duration) (error, bool) {
		mu.Lock()
		defer mu.Unlock()
		if got {
			return gerr, true
		}
		select {
		case gerr = <-cc.Done():
			got = true
			return gerr, true
		case <-time.After(timeout):
			return nil, false
		}
	}}
}

func cgInstance(name string, m *cg.Member) *instance {
	return &instance{name: name, stop: m.Stop, done: func(timeout time.Duration) (error, bool) {
		select {
		case <-m.Done():
			return m.Err(), true
		case <-time.After(timeout):
			return nil, false
		}
	}}
}

func cgStatic(t *testing.T, js jetstream.JetStream, member, name string, r *recorder) (*instance, *cg.Member) {
	t.Helper()
	// ReferenceCompatible: these instances share members with reference
	// ones, which refuse a consumer that has an inactive threshold or cg's
	// ownership marks (10148).
	m, err := cg.New(js).JoinStatic(ctxT(t, 10*time.Second), streamName, groupName, member, r.cg(member, name), cg.JoinOptions{ReferenceCompatible: true})
	if err != nil {
		t.Fatalf("cg JoinStatic %s (%s): %v", member, name, err)
	}
	t.Cleanup(m.Stop)
	return cgInstance(name, m), m
}

func cgElastic(t *testing.T, js jetstream.JetStream, member, name string, r *recorder) (*instance, *cg.Member) {
	t.Helper()
	// ReferenceCompatible: a reference instance of the same member deletes
	// and recreates a consumer that carries cg's marks.
	m, err := cg.New(js).JoinElastic(ctxT(t, 10*time.Second), streamName, groupName, member, r.cg(member, name), cg.JoinOptions{ReferenceCompatible: true})
	if err != nil {
		t.Fatalf("cg JoinElastic %s (%s): %v", member, name, err)
	}
	t.Cleanup(m.Stop)
	return cgInstance(name, m), m
}

// eventually is natstest.Eventually with the test's name in the message.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	natstest.Eventually(t, timeout, what, cond)
}

func toRef(mms []partition.MemberMapping) []pcgroups.MemberMapping {
	var out []pcgroups.MemberMapping
	for _, mm := range mms {
		out = append(out, pcgroups.MemberMapping{Member: mm.Member, Partitions: slices.Clone(mm.Partitions)})
	}
	return out
}

func fromRef(mms []pcgroups.MemberMapping) []partition.MemberMapping {
	var out []partition.MemberMapping
	for _, mm := range mms {
		out = append(out, partition.MemberMapping{Member: mm.Member, Partitions: slices.Clone(mm.Partitions)})
	}
	return out
}
