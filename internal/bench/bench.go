// Package bench measures consumer groups on a real server: a scenario
// (members × partitions × handler time × max ack pending) is run against
// a System (cg static groups, a plain JetStream pull consumer, or, in the
// go test benchmarks only, the reference library) and yields messages per
// second, end-to-end latency and per-key order violations. `cg bench` and
// the benchmarks in this package's tests share it, so both measure the
// same way. It never imports the reference library: that stays in the
// test files, out of the cg binary.
package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// Names the runs use on the server.
const (
	Stream = "BENCH"
	Group  = "bench"
)

// Header names stamped on every message: its key, its sequence number
// within the key (from 1) and the publish time in Unix nanoseconds.
const (
	KeyHeader  = "Bench-Key"
	SeqHeader  = "Bench-Seq"
	TimeHeader = "Bench-Time"
)

// The systems Run knows; the reference library's is added by the tests.
const (
	SystemCG    = "cg"
	SystemPlain = "plain"
	// SystemElastic is a cg elastic group over the same stream: its work
	// stream sources the stream through the partitioning transforms, so
	// its rate is publish (or preload) to handled, sourcing included
	// (unless Scenario.Filled).
	SystemElastic = "elastic"
)

// Scenario is one cell of the matrix. A new dimension (such as
// concurrency) is one more field here and in Name.
type Scenario struct {
	System     string        `json:"system"`
	Members    int           `json:"members"`
	Partitions int           `json:"partitions"`
	Handler    time.Duration `json:"handler_ns"`
	// MaxAckPending of the member (or plain) consumers; 0 is 1. A
	// concurrent cg member (Concurrency above it) gets cg's own default.
	MaxAckPending int `json:"max_ack_pending"`
	// Concurrency is cg's JoinOptions.Concurrency (0 or 1: serial, the
	// only way the reference and plain systems run).
	Concurrency int `json:"concurrency,omitempty"`
	// Filters is the plain consumer's filter count: 1 (one filter over
	// every partition) or one per partition. Unused by group systems.
	Filters int `json:"filters,omitempty"`
	// PartitionFilter has a single-partition plain consumer filter on
	// "0.>", as the member that owns the partition does, instead of ">":
	// the server serves a wildcard filter at a cost that ">" does not have.
	PartitionFilter bool `json:"partition_filter,omitempty"`
	Messages        int  `json:"messages"`
	Keys            int  `json:"keys"`
	// Preload publishes every message before the consumers start.
	Preload bool `json:"preload,omitempty"`
	// Layout is the group's layout (LayoutMember when empty); unused by
	// the plain system.
	Layout string `json:"layout,omitempty"`
	// WorkQueue makes the stream a work queue (plain system only): the
	// plain consumer then drains a backlog stored as an elastic group's
	// work stream stores it (partition-stamped subjects, work-queue
	// retention), the baseline of an elastic group's drain.
	WorkQueue bool `json:"work_queue,omitempty"`
	// Filled has a preloaded elastic group's members join only once its
	// work stream holds the whole backlog (the time it takes to source it
	// is not counted): their rate is the drain of a work stream alone,
	// what a plain consumer on a work queue of the same backlog does.
	Filled bool `json:"filled,omitempty"`
}

// Name is a stable label, usable as a sub-benchmark name.
func (s Scenario) Name() string {
	if s.System == SystemPlain {
		name := fmt.Sprintf("plain/filters=%d/handler=%s/map=%d", s.Filters, s.Handler, s.mapOr1())
		if s.PartitionFilter {
			name += "/partition-filter"
		}
		if s.WorkQueue {
			name += "/workqueue"
		}
		return name
	}
	name := fmt.Sprintf("%s/members=%d/partitions=%d/handler=%s/map=%d", s.System, s.Members, s.Partitions, s.Handler, s.mapOr1())
	if s.Concurrency > 1 {
		name += fmt.Sprintf("/concurrency=%d", s.Concurrency)
	}
	if s.Layout != "" && s.Layout != LayoutMember {
		name += "/layout=" + s.Layout
	}
	if s.Filled {
		name += "/filled"
	}
	return name
}

