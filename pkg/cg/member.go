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
	// EventStopped: the instance stopped; Err is nil for a clean stop.
	EventStopped EventKind = "stopped"
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
	Err        error     `json:"-"`
}

// Defaults of JoinOptions. The ack wait and the pinned TTL derived from it
// are the reference CLI's, so that cg and reference instances of one member
// create identical consumers and can stand by for each other.
const (
	DefaultAckWait       = 2 * time.Second
	DefaultMaxAckPending = 1
	minPinnedTTL         = time.Second
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
	// PullExpiry is how long each pull waits. Default: max(PinnedTTL/2, 1s),
	// so an idle pinned instance re-pulls well within its TTL.
	PullExpiry time.Duration
	// OnEvent receives state changes. It is called from the instance's
	// goroutines and must not block for long.
	OnEvent func(Event)
}

func (o JoinOptions) withDefaults() (JoinOptions, error) {
	if o.AckWait < 0 || o.PinnedTTL < 0 || o.PullExpiry < 0 || o.MaxAckPending < 0 {
		return o, errors.New("join options must not be negative")
	}
	if o.AckWait == 0 {
		o.AckWait = DefaultAckWait
	}
	if o.MaxAckPending == 0 {
		o.MaxAckPending = DefaultMaxAckPending
	}
	if o.PinnedTTL == 0 {
		o.PinnedTTL = max(o.AckWait, minPinnedTTL)
	}
	if o.PullExpiry == 0 {
		o.PullExpiry = max(o.PinnedTTL/2, minPinnedTTL)
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
	c        *Client
	stream   string
	group    string
	member   string
	consumer string
	opts     JoinOptions
	handler  Handler

	cfg        StaticConfig
	partitions []int

	ctx    context.Context // cancelled on Stop: tells the handler to wrap up
	cancel context.CancelFunc

	watcher  jetstream.KeyWatcher
	stopping atomic.Bool
	puller   *puller
	// work carries pulled messages to the handler loop. Messages are
	// handled serially, in delivery order; parallel per-partition lanes
	// would fan out from here, one loop per lane.
	work       chan *nats.Msg
	stopPull   chan struct{}
	pullDone   chan struct{}
	handleDone chan struct{}

	mu      sync.Mutex
	pinID   string
	stopErr error
	once    sync.Once
	done    chan struct{}
}

// JoinStatic starts an instance of member in a static group: it binds to
// (or creates) the member's pinned pull consumer and hands each message to
// h. It returns once the instance is pulling; watch Done for its end.
// Cancelling ctx stops the instance as Stop does.
func (c *Client) JoinStatic(ctx context.Context, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	if h == nil {
		return nil, errors.New("a message handler is required")
	}
	for _, n := range [][2]string{{"stream", stream}, {"group", group}, {"member", member}} {
		if err := ValidateName(n[0], n[1]); err != nil {
			return nil, err
		}
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	v, err := c.ServerVersion()
	if err != nil {
		return nil, err
	}
	if err := CheckServerVersion(v, false); err != nil {
		return nil, err
	}
	if _, err := c.streamInfo(ctx, stream); err != nil {
		return nil, err
	}
	cfg, _, err := c.getStatic(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	if !cfg.IsMember(member) {
		return nil, fmt.Errorf("%w: %q is not a member of static group %q (members: %v); static membership is fixed at creation", ErrMemberNotFound, member, group, cfg.MemberNames())
	}
	m := &Member{
		c: c, stream: stream, group: group, member: member,
		consumer: StaticConsumerName(group, member),
		opts:     opts, handler: h, cfg: cfg,
		partitions: cfg.Assignment().MemberPartitions(member),
		done:       make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())

	kv, err := c.bucket(ctx, StaticBucket)
	if err != nil {
		return nil, err
	}
	m.watcher, err = kv.Watch(m.ctx, Key(stream, group))
	if err != nil {
		return nil, fmt.Errorf("watch group %s: %w", Key(stream, group), err)
	}
	if len(m.partitions) > 0 {
		if err := m.bind(ctx); err != nil {
			_ = m.watcher.Stop()
			m.cancel()
			return nil, err
		}
	}
	m.emit(Event{Kind: EventJoined})
	if len(m.partitions) == 0 {
		m.emit(Event{Kind: EventWaiting, Reason: "member owns no partitions"})
	} else {
		m.emit(Event{Kind: EventWaiting, Reason: "standby until the server pins this instance"})
	}
	go m.watch()
	go func() {
		select {
		case <-ctx.Done():
			m.Stop()
		case <-m.done:
		}
	}()
	return m, nil
}

// consumerConfig is the member consumer's configuration.
func (m *Member) consumerConfig() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:        m.consumer,
		FilterSubjects: m.cfg.MemberFilters(m.member),
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        m.opts.AckWait,
		MaxAckPending:  m.opts.MaxAckPending,
		PriorityGroups: []string{PriorityGroup},
		PriorityPolicy: jetstream.PriorityPolicyPinned,
		PinnedTTL:      m.opts.PinnedTTL,
	}
}

func consumerFilters(cc jetstream.ConsumerConfig) []string {
	fs := slices.Clone(cc.FilterSubjects)
	if cc.FilterSubject != "" {
		fs = append(fs, cc.FilterSubject)
	}
	slices.Sort(fs)
	return fs
}

// compatible: same partitions, pinned in PCG. Other settings (ack wait,
// TTL) may differ: the first instance's consumer wins, so instances started
// with other flags, or by the reference library, still stand by together.
func compatible(have, want jetstream.ConsumerConfig) bool {
	return slices.Equal(consumerFilters(have), consumerFilters(want)) &&
		slices.Contains(have.PriorityGroups, PriorityGroup) &&
		have.PriorityPolicy == jetstream.PriorityPolicyPinned
}

// bind creates the member consumer, or binds to an existing compatible
// one, and starts pulling.
func (m *Member) bind(ctx context.Context) error {
	want := m.consumerConfig()
	cons, err := m.c.js.CreateConsumer(ctx, m.stream, want)
	if errors.Is(err, jetstream.ErrConsumerExists) {
		cons, err = m.c.js.Consumer(ctx, m.stream, m.consumer)
		if err == nil && !compatible(cons.CachedInfo().Config, want) {
			// A leftover from an earlier group of the same name.
			_, err = m.c.js.UpdateConsumer(ctx, m.stream, want)
		}
	}
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", m.consumer, m.stream, err)
	}
	m.puller, err = newPuller(m)
	if err != nil {
		return err
	}
	m.work = make(chan *nats.Msg, cap(m.puller.in))
	m.stopPull, m.pullDone, m.handleDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(m.pullDone)
		m.puller.run(m.stopPull, m.work)
	}()
	go m.handleLoop()
	return nil
}

