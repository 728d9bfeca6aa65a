package cg

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Msg is a message handed to a member's handler: the stream's message with
// the partition token stripped from its subject.
type Msg struct {
	jetstream.Msg
	subject   string
	partition int
	pinID     string
	out       *msgOutcome // under a retry policy: what the handler asked for
	// ackBound bounds DoubleAckAsync's wait for a reply: the ack wait.
	ackBound time.Duration
}

// Subject is the message subject without the leading partition token.
func (m *Msg) Subject() string { return m.subject }

// Partition is the partition the message belongs to.
func (m *Msg) Partition() int { return m.partition }

// PinID is the pin id the server delivered the message under.
func (m *Msg) PinID() string { return m.pinID }

// Raw returns the underlying JetStream message, subject unstripped.
func (m *Msg) Raw() jetstream.Msg { return m.Msg }

// DoubleAckAsync acks the message and has the server confirm it, as
// DoubleAck does, without waiting for the confirmation: the handler may
// return at once and its concurrency slot takes other keys while the reply
// is outstanding. done is called exactly once, with nil when the server
// confirmed the ack, ErrFenced when the instance may no longer settle the
// message (nothing was sent), or the error the ack ended with; a timeout
// (no reply within the ack wait, or 5 s if shorter, with the ack sent
// again every 300 ms meanwhile) ends it with nats.ErrTimeout, and the ack
// may still have been applied, as with DoubleAck.
//
// Per-key order holds as with DoubleAck: on a member with Concurrency
// above 1 the message's key (its lane) stays held until done has returned,
// so no later message of the key is handled before this one's ack is
// confirmed, and an instance that stops waits for every reply in flight
// before it hands anything back. An ack that fails leaves the key held for
// the message's redelivery, as a nak does. done runs on a goroutine that
// every pipelined ack of the instance's consumer shares (the member's, or
// on the partition layout the partition's): keep it short, and never wait
// in it for other messages or for the instance to stop.
//
// Where the delivery stage cannot hold a key for a reply (one message at
// a time, batches, a retry policy, observers) DoubleAckAsync waits for the
// reply itself and calls done before it returns; with max ack pending 1 a
// serial member gains nothing from pipelining anyway, as the server sends
// the next message only once the ack is in.
func (m *Msg) DoubleAckAsync(done func(err error)) {
	var j jsMsg
	ok := true
	switch v := m.Msg.(type) {
	case *jsMsg:
		j = *v
	case jsMsg:
		j = v
	default:
		ok = false
	}
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), doubleAckTimeout)
		err := m.Msg.DoubleAck(ctx)
		cancel()
		done(err)
		return
	}
	j.doubleAckAsync(m.ackBound, done)
}

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

	// stages is what the delivery stages keep across bindings (stage.go).
	stages stageState
	// obs are JoinOptions.Observers' hooks (observe.go); nil without any.
	obs *observers

	// layout, on an instance of a partition-layout group, holds the
	// per-partition runtimes it runs (layout_member.go); posName, on one
	// of those, names its saved position in place of the member.
	layout  *layoutParent
	posName string

	// joinInfo is the group's stream as the join read it: the join's
	// checks (preflight, the lanes' key reader) look at this one reading
	// rather than asking the server again, a round trip each.
	joinInfo *jetstream.StreamInfo
	// joinKV is the bucket the join found the group's entry in, which the
	// instance then watches.
	joinKV jetstream.KeyValue

	// dyn runs dynamic membership (dynamic.go); dynClosed: the instance
	// has stopped, so none is started after.
	dyn       *dynamicMember
	dynClosed bool
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
	// acks sends DoubleAckAsync's acks without waiting for their replies,
	// when the stage holds keys for them (ackpipe.go); nil otherwise.
	acks *ackPipe
}