// memberOptions are the join options of a cg member in s: a concurrent
// member whose max ack pending would be below its concurrency leaves it
// to cg (4 × the concurrency).
func (s Scenario) memberOptions() cg.JoinOptions {
	o := cg.JoinOptions{MaxAckPending: s.mapOr1(), Concurrency: s.Concurrency}
	if s.Concurrency > 1 && o.MaxAckPending < s.Concurrency {
		o.MaxAckPending = 0
	}
	return o
}

func (s Scenario) mapOr1() int { return max(s.MaxAckPending, 1) }

// Result is what one run measured.
type Result struct {
	Scenario
	Handled    int           `json:"handled"`
	Elapsed    time.Duration `json:"elapsed_ns"`
	MsgsPerSec float64       `json:"msgs_per_sec"`
	P50        time.Duration `json:"p50_ns"`
	P99        time.Duration `json:"p99_ns"`
	// Violations counts messages handled out of per-key order: a key's
	// sequence number that is not the next one (a gap, an overtake or a
	// step back). A redelivered message seen again is a duplicate.
	Violations int `json:"violations"`
	Duplicates int `json:"duplicates"`
	// PublishPerSec is the publisher's rate: a live run (no Preload)
	// cannot handle faster than this.
	PublishPerSec float64 `json:"publish_per_sec"`
}

// Handle is called by a system for every message it hands to a handler,
// after the handler time and before the ack.
type Handle func(h nats.Header)

// Starter sets up the scenario's consumers on the stream (already made,
// partitioned into sc.Partitions) and starts them, each member on its own
// connection from connect, calling handle for every message and acking
// it. It returns once the consumers can receive; stop ends them all.
type Starter func(ctx context.Context, connect func() (jetstream.JetStream, error), sc Scenario, handle Handle) (stop func(), err error)

// Env is where runs happen: a server's client URL.
type Env struct {
	URL string
	// Limit bounds one run (setup, publish and drain); 0 is 2 minutes.
	Limit time.Duration
	// Drain, when set, is called with true as a preloaded run's consumers
	// start and with false once they have handled everything: a caller
	// measures what the drain alone costs (its CPU time, say).
	Drain func(start bool)
}

func (e Env) drain(start bool) {
	if e.Drain != nil {
		e.Drain(start)
	}
}

func (e Env) connect(conns *[]*nats.Conn, mu *sync.Mutex) func() (jetstream.JetStream, error) {
	return func() (jetstream.JetStream, error) {
		nc, err := nats.Connect(e.URL, nats.MaxReconnects(-1))
		if err != nil {
			return nil, err
		}
		mu.Lock()
		*conns = append(*conns, nc)
		mu.Unlock()
		return jetstream.New(nc)
	}
}

// Starters are the systems cg bench runs.
var Starters = map[string]Starter{SystemCG: StartCG, SystemPlain: StartPlain, SystemElastic: StartElastic}

// Run runs one scenario: it makes the stream afresh, starts the system,
// publishes sc.Messages messages over sc.Keys keys as fast as the server
// takes them and waits until every one was handled (or the limit passed,
// an error). The clock runs from the first publish to the last handled.
// With sc.Preload the messages are published before the system starts
// and the clock runs from the first handled to the last: the consume
// rate alone, never bounded by the publisher's.
func Run(ctx context.Context, env Env, sc Scenario, start Starter) (Result, error) {
	res := Result{Scenario: sc}
	ctx, cancel := context.WithTimeout(ctx, env.limit())
	defer cancel()
	r, err := setUp(ctx, env, sc, &res)
	if err != nil {
		return res, err
	}
	defer r.tearDown()
	c := newCollector(sc.Messages, sc.Keys)
	if sc.Preload {
		if err := r.publish(ctx); err != nil {
			return res, err
		}
	}
	begin := time.Now()
	if sc.Preload {
		env.drain(true)
	}
	stop, err := start(ctx, r.connect, sc, c.handle)
	if err != nil {
		return res, fmt.Errorf("%s: start: %w", sc.Name(), err)
	}
	defer stop()
	if !sc.Preload {
		begin = time.Now()
		if err := r.publish(ctx); err != nil {
			return res, err
		}
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		c.fill(&res)
		return res, fmt.Errorf("%s: handled %d of %d messages within %v", sc.Name(), res.Handled, sc.Messages, env.limit())
	}
	c.fill(&res)
	res.Elapsed = c.last.Sub(begin)
	if sc.Preload {
		env.drain(false)
		// The clock starts at the first message handled, so that joining
		// is not counted; the latencies are time spent in the stream.
		res.Elapsed = c.last.Sub(c.first)
		res.P50, res.P99 = 0, 0
	}
	if res.Elapsed > 0 {
		res.MsgsPerSec = float64(res.Handled) / res.Elapsed.Seconds()
	}
	return res, nil
}

