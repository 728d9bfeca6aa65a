package cg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventKind names a change in a member instance's life.
type EventKind string

// The events a member reports, in the order they usually happen.
const (
	// EventJoined: the instance is bound to its member's consumer and pulling.
	EventJoined EventKind = "joined"
	// EventWaiting: the instance is not pinned; it waits as a hot standby
	// (or because its member owns no partitions).
	EventWaiting EventKind = "waiting"
	// EventPinned: the server pinned this instance (seen on the first
	// message carrying a new pin id).
	EventPinned EventKind = "pinned"
	// EventPinLost: the server pinned another instance (a pull with our pin
	// id was refused with 423), or this instance released its pin.
	EventPinLost EventKind = "pin_lost"
	// EventWarning: something went wrong that the instance rides out
	// (a missed heartbeat, a reconnect); Err says what.
	EventWarning EventKind = "warning"
	// EventFenced: the instance held a pin but can no longer be sure it
	// does (its pull loop stood still, or nothing came from the server,
	// for the fence threshold, and the server no longer names it pinned:
	// it was frozen, starved or cut off); it hands buffered messages back
	// for redelivery to the new pinned instance and refuses to ack the one
	// in hand.
	EventFenced EventKind = "fenced"
	// EventStopped: the instance stopped; Err is nil for a clean stop.
	EventStopped EventKind = "stopped"
	// EventPoison: a poison message was dead-lettered, parked or released
	// (JoinOptions.Retry); Cause says which, Reason names the message.
	EventPoison EventKind = "poison"
)