func (m *Member) join(ctx context.Context, h Handler, opts JoinOptions) (JoinOptions, error) {
	if err := stageOf(opts).handler(h); err != nil {
		return opts, err
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
	v, err := m.c.ServerVersion()
	if err != nil {
		return opts, err
	}
	if err := CheckServerVersion(v, false); err != nil {
		return opts, err
	}
	si, err := m.c.streamInfo(ctx, m.stream)
	if err != nil {
		return opts, err
	}
	m.joinInfo = si
	return opts, nil
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

// watchGroup has the instance follow its group's stored configuration in
// kv for as long as m.ctx lasts; when it cannot, m.ctx is cancelled.
func (m *Member) watchGroup(kv jetstream.KeyValue) error {
	var err error
	if m.watcher, err = kv.Watch(m.ctx, Key(m.stream, m.group)); err != nil {
		m.cancel()
		return fmt.Errorf("watch group %s: %w", Key(m.stream, m.group), err)
	}
	return nil
}

// started ends a join: it reports the instance joined (and a static
// member's first wait: standby until the server pins it, or nothing to
// read when its member owns no partitions), starts the kind's strategy
// and has ctx stop the instance.
func (m *Member) started(ctx context.Context, joined Event) {
	m.emit(joined)
	if m.kind.name() == KindStatic {
		if len(m.partitions) == 0 {
			m.emit(Event{Kind: EventWaiting, Reason: "member owns no partitions"})
		} else {
			m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
		}
	}
	m.kind.start()
	m.stopWith(ctx)
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
	if p := m.pipeAcks(b, stage); p != nil {
		defer p.close()
	}
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
// A new pin learnt late (the message may have waited while the instance
// stood still) is doubted until the server confirms it: on a consumer only
// cg reads, a standby unpins a pin that answered no liveness check for the
// soonest a frozen one is unpinned, and this instance answers for the pin
// only from now on.
func (m *Member) notePin(raw *nats.Msg, late bool) {
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
		if late {
			m.doubted = pid
		}
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
			if m.recheck(b, pid) {
				return false
			}
			return !m.nobodyPinned(pid)
		}
	}
	return false
}

// nobodyPinned reports whether the server, asked now, names no pin at all
// while this instance still holds pin (in doubt, not given up): then the
// handler's verdict on a message delivered under it is settled after all.
// No instance holds a pin, so none is being handed messages, and the
// message was handled here. This is what a consumer's new leader says
// (pins are not replicated) until it next delivers; and it delivers
// nothing while the member's window is full of what its old pin holds, so
// a message left unsettled here (a serial member's one) kept every
// instance waiting for the ack wait, and every key behind it.
func (m *Member) nobodyPinned(pin string) bool {
	if m.PinID() != pin {
		return false
	}
	server, reached := m.serverPinOK()
	return reached && server == "" && m.PinID() == pin
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
// stopReasons): the form the gone-consumer stop paths use.
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
		if unpinsOnStop(cause) {
			how = releaseUnpin
		}
		if cause == CauseReleasedToRebalance {
			how = releaseHandOver
		}
		wasPinned := m.release(how)
		m.kind.stopped(wasPinned, cause)
		m.leaveDynamic(cause)
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
	return m.c.unpinConsumer(ctx, m.cstream, m.consumer)
}

// unpinConsumer unpins whoever holds consumer's pin in the PCG priority
// group: the request jetstream's Stream.UnpinConsumer sends, without the
// stream info a Stream handle costs first (a round trip more in every
// stop and every takeover).
func (c *Client) unpinConsumer(ctx context.Context, stream, consumer string) error {
	if consumer == "" || strings.ContainsAny(consumer, ".*> \t\r\n") {
		return fmt.Errorf("invalid consumer name %q", consumer)
	}
	body, _ := json.Marshal(struct {
		Group string `json:"group"`
	}{PriorityGroup})
	msg, err := c.Conn().RequestWithContext(ctx, apiPrefix(c.js)+"CONSUMER.UNPIN."+stream+"."+consumer, body)
	if err != nil {
		return err
	}
	var resp struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return fmt.Errorf("unpin consumer %s on %s: %w", consumer, stream, err)
	}
	if resp.Error != nil {
		if resp.Error.ErrorCode == jetstream.JSErrCodeConsumerNotFound {
			return jetstream.ErrConsumerNotFound
		}
		return resp.Error
	}
	return nil
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