func (e Env) limit() time.Duration {
	if e.Limit == 0 {
		return 2 * time.Minute
	}
	return e.Limit
}

// run is one scenario's stream on the server and its connections.
type run struct {
	sc      Scenario
	res     *Result
	limit   time.Duration
	js      jetstream.JetStream
	connect func() (jetstream.JetStream, error)
	mu      sync.Mutex
	conns   []*nats.Conn
}

// setUp makes the scenario's stream afresh (removing what an earlier run
// left) and the connection maker its systems use.
func setUp(ctx context.Context, env Env, sc Scenario, res *Result) (*run, error) {
	if sc.Messages < 1 || sc.Keys < 1 || sc.Partitions < 1 {
		return nil, errors.New("a scenario needs at least one message, key and partition")
	}
	r := &run{sc: sc, res: res, limit: env.limit()}
	r.connect = env.connect(&r.conns, &r.mu)
	js, err := r.connect()
	if err != nil {
		r.closeConns()
		return nil, err
	}
	r.js = js
	// A group left by an earlier run (its configuration outlives the
	// stream) goes first; cg and the reference keep it in the same place.
	_, _ = cg.New(js).Delete(ctx, cg.KindStatic, Stream, Group)
	_, _ = cg.New(js).Delete(ctx, cg.KindElastic, Stream, Group)
	if err := js.DeleteStream(ctx, Stream); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		r.closeConns()
		return nil, err
	}
	cfg := jetstream.StreamConfig{
		Name: Stream, Subjects: []string{"bench.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "bench.*", Destination: fmt.Sprintf("{{partition(%d,1)}}.bench.{{wildcard(1)}}", sc.Partitions)},
	}
	if sc.WorkQueue {
		cfg.Retention = jetstream.WorkQueuePolicy
	}
	if err := createStream(ctx, js, cfg); err != nil {
		r.closeConns()
		return nil, err
	}
	return r, nil
}

func (r *run) closeConns() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, nc := range r.conns {
		nc.Close()
	}
}

// tearDown removes the run's group and stream and closes its connections.
func (r *run) tearDown() {
	cleanup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = cg.New(r.js).Delete(cleanup, cg.KindStatic, Stream, Group)
	_, _ = cg.New(r.js).Delete(cleanup, cg.KindElastic, Stream, Group)
	_ = r.js.DeleteStream(cleanup, Stream)
	r.closeConns()
}

// Keys are the run's keys, k0..k(n-1): key i's subject is bench.k<i>.
func Keys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
	}
	return keys
}

// publish publishes the scenario's messages as fast as the server takes
// them: message i has key i % Keys.
func (r *run) publish(ctx context.Context) error {
	sc, js := r.sc, r.js
	keys := Keys(sc.Keys)
	begin := time.Now()
	for i := 0; i < sc.Messages; i++ {
		k := i % sc.Keys
		m := nats.NewMsg("bench." + keys[k])
		m.Header.Set(KeyHeader, keys[k])
		m.Header.Set(SeqHeader, strconv.Itoa(i/sc.Keys+1))
		m.Header.Set(TimeHeader, strconv.FormatInt(time.Now().UnixNano(), 10))
		for {
			_, err := js.PublishMsgAsync(m)
			if err == nil {
				break
			}
			if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
				return fmt.Errorf("publish: %w", err)
			}
			// The server is behind (a loaded machine): let the
			// outstanding publishes land, then go on.
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return fmt.Errorf("%s: publish did not complete within %v", sc.Name(), r.limit)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return fmt.Errorf("%s: publish did not complete within %v", sc.Name(), r.limit)
	}
	r.res.PublishPerSec = float64(sc.Messages) / time.Since(begin).Seconds()
	return nil
}