// Event is one change reported to JoinOptions.OnEvent.
type Event struct {
	Kind       EventKind `json:"event"`
	Time       time.Time `json:"time"`
	Stream     string    `json:"stream"`
	Group      string    `json:"group"`
	Member     string    `json:"member"`
	Consumer   string    `json:"consumer,omitempty"`
	Partitions []int     `json:"partitions,omitempty"`
	PinID      string    `json:"pin_id,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	// Cause is why the instance stopped (EventStopped), lost its pin
	// (EventPinLost) or fenced itself (EventFenced), for code to test;
	// Reason says it in words. Empty for other events.
	Cause EventCause `json:"-"`
	Err   error      `json:"-"`
}

// Defaults of JoinOptions. The ack wait and the pinned TTL derived from it
// are the reference CLI's, so that cg and reference instances of one member
// create identical consumers and can stand by for each other.
const (
	DefaultAckWait       = 2 * time.Second
	DefaultMaxAckPending = 1
	minPinnedTTL         = time.Second
	// DefaultInactiveThreshold is how long a static member's consumer
	// stays after its last instance: long enough to keep the exact state
	// over restarts and deploys, short of forever.
	DefaultInactiveThreshold = time.Hour
	// KeepConsumer as JoinOptions.InactiveThreshold keeps a static
	// member's consumer forever.
	KeepConsumer time.Duration = -1
)

// JoinOptions tune a member instance. The zero value is the default.
type JoinOptions struct {
	// AckWait is how long the server waits for an ack before redelivering.
	AckWait time.Duration
	// MaxAckPending bounds unacknowledged messages; 1 (the default) keeps
	// strict per-key order.
	MaxAckPending int
	// PinnedTTL is how long the pinned instance may go without pulling
	// before the server pins a standby. Default: max(AckWait, 1s).
	PinnedTTL time.Duration
	// PullExpiry is how long each pull waits. Default: PinnedTTL/2, so an
	// idle pinned instance re-pulls well within its TTL.
	PullExpiry time.Duration
	// InactiveThreshold is how long a static member's consumer outlives its
	// last instance before the server deletes it, so that members that are
	// gone for good leave nothing behind. Its position is kept and a
	// returning member resumes there (positions.go). Default
	// DefaultInactiveThreshold; KeepConsumer (any negative value) keeps the
	// consumer forever, as the reference does. The threshold is part of the
	// consumer's configuration: a reference instance of the same member
	// refuses a consumer that cg created with one (error 10148), so mixed
	// cg/reference instances of one member need KeepConsumer. Consumers that
	// exist already are joined as they are, never changed.
	InactiveThreshold time.Duration
	// LivenessInterval is how often a standby checks that the pinned
	// instance of its member is still there (it also checks as soon as it
	// stands by), so that an instance that died (its connection closed) is
	// replaced at once, and one frozen or cut off (two checks in a row
	// unanswered, each waiting 4/5 of the interval) within about three
	// intervals, instead of after the pinned TTL. The pinned instance
	// fences itself on a matching threshold derived from its own interval
	// (liveness.go: 300ms by default), so instances of one member should
	// share it. Only cg instances answer the check; a pinned instance that
	// never answered (the reference library's) is left to the TTL. Default
	// 250ms; negative turns the check off (and fencing falls back to the
	// pinned TTL).
	LivenessInterval time.Duration
	// ReferenceCompatible creates the member consumer exactly as the
	// reference library (pcgroups) would: without cg's ownership marks and,
	// for static members, kept forever (as KeepConsumer). The server
	// compares a create's whole configuration, metadata included, with the
	// existing consumer's, so a reference instance of the same member is
	// refused a marked consumer (static: it fails; elastic: it deletes and
	// recreates it, unmarked). Set it on every cg instance of a member that
	// also runs reference instances. Consumers that exist already are
	// joined as they are when they are the member's own.
	ReferenceCompatible bool
	// Concurrency is how many handler calls an instance runs at once
	// (lanes.go). 0 and 1 hand messages over one at a time, exactly as
	// before. Above 1, messages of one key (Order) are still handled
	// strictly in delivery order, different keys at once; a consumer cg
	// creates gets a max ack pending of 4×Concurrency unless MaxAckPending
	// is set, which must then be at least Concurrency, and an existing
	// member consumer with a lower max ack pending is refused.
	Concurrency int
	// Order is what a concurrent instance keeps in order: OrderKey (the
	// default), OrderPartition or OrderNone.
	Order Order
	// OnEvent receives state changes. It is called from the instance's
	// goroutines and must not block for long.
	OnEvent func(Event)
	// Batch, when set, hands messages to Batch.Handler in ordered batches
	// (batch.go) instead of one at a time; the per-message handler given
	// to the join must then be nil. Not combined with Concurrency above 1.
	Batch *BatchOptions
	// Retry, when set, bounds the retries of a failing message and says
	// what to do with it then: dead-letter, park or stop (poison_api.go).
	// Nil keeps today's behaviour: redelivered after every ack wait.
	Retry *RetryPolicy
	// Observers see the instance from inside (observe.go): messages
	// handed to user code and their results, pins, the join and the stop.
	// The metrics and tracing plugins (pkg/cg/plugin/...) are observers.
	Observers []Observer

	// stage, when set (by tests), makes each binding's delivery stage in
	// place of the serial one (delivery.go).
	stage func(deliverySink) delivery
	// hashLanes (benchmarks) folds keys onto Concurrency fixed lanes by
	// hash instead of one queue per key, to measure the alternative.
	hashLanes bool
	// afterDeadLetter (tests) runs between a dead letter's PubAck and the
	// original's ack; true skips the ack, as a crash there would.
	afterDeadLetter func(seq uint64) bool
}

func (o JoinOptions) withDefaults() (JoinOptions, error) {
	if o.AckWait < 0 || o.PinnedTTL < 0 || o.PullExpiry < 0 || o.MaxAckPending < 0 {
		return o, errors.New("join options must not be negative")
	}
	if err := o.checkCeilings(); err != nil {
		return o, err
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	o, err := o.batchDefaults()
	if err != nil {
		return o, err
	}
	o, err = o.lanesDefaults()
	if err != nil {
		return o, err
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	if o.PinnedTTL == 0 {
		o.PinnedTTL = max(o.AckWait, minPinnedTTL)
	}
	if o.PullExpiry == 0 {
		// Well inside the TTL: each pull resets the server's pin timer.
		o.PullExpiry = max(o.PinnedTTL/2, 100*time.Millisecond)
	}
	if o.ReferenceCompatible {
		o.InactiveThreshold = KeepConsumer
	}
	switch {
	case o.InactiveThreshold == 0:
		o.InactiveThreshold = DefaultInactiveThreshold
	case o.InactiveThreshold < 0:
		o.InactiveThreshold = 0 // kept forever
	}
	if o.LivenessInterval == 0 {
		o.LivenessInterval = 250 * time.Millisecond
	}
	if o.LivenessInterval > 0 && o.LivenessInterval < minLivenessInterval {
		// The fence threshold derives from it (liveness.go): shorter would
		// have the pinned instance doubt its pin on every scheduling hiccup.
		return o, fmt.Errorf("liveness check interval %s is too short: use %s or more (250ms is the default), or turn the check off", o.LivenessInterval, minLivenessInterval)
	}
	if o.PullExpiry >= o.PinnedTTL {
		return o, fmt.Errorf("pull expiry %s must be shorter than the pinned TTL %s, or the pinned instance loses its pin while idle", o.PullExpiry, o.PinnedTTL)
	}
	return o, nil
}

// Msg is a message handed to a member's handler: the stream's message with
// the partition token stripped from its subject.
type Msg struct {
	jetstream.Msg
	subject   string
	partition int
	pinID     string
	out       *msgOutcome // under a retry policy: what the handler asked for
}

// Subject is the message subject without the leading partition token.
func (m *Msg) Subject() string { return m.subject }

// Partition is the partition the message belongs to.
func (m *Msg) Partition() int { return m.partition }

// PinID is the pin id the server delivered the message under.
func (m *Msg) PinID() string { return m.pinID }

// Raw returns the underlying JetStream message, subject unstripped.
func (m *Msg) Raw() jetstream.Msg { return m.Msg }

// Handler processes one message and acknowledges it (Ack, DoubleAck, Nak,
// Term). ctx is cancelled when the instance is asked to stop; a handler
// that finishes its message and acks it lets the handoff lose nothing.
type Handler func(ctx context.Context, msg *Msg)

// Member is one running instance of a group member.
type Member struct {
	c       *Client
	stream  string // the group's stream
	cstream string // the stream the member consumer lives on
	group   string
	member  string
	// consumer is the member consumer's name.
	consumer string
	opts     JoinOptions
	handler  Handler

	// kind is what the kind of group does differently (strategy.go).
	kind strategy

	ctx    context.Context // cancelled on Stop: tells the handler to wrap up
	cancel context.CancelFunc

	watcher  jetstream.KeyWatcher
	stopping atomic.Bool
	handOff  orphanHandOff // the watchdog's hand back of a lost pin's window (liveness.go)

	mu         sync.Mutex
	partitions []int
	bound      *binding // the consumer this instance pulls from, if any
	pinID      string
	fencedPin  string // the pin given up by fencing: its messages are never acked
	doubted    string // the pin fencing could not confirm (server unreachable): nothing under it is acked until it does
	liveness   *nats.Subscription
	stopErr    error
	stopCause  EventCause
	once       sync.Once
	done       chan struct{}

	// keyOf reads the partitioning key off a delivered subject, for a
	// concurrent instance's lanes (lanes.go).
	keyOf func(subject string) (string, bool)
	// batchNo numbers this instance's batches (batch.go).
	batchNo atomic.Uint64

	// poison handles failing messages under JoinOptions.Retry (poison.go).
	poison *poisonState
	// obs are JoinOptions.Observers' hooks (observe.go); nil without any.
	obs *observers

	// layout, on an instance of a partition-layout group, holds the
	// per-partition runtimes it runs (layout_member.go); posName, on one
	// of those, names its saved position in place of the member.
	layout  *layoutParent
	posName string
}

// binding is an instance's attachment to the member consumer: its pull
// loop and handler loop.
type binding struct {
	filters []string
	puller  *puller
	// work carries pulled messages to the handler loop, which passes
	// them to the delivery stage (delivery.go) in delivery order.
	work      chan *nats.Msg
	stage     atomic.Value // the delivery stage, for Member.QueueDepth
	releasing atomic.Bool
	// acked remembers the stream sequences this binding acked lately, so
	// a redelivery of one (its ack was slow or lost) is acked again rather
	// than handled twice.
	acked      *seqRing
	lastDSeq   uint64 // the last delivery's consumer sequence (reset_member.go)
	stopPull   chan struct{}
	pullDone   chan struct{}
	handleDone chan struct{}
}

func (m *Member) join(ctx context.Context, h Handler, opts JoinOptions) (JoinOptions, error) {
	if h == nil && opts.Batch == nil {
		return opts, errors.New("a message handler is required")
	}
	if h != nil && opts.Batch != nil {
		return opts, fmt.Errorf("%w: give a message handler or batch options with a batch handler, not both", ErrInvalidBatch)
	}
	for _, n := range [][2]string{{"stream", m.stream}, {"group", m.group}, {"member", m.member}} {
		if err := ValidateName(n[0], n[1]); err != nil {
			return opts, err
		}
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return opts, err
	}
	m.obs = newObservers(opts.Observers)
	if err := opts.Retry.Validate(); err != nil {
		return opts, err
	}
	if opts.Retry != nil && opts.Batch != nil {
		return opts, fmt.Errorf("%w: a retry policy and batch delivery cannot be combined yet (a failing batch is retried whole, then the member stops): use one of them", ErrInvalidBatch)
	}
	v, err := m.c.ServerVersion()
	if err != nil {
		return opts, err
	}
	if err := CheckServerVersion(v, false); err != nil {
		return opts, err
	}
	if _, err := m.c.streamInfo(ctx, m.stream); err != nil {
		return opts, err
	}
	return opts, nil
}

// JoinStatic starts an instance of member in a static group: it binds to
// (or creates) the member's pinned pull consumer and hands each message to
// h. It returns once the instance is pulling; watch Done for its end.
// Cancelling ctx stops the instance as Stop does.
func (c *Client) JoinStatic(ctx context.Context, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	m := &Member{c: c, stream: stream, cstream: stream, group: group, member: member,
		consumer: StaticConsumerName(group, member), handler: h, done: make(chan struct{})}
	st := &staticStrategy{Member: m, gone: make(chan struct{}, 1)}
	m.kind = st
	opts, err := m.join(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	m.opts = opts
	cfg, _, err := c.getStatic(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	if err := m.setupPoison(ctx); err != nil {
		return nil, err
	}
	if !cfg.IsMember(member) {
		return nil, fmt.Errorf("%w: %q is not a member of static group %q (members: %v); static membership is fixed at creation", ErrMemberNotFound, member, group, cfg.MemberNames())
	}
	if err := CheckJoinStatic(stream, group, member, cfg); err != nil {
		return nil, err
	}
	if err := c.joinStaticPreflight(ctx, stream, cfg); err != nil {
		return nil, err
	}
	st.static = cfg
	if cfg.LayoutOf() == LayoutPartition {
		return c.joinLayout(ctx, m, KindStatic, cfg)
	}
	if err := m.prepareLanes(ctx, nil); err != nil {
		return nil, err
	}
	m.partitions = cfg.Assignment().MemberPartitions(member)
	m.ctx, m.cancel = context.WithCancel(context.Background())

	kv, err := c.bucket(ctx, StaticBucket)
	if err != nil {
		return nil, err
	}
	m.watcher, err = kv.Watch(m.ctx, Key(stream, group))
	if err != nil {
		m.cancel()
		return nil, fmt.Errorf("watch group %s: %w", Key(stream, group), err)
	}
	if filters := cfg.MemberFilters(member); len(filters) > 0 {
		if err := st.bindStatic(ctx, filters); err != nil {
			_ = m.watcher.Stop()
			m.cancel()
			return nil, err
		}
	}
	m.emit(Event{Kind: EventJoined, Reason: st.resumed})
	if len(m.partitions) == 0 {
		m.emit(Event{Kind: EventWaiting, Reason: "member owns no partitions"})
	} else {
		m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
	}
	m.kind.start()
	m.stopWith(ctx)
	return m, nil
}

const reasonStandby = "standby until the server pins this instance"

// stopWith stops the instance when ctx is cancelled.
func (m *Member) stopWith(ctx context.Context) {
	go func() {
		select {
		case <-ctx.Done():
			m.Stop()
		case <-m.done:
		}
	}()
}

// consumerConfig is the member consumer's configuration: the reference
// CLI's settings, so that cg and reference instances of one member create
// identical consumers and can stand by for each other.
func (m *Member) consumerConfig(filters []string) jetstream.ConsumerConfig {
	cc := jetstream.ConsumerConfig{
		FilterSubjects: filters,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        m.opts.AckWait,
		MaxAckPending:  m.opts.MaxAckPending,
		PriorityGroups: []string{PriorityGroup},
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PinnedTTL:      m.opts.PinnedTTL,
	}
	if !m.opts.ReferenceCompatible {
		cc.Metadata = Marks(m.kind.name(), m.stream, m.group, m.member)
	}
	m.kind.shape(&cc) // after the marks: a partition consumer's are its own
	return cc
}

func consumerFilters(cc jetstream.ConsumerConfig) []string {
	fs := slices.Clone(cc.FilterSubjects)
	if cc.FilterSubject != "" {
		fs = append(fs, cc.FilterSubject)
	}
	slices.Sort(fs)
	return fs
}

func sameFilters(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// compatible: same partitions, pinned in PCG. Other settings (ack wait,
// TTL) may differ: the first instance's consumer wins, so instances started
// with other flags, or by the reference library, still stand by together.
func compatible(have jetstream.ConsumerConfig, filters []string) bool {
	return sameFilters(consumerFilters(have), filters) &&
		slices.Contains(have.PriorityGroups, PriorityGroup) &&
		have.PriorityPolicy == jetstream.PriorityPolicyPinned
}

// bindStatic creates the member consumer, or binds to an existing one that
// is the member's own (MemberConsumerOwned), and starts pulling. An owned
// consumer with other filters (a leftover of an earlier group of the same
// name) is updated when no instance pulls from it; one that is not the
// member's is never touched.
func (m *staticStrategy) bindStatic(ctx context.Context, filters []string) error {
	want := m.consumerConfig(filters)
	var (
		cons    jetstream.Consumer
		err     error
		resumed string
	)
	if cons, err = m.c.js.Consumer(ctx, m.cstream, m.consumer); errors.Is(err, jetstream.ErrConsumerNotFound) {
		// Gone after inactivity (or never made): pick up where the member
		// left off, if it saved its place.
		create := want
		resumed = m.startAfter(ctx, &create)
		cons, err = m.c.js.CreateConsumer(ctx, m.cstream, create)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			// Another instance made it just now: look at it as below.
			resumed = ""
			cons, err = m.c.js.Consumer(ctx, m.cstream, m.consumer)
		} else if err == nil {
			cons = nil // ours, just made
		}
	}
	if err == nil && cons != nil {
		ci := cons.CachedInfo()
		if ok, why := MemberConsumerOwned(ci.Config, KindStatic, m.stream, m.group, m.member, staticForms(m.static, m.member)...); !ok {
			return notOwned("consumer", m.consumer+" on "+m.cstream, fmt.Sprintf("static group %q on %q (member %q)", m.group, m.stream, m.member), why, "stop what uses it and remove it, or rename the group or member")
		}
		if err := m.ackPendingProblem(ci.Config); err != nil {
			return err
		}
		if !compatible(ci.Config, filters) {
			if ci.NumWaiting > 0 {
				// Live instances use it (another implementation's, or of a
				// group recreated under them): never change what they consume.
				return fmt.Errorf("%w: consumer %s on %s has filters %v but the group gives member %s %v, and instances are pulling from it; stop them (or delete the consumer) and join again",
					ErrConsumerConflict, m.consumer, m.cstream, consumerFilters(ci.Config), m.member, filters)
			}
			// The member's own, with an earlier configuration's filters.
			upd := want
			if !isMarked(ci.Config.Metadata) {
				upd.Metadata = ci.Config.Metadata // leave an unmarked consumer unmarked
			}
			_, err = m.c.js.UpdateConsumer(ctx, m.cstream, upd)
		}
	}
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", m.consumer, m.cstream, err)
	}
	if err := m.attach(filters); err != nil {
		return err
	}
	if resumed != "" {
		m.resumed = resumed
	}
	go m.keepPosition(m.bound)
	return nil
}

// attach starts pulling from the member consumer with the given filters.
func (m *Member) attach(filters []string) error {
	p, err := newPuller(m)
	if err != nil {
		return err
	}
	b := &binding{filters: filters, puller: p, work: make(chan *nats.Msg, cap(p.in)), acked: newSeqRing(1024),
		stopPull: make(chan struct{}), pullDone: make(chan struct{}), handleDone: make(chan struct{})}
	go func() {
		defer close(b.pullDone)
		p.run(b.stopPull, b.work)
	}()
	go m.handleLoop(b)
	if m.opts.LivenessInterval > 0 {
		go m.watchdog(b)
	}
	m.mu.Lock()
	m.bound = b
	m.mu.Unlock()
	return nil
}

// handleLoop passes each pulled message to the binding's delivery stage
// (delivery.go), in order. Once the pull loop has ended (the binding is
// being released) it has the stage hand back what it has not given to the
// handler, naks what is still on its way, and waits for the handler.
func (m *Member) handleLoop(b *binding) {
	defer close(b.handleDone)
	stage := m.newDelivery(bindingSink{m: m, b: b})
	b.stage.Store(stage)
	for {
		select {
		case raw := <-b.work:
			b.sawDelivery(raw)
			stage.accept(raw)
		case <-b.pullDone:
			stage.handBack()
			for {
				select {
				case raw := <-b.work:
					// The stage hands it back (the serial one naks
					// it at once), behind what it holds of its key.
					stage.accept(raw)
				default:
					stage.wait()
					return
				}
			}
		}
	}
}

// releaseHow says what a release does with the pin and the consumer.
type releaseHow int

const (
	releaseKeep     releaseHow = iota // leave the pin to expire (or to others)
	releaseUnpin                      // hand the pin over now
	releaseDelete                     // delete the member consumer
	releaseHandOver                   // hand the pin over to another member (a partition moved)
)

// release detaches from the consumer: it asks for nothing more but keeps
// listening, lets the handler finish the message in hand, naks the rest,
// and then, when this instance holds the pin, hands it over (unpin) or
// deletes the consumer, before it stops listening. It returns whether the
// instance held the pin.
func (m *Member) release(how releaseHow) (wasPinned bool) {
	m.mu.Lock()
	b := m.bound
	m.bound = nil
	m.mu.Unlock()
	if b == nil {
		return false
	}
	b.puller.cancel() // nothing more delivered to what is handed back
	b.releasing.Store(true)
	close(b.stopPull)
	<-b.pullDone
	<-b.handleDone // the message in hand is finished and acked
	m.mu.Lock()
	pin := m.pinID
	m.mu.Unlock()
	if b.puller.drain() && pin == "" {
		pin = "(pinned while leaving)"
	}
	if pin != "" {
		m.settleAcks(b)
		// Only the pinned instance acts: an unpin is not addressed to a
		// pin id, so a standby must never send one.
		switch how {
		case releaseUnpin:
			if m.unpin() == nil {
				m.emit(Event{Kind: EventPinLost, PinID: pin, Cause: CauseReleasedOnStop, Reason: "released on stop"})
			}
		case releaseHandOver:
			if m.unpin() == nil {
				m.emit(Event{Kind: EventPinLost, PinID: pin, Cause: CauseReleasedToRebalance, Reason: "handed the partition's consumer over to its new owner"})
			}
		case releaseDelete:
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer); err == nil &&
				sameFilters(consumerFilters(cons.CachedInfo().Config), b.filters) {
				_ = m.c.js.DeleteConsumer(ctx, m.cstream, m.consumer)
			}
			cancel()
			m.emit(Event{Kind: EventPinLost, PinID: pin, Cause: CauseReleasedToRebalance, Reason: "let go of the member consumer to rebalance"})
		}
		// Messages sent to us before that arrive before its reply.
		b.puller.drain()
	}
	b.puller.close()
	m.mu.Lock()
	m.pinID = ""
	m.doubted = ""
	m.mu.Unlock()
	m.answerLiveness("")
	return pin != ""
}

// settleAcks returns once the server has all but surely taken in the acks
// and naks this binding sent (what it handed back): the server queues them
// for the consumer's own goroutine, and by the second of two consumer
// answers in a row they are in. Letting go of the pin before that could
// have the next instance served messages its handed-back ones were ahead
// of, as the naked ones are not yet waiting for redelivery.
func (m *Member) settleAcks(b *binding) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.puller.nc.FlushWithContext(ctx); err != nil {
		return
	}
	for range 2 {
		if _, err := m.c.js.Consumer(ctx, m.cstream, m.consumer); err != nil {
			return
		}
	}
}

// notePin records the pin id a message came with, reporting a new pin.
func (m *Member) notePin(raw *nats.Msg) {
	pid := raw.Header.Get("Nats-Pin-Id")
	if pid == "" {
		return
	}
	m.mu.Lock()
	if pid == m.fencedPin {
		// Sent under the pin this instance fenced itself off from, and
		// arriving only now (a cut link held it): the pin is not this
		// instance's to take back, so the message stays stale and is
		// handed back, never handled.
		m.mu.Unlock()
		return
	}
	isNew := pid != m.pinID
	m.pinID = pid
	if isNew {
		m.doubted = ""
	}
	m.mu.Unlock()
	if isNew {
		m.answerLiveness(pid)
		m.emit(Event{Kind: EventPinned, PinID: pid})
	}
}

// ackStale reports whether the handler must not settle raw: it was
// delivered under a pin the instance fenced itself off from (or is about
// to). A pin lost to a step-down is different: the message in hand is
// still finished and acked, so the new pinned instance is not kept
// waiting for the ack wait.
func (m *Member) ackStale(raw *nats.Msg) bool {
	pid := raw.Header.Get("Nats-Pin-Id")
	m.mu.Lock()
	b, pin, fenced, doubted := m.bound, m.pinID, m.fencedPin, m.doubted
	m.mu.Unlock()
	if pid != "" && pid == fenced {
		return true
	}
	if b != nil && pin != "" && pid == pin {
		if unsure, _ := b.puller.unsure(); unsure || doubted == pin {
			// A false alarm the server cleared keeps the pin: ack.
			return !m.recheck(b, pid)
		}
	}
	return false
}

// staleMsg reports whether raw, not yet handed to the handler, was
// delivered under a pin this instance no longer holds or can no longer be
// sure of.
func (m *Member) staleMsg(raw *nats.Msg) bool {
	m.mu.Lock()
	b, pin := m.bound, m.pinID
	m.mu.Unlock()
	if pid := raw.Header.Get("Nats-Pin-Id"); pid != "" && pid != pin {
		return true
	}
	if b == nil {
		return false
	}
	m.mu.Lock()
	doubted := m.doubted
	m.mu.Unlock()
	if unsure, _ := b.puller.unsure(); (unsure || doubted == pin) && pin != "" {
		return !m.recheck(b, pin) // kept on a false alarm the server cleared
	}
	return false
}

// fence gives up a pin the instance can no longer be sure of, unless the
// server confirms it is still this instance's: then the doubt was a false
// alarm (a pull sent while reconnecting, a scheduling hiccup) and the pin
// is kept, with the confirmation counting as a successful pull.
func (m *Member) fence(gap time.Duration) {
	m.mu.Lock()
	suspect, b := m.pinID, m.bound
	m.mu.Unlock()
	if suspect == "" {
		return
	}
	server, reached := "", true // unbound: nothing to confirm
	asked := time.Now().UnixNano()
	if b != nil {
		server, reached = m.serverPinOK()
	}
	if b != nil && reached && server == suspect {
		// The answer holds as of when it was asked: a freeze while it
		// was on its way must still show as a gap.
		storeMax(&b.puller.lastGood, asked)
		storeMax(&b.puller.lastTick, asked)
		storeMax(&b.puller.lastHeard, asked)
		m.mu.Lock()
		m.doubted = ""
		m.mu.Unlock()
		return
	}
	if !reached || server == "" {
		// Cut off (a black hole), or the server names no pin (a consumer
		// leader just elected, or unpinned with nothing delivered since):
		// nothing under the pin is acked until the server confirms it, but
		// pulls keep its id, so that if it is still ours it carries on at
		// once instead of after the pinned TTL (if not, the server refuses
		// them with 423 and the pin is dropped).
		m.mu.Lock()
		first := m.doubted != suspect && m.pinID == suspect
		if first {
			m.doubted = suspect
		}
		m.mu.Unlock()
		if first {
			m.emit(Event{Kind: EventFenced, PinID: suspect, Cause: CausePinUnconfirmed, Reason: fmt.Sprintf(
				"cut off from the server, frozen or starved for %s (fence threshold %s): cannot confirm pin %s, so handing buffered messages back and acking nothing under it until the server confirms it is still this instance's",
				gap.Round(time.Millisecond), m.fenceAfter(), shortID(suspect))})
		}
		return
	}
	m.mu.Lock()
	had := m.pinID
	m.pinID = ""
	m.doubted = ""
	if had != "" {
		m.fencedPin = had
	}
	m.mu.Unlock()
	m.answerLiveness("")
	if had == "" {
		return
	}
	m.emit(Event{Kind: EventFenced, PinID: had, Cause: CauseFenced, Reason: fmt.Sprintf(
		"frozen, starved or cut off from the server for %s (fence threshold %s, pinned TTL %s): a standby may have unpinned it or the server pinned another instance; handing buffered messages back and acking nothing delivered under pin %s",
		gap.Round(time.Millisecond), m.fenceAfter(), m.opts.PinnedTTL, shortID(had))})
	m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
}

// serverPin is the member consumer's pin id as the server says ("" when
// it cannot be asked).
func (m *Member) serverPin() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return ""
	}
	for _, pg := range cons.CachedInfo().PriorityGroups {
		if pg.Group == PriorityGroup {
			return pg.PinnedClientID
		}
	}
	return ""
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	return id
}

// lostPin forgets our pin id after the server refused it.
func (m *Member) lostPin(cause EventCause, reason string) {
	m.mu.Lock()
	had := m.pinID
	m.pinID = ""
	m.doubted = ""
	m.mu.Unlock()
	m.answerLiveness("")
	if had != "" {
		m.emit(Event{Kind: EventPinLost, PinID: had, Cause: cause, Reason: reason})
		m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
	}
}

// watchStatic follows a static group's KV entry: a deletion stops the
// instance cleanly, any change stops it with an error (static membership
// is fixed).
func (m *staticStrategy) watchStatic() {
	for {
		select {
		case <-m.done:
			return
		case e, ok := <-m.watcher.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // end of the initial value
			}
			switch e.Operation() {
			case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
				go m.stopFor(nil, CauseGroupDeleted)
				return
			}
			cfg, err := decodeStatic(e.Key(), e.Value())
			if err != nil {
				go m.stopFor(err, CauseConfigInvalid)
				return
			}
			if !cfg.Equal(m.static) {
				go m.stopFor(fmt.Errorf("%w: static group %s changed on the server (%v); static membership is fixed, restart against the new configuration", ErrConfigChanged, Key(m.stream, m.group), changedFrom(m.static, cfg)), CauseConfigChanged)
				return
			}
		}
	}
}

func (m *Member) emit(e Event) {
	if m.opts.OnEvent == nil && m.obs == nil {
		return
	}
	e.Time = time.Now()
	e.Stream, e.Group, e.Member = m.stream, m.group, m.member
	if e.Consumer == "" {
		e.Consumer = m.consumer
	}
	if e.Partitions == nil {
		m.mu.Lock()
		e.Partitions = slices.Clone(m.partitions)
		m.mu.Unlock()
	}
	if m.obs != nil && !m.isPartitionRuntime() {
		m.observeEvent(e)
	}
	if m.opts.OnEvent != nil {
		m.opts.OnEvent(e)
	}
}

// Stop stops the instance gracefully: no new message is taken, the message
// in hand is finished by the handler, and if this instance holds the pin it
// is released so a standby takes over at once. Stop waits for all that, so
// a handler must not call it: cancel the context given to the join instead.
func (m *Member) Stop() { m.stopFor(nil, CauseStopRequested) }

const reasonStopRequested = "stop requested"

// stop stops the instance for the stop cause named by reason (the words of
// stopReasons): the form gone.go's stop paths use.
func (m *Member) stop(err error, reason string) { m.finish(err, stopCauseOf(reason), reason) }

// stopFor stops the instance for cause, reporting it with its words.
func (m *Member) stopFor(err error, cause EventCause) { m.finish(err, cause, stopReasons[cause]) }

func (m *Member) finish(err error, cause EventCause, reason string) {
	m.once.Do(func() {
		m.withdrawPull()
		m.stopping.Store(true)
		m.cancel()
		m.kind.halt() // no rebinding behind our back
		how := releaseKeep
		if cause == CauseStopRequested || cause == CauseBatchFailed {
			how = releaseUnpin
		}
		if cause == CauseReleasedToRebalance {
			how = releaseHandOver
		}
		wasPinned := m.release(how)
		m.kind.stopped(wasPinned, cause)
		m.mu.Lock()
		m.stopErr = err
		m.stopCause = cause
		m.mu.Unlock()
		if m.watcher != nil {
			_ = m.watcher.Stop()
		}
		m.emit(Event{Kind: EventStopped, Err: err, Cause: cause, Reason: reason})
		close(m.done)
	})
	<-m.done
}

// withdrawPull withdraws the bound consumer's pull request (puller.cancel)
// before a stop hands anything back: from the moment the instance is
// stopping, what a handler or stage naks goes to the next instance, not
// back to this one.
func (m *Member) withdrawPull() {
	m.mu.Lock()
	b := m.bound
	m.mu.Unlock()
	if b != nil {
		b.puller.cancel()
	}
}

func (m *Member) unpin() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := m.c.js.Stream(ctx, m.cstream)
	if err != nil {
		return err
	}
	return s.UnpinConsumer(ctx, m.consumer, PriorityGroup)
}

// Done is closed when the instance has stopped.
func (m *Member) Done() <-chan struct{} { return m.done }

// Err is why the instance stopped: nil after Stop or a group deletion.
func (m *Member) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopErr
}

// StopCause is why the instance stopped (CauseStopRequested after Stop,
// CauseGroupDeleted, CauseConfigChanged…), or "" while it runs.
func (m *Member) StopCause() EventCause {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stopCause
}

// Wait blocks until the instance stops and returns Err.
func (m *Member) Wait() error {
	<-m.done
	return m.Err()
}

// Partitions are the partitions this member owns now.
func (m *Member) Partitions() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.partitions)
}

// PinID is the pin id this instance was last delivered under ("" when it
// is not, as far as it knows, the pinned instance). On a partition-layout
// group an instance may hold several pins, one per partition: PinID is
// the lowest partition's (see Pins).
func (m *Member) PinID() string {
	if m.layout != nil {
		return m.layout.firstPin()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinID
}

// Consumer is the name of the member's consumer ("" on a partition-layout
// group, whose instances read one consumer per partition: see Pins).
func (m *Member) Consumer() string { return m.consumer }