// handleLoop hands each pulled message to the handler, in order. Once the
// instance is stopping it naks what is left instead, so the next pinned
// instance gets it at once.
func (m *Member) handleLoop() {
	defer close(m.handleDone)
	for {
		select {
		case raw := <-m.work:
			if m.stopping.Load() {
				_ = raw.Nak()
				continue
			}
			subject, p := StripPartition(raw.Subject)
			m.handler(m.ctx, &Msg{Msg: jsMsg{m: raw, nc: m.puller.nc}, subject: subject, partition: p, pinID: raw.Header.Get("Nats-Pin-Id")})
		case <-m.pullDone:
			for {
				select {
				case raw := <-m.work:
					_ = raw.Nak()
				default:
					return
				}
			}
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
	isNew := pid != m.pinID
	m.pinID = pid
	m.mu.Unlock()
	if isNew {
		m.emit(Event{Kind: EventPinned, PinID: pid})
	}
}

// lostPin forgets our pin id after the server refused it.
func (m *Member) lostPin(reason string) {
	m.mu.Lock()
	had := m.pinID
	m.pinID = ""
	m.mu.Unlock()
	if had != "" {
		m.emit(Event{Kind: EventPinLost, PinID: had, Reason: reason})
		m.emit(Event{Kind: EventWaiting, Reason: "standby until the server pins this instance"})
	}
}

// watch follows the group's KV entry: a deletion stops the instance
// cleanly, any change stops it with an error (static membership is fixed).
func (m *Member) watch() {
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
				m.stop(nil, "group deleted")
				return
			}
			cfg, err := decodeStatic(e.Key(), e.Value())
			if err != nil {
				m.stop(err, "stored configuration unusable")
				return
			}
			if !cfg.Equal(m.cfg) {
				m.stop(fmt.Errorf("%w: static group %s changed on the server (%v); static membership is fixed, restart against the new configuration", ErrConfigChanged, Key(m.stream, m.group), m.cfg.Diff(cfg)), "configuration changed")
				return
			}
		}
	}
}

func (m *Member) emit(e Event) {
	if m.opts.OnEvent == nil {
		return
	}
	e.Time = time.Now()
	e.Stream, e.Group, e.Member = m.stream, m.group, m.member
	if e.Consumer == "" {
		e.Consumer = m.consumer
	}
	if e.Partitions == nil {
		e.Partitions = m.partitions
	}
	m.opts.OnEvent(e)
}

// Stop stops the instance gracefully: no new message is taken, the message
// in hand is finished by the handler, and if this instance holds the pin it
// is released so a standby takes over at once. Stop waits for all that, so
// a handler must not call it: cancel the context given to JoinStatic instead.
func (m *Member) Stop() { m.stop(nil, reasonStopRequested) }

const reasonStopRequested = "stop requested"

func (m *Member) stop(err error, reason string) {
	m.once.Do(func() {
		m.stopping.Store(true)
		m.cancel()
		if m.puller != nil {
			// Ask for nothing more, but keep listening: whatever the server
			// sends until the pin is released is handed back, not lost.
			close(m.stopPull)
			<-m.pullDone
			<-m.handleDone // the message in hand is finished and acked
			m.mu.Lock()
			pin := m.pinID
			m.mu.Unlock()
			if m.puller.drain() && pin == "" {
				pin = "(pinned while stopping)"
			}
			if pin != "" && reason == reasonStopRequested {
				// Only the pinned instance releases: an unpin is not
				// addressed to a pin id, so a standby must never send one.
				if uerr := m.unpin(); uerr == nil {
					m.emit(Event{Kind: EventPinLost, PinID: pin, Reason: "released on stop"})
				}
				// Messages sent to us before the release arrive before its
				// reply: hand them back too.
				m.puller.drain()
			}
			m.puller.close()
		}
		m.mu.Lock()
		m.pinID = ""
		m.stopErr = err
		m.mu.Unlock()
		_ = m.watcher.Stop()
		m.emit(Event{Kind: EventStopped, Err: err, Reason: reason})
		close(m.done)
	})
}

func (m *Member) unpin() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := m.c.js.Stream(ctx, m.stream)
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

// Wait blocks until the instance stops and returns Err.
func (m *Member) Wait() error {
	<-m.done
	return m.Err()
}

// Partitions are the partitions this member owns.
func (m *Member) Partitions() []int { return slices.Clone(m.partitions) }

// PinID is the pin id this instance was last delivered under ("" when it
// is not, as far as it knows, the pinned instance).
func (m *Member) PinID() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pinID
}

// Consumer is the name of the member's consumer.
func (m *Member) Consumer() string { return m.consumer }