// collector checks per-key order and records latencies.
type collector struct {
	mu         sync.Mutex
	next       []int // per key: the sequence number expected next
	lat        []time.Duration
	handled    int
	violations int
	duplicates int
	want       int
	first      time.Time
	last       time.Time
	done       chan struct{}
}

func newCollector(messages, keys int) *collector {
	c := &collector{next: make([]int, keys), lat: make([]time.Duration, 0, messages), want: messages, done: make(chan struct{})}
	for i := range c.next {
		c.next[i] = 1
	}
	return c
}

func (c *collector) handle(h nats.Header) {
	now := time.Now()
	key := -1
	if k := h.Get(KeyHeader); len(k) > 1 {
		if v, err := strconv.Atoi(k[1:]); err == nil {
			key = v
		}
	}
	seq, _ := strconv.Atoi(h.Get(SeqHeader))
	pub, _ := strconv.ParseInt(h.Get(TimeHeader), 10, 64)
	c.mu.Lock()
	defer c.mu.Unlock()
	if key < 0 || key >= len(c.next) {
		c.violations++
		return
	}
	switch want := c.next[key]; {
	case seq == want:
		c.next[key] = seq + 1
	case seq < want:
		c.duplicates++
		return
	default:
		// A later message of the key came first: order broken. Count it
		// handled, so the run still ends, and expect what follows it.
		c.violations++
		c.next[key] = seq + 1
	}
	c.lat = append(c.lat, now.Sub(time.Unix(0, pub)))
	if c.handled == 0 {
		c.first = now
	}
	c.handled++
	if c.handled == c.want {
		c.last = now
		close(c.done)
	}
}

func (c *collector) fill(r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r.Handled, r.Violations, r.Duplicates = c.handled, c.violations, c.duplicates
	lat := slices.Clone(c.lat)
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		r.P50 = lat[n/2]
		r.P99 = lat[min(n-1, n*99/100)]
	}
}

// MemberNames are the members m1..mN.
func MemberNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "m" + strconv.Itoa(i+1)
	}
	return out
}

// WaitPinned waits until every member consumer of the group has a pull
// waiting on it (the server pins on the first message), so that
// publishing starts with every member ready. The reference library names
// its consumers as cg does.
func WaitPinned(ctx context.Context, js jetstream.JetStream, members []string) error {
	return waitPinned(ctx, js, Stream, members, func(m string) string { return cg.StaticConsumerName(Group, m) })
}

func waitPinned(ctx context.Context, js jetstream.JetStream, stream string, members []string, consumer func(string) string) error {
	for _, m := range members {
		name := consumer(m)
		for {
			if c, err := js.Consumer(ctx, stream, name); err == nil {
				if ci, err := c.Info(ctx); err == nil && (ci.NumWaiting > 0 || pinned(ci)) {
					break
				}
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("member %s was not pinned: %w", m, ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

func pinned(ci *jetstream.ConsumerInfo) bool {
	for _, pg := range ci.PriorityGroups {
		if pg.PinnedClientID != "" {
			return true
		}
	}
	return false
}

// Work is the handler's part: spend the handler time, then report.
func Work(sc Scenario, handle Handle, h nats.Header) {
	if sc.Handler > 0 {
		time.Sleep(sc.Handler)
	}
	handle(h)
}

// StartCG runs a cg static group: sc.Members members balanced over
// sc.Partitions partitions, one instance each on its own connection.
func StartCG(ctx context.Context, connect func() (jetstream.JetStream, error), sc Scenario, handle Handle) (func(), error) {
	return startGroup(ctx, connect, sc, handle, cg.KindStatic)
}

// StartElastic runs a cg elastic group over the stream, the same way: its
// members consume from the group's work stream.
func StartElastic(ctx context.Context, connect func() (jetstream.JetStream, error), sc Scenario, handle Handle) (func(), error) {
	return startGroup(ctx, connect, sc, handle, cg.KindElastic)
}

func startGroup(ctx context.Context, connect func() (jetstream.JetStream, error), sc Scenario, handle Handle, k cg.Kind) (func(), error) {
	js, err := connect()
	if err != nil {
		return nil, err
	}
	members := MemberNames(sc.Members)
	admin := cg.New(js)
	consumer := func(m string) string { return cg.StaticConsumerName(Group, m) }
	if k == cg.KindElastic {
		cfg := cg.ElasticConfig{MaxMembers: sc.Partitions, Members: members}
		if err = elasticLayout(sc, &cfg); err == nil {
			_, err = admin.CreateElastic(ctx, Stream, Group, cfg)
		}
		consumer = func(m string) string { return m }
	} else {
		cfg := cg.StaticConfig{MaxMembers: sc.Partitions, Members: members}
		if err = staticLayout(sc, &cfg); err == nil {
			_, err = admin.CreateStatic(ctx, Stream, Group, cfg)
		}
	}
	if err != nil {
		return nil, err
	}
	if k == cg.KindElastic && sc.Filled && sc.Preload {
		if err := WaitFilled(ctx, js, sc.Messages); err != nil {
			return nil, err
		}
	}
	var running []*cg.Member
	stop := func() {
		for _, m := range running {
			m.Stop()
		}
		for _, m := range running {
			_ = m.Wait()
		}
	}
	for _, name := range members {
		mjs, err := connect()
		if err != nil {
			stop()
			return nil, err
		}
		m, err := cg.New(mjs).Join(ctx, k, Stream, Group, name, func(_ context.Context, msg *cg.Msg) {
			Work(sc, handle, msg.Headers())
			_ = msg.Ack()
		}, sc.memberOptions())
		if err != nil {
			stop()
			return nil, err
		}
		running = append(running, m)
	}
	waitFor := members
	if sc.Layout == LayoutPartition {
		// One consumer per partition, each pulled by its owner.
		waitFor = make([]string, sc.Partitions)
		for p := range waitFor {
			waitFor[p] = cg.PartitionConsumerName(Group, p)
		}
		consumer = func(name string) string { return name }
	}
	if err := waitPinned(ctx, js, k.WorkStream(Stream, Group), waitFor, consumer); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// WaitFilled waits until the elastic group's work stream holds n messages:
// the whole preloaded backlog, sourced.
func WaitFilled(ctx context.Context, js jetstream.JetStream, n int) error {
	name := cg.WorkStreamName(Stream, Group)
	for {
		if s, err := js.Stream(ctx, name); err == nil && s.CachedInfo().State.Msgs >= uint64(n) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("work stream %s did not take in %d messages: %w", name, n, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// StartPlain runs one plain pull consumer over the whole stream with one
// filter (">"), or one filter per partition ("<p>.>", sc.Filters > 1), as
// a cg member over those partitions has. It has no per-key order of its
// own beyond the stream's: its handler runs serially. (A wildcard filter
// such as "*.bench.*" over 1000 keys' subjects was served 5× slower than
// ">" at max ack pending 1000: the server's cost, not the handler's.)
func StartPlain(ctx context.Context, connect func() (jetstream.JetStream, error), sc Scenario, handle Handle) (func(), error) {
	js, err := connect()
	if err != nil {
		return nil, err
	}
	filters := []string{">"}
	if sc.Filters > 1 || sc.PartitionFilter {
		filters = filters[:0]
		for p := 0; p < sc.Partitions; p++ {
			filters = append(filters, strconv.Itoa(p)+".>")
		}
	}
	c, err := js.CreateOrUpdateConsumer(ctx, Stream, jetstream.ConsumerConfig{
		Name: "plain", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: sc.mapOr1(),
		AckWait: 30 * time.Second, FilterSubjects: filters,
	})
	if err != nil {
		return nil, err
	}
	cc, err := c.Consume(func(msg jetstream.Msg) {
		Work(sc, handle, msg.Headers())
		_ = msg.Ack()
	})
	if err != nil {
		return nil, err
	}
	return cc.Stop, nil
}

// createStream creates the run's stream. Right after the previous run's
// stream was deleted, nats-server (2.15) may still be removing the
// account's stream directory in the background and refuse the create
// with 10049 ("error creating store"); that passes in a moment.
func createStream(ctx context.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := js.CreateStream(ctx, cfg)
		var apiErr *jetstream.APIError
		if err == nil || !errors.As(err, &apiErr) || apiErr.ErrorCode != 10049 || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}
