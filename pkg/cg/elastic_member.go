package cg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// EventRebalanced: the member's partitions changed and the instance is
// pulling from its consumer with the new ones (elastic groups).
const EventRebalanced EventKind = "rebalanced"

// errFilterOverlap is the server's refusal of a work-queue consumer whose
// filters overlap another consumer's (JSConsumerWQConsumerNotUniqueErr).
const errFilterOverlap = 10100

// JoinElastic starts an instance of member in an elastic group. Unlike a
// static member it may start before it is added: it waits, says so, and
// starts pulling as soon as the group's configuration names it. It follows
// every membership change live: it lets go of the partitions it loses
// before their new owner takes them, picks up the partitions it gains as
// soon as their previous owner lets go, and keeps per-key order across the
// handoff (only the message in flight may be seen twice). A configuration
// value that does not parse or validate is reported and the last good one
// kept; a change of partitions, filters or buffer caps stops the instance
// with ErrConfigChanged; deleting the group stops it cleanly.
func (c *Client) JoinElastic(ctx context.Context, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	m := &Member{c: c, stream: stream, cstream: WorkStreamName(stream, group), group: group, member: member,
		consumer: member, handler: h, done: make(chan struct{})}
	es := &elasticStrategy{Member: m, kick: make(chan struct{}, 1), ctrlDone: make(chan struct{}), staleSeen: map[string]time.Time{}}
	m.kind = es
	opts, err := m.join(ctx, h, opts)
	if err != nil {
		return nil, err
	}
	if opts, err = opts.checkDynamic(KindElastic, group); err != nil {
		return nil, err
	}
	m.opts = opts
	sg, err := c.findGroup(ctx, KindElastic, stream, group)
	if err != nil {
		return nil, err
	}
	cfg, err := decodeElastic(sg.entry.Key(), sg.entry.Value())
	if err != nil {
		return nil, err
	}
	m.joinKV = sg.kv
	if err := m.setupPoison(ctx); err != nil {
		return nil, err
	}
	if err := CheckJoinElastic(stream, group, member, cfg); err != nil {
		return nil, err
	}
	if opts.Dynamic {
		if err := roomFor(cfg, group, member); err != nil {
			return nil, err
		}
	}
	if err := joinElasticPreflight(m.joinInfo, cfg); err != nil {
		return nil, err
	}
	if ws, err := c.js.Stream(ctx, m.cstream); err != nil {
		return nil, fmt.Errorf("%w: work stream %s of elastic group %q: %v; delete and recreate the group", ErrStreamNotFound, m.cstream, group, err)
	} else if ok, why := WorkStreamOwned(ws.CachedInfo(), stream, group, &cfg); !ok {
		return nil, notOwned("stream", m.cstream, fmt.Sprintf("elastic group %q on %s", group, stream), why, "the group cannot be consumed until it is removed")
	} else if err := workStreamJoinProblem(ws.CachedInfo(), stream, group, cfg); err != nil {
		return nil, err
	}
	es.elastic = cfg
	if cfg.LayoutOf() == LayoutPartition {
		return m.joinedDynamic(ctx)(c.joinLayout(ctx, m, KindElastic, cfg))
	}
	if err := m.prepareLanes(ctx, &cfg); err != nil {
		return nil, err
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	kv := m.joinKV
	if sg.bucket != ElasticBucket {
		if kv, err = c.bucket(ctx, ElasticBucket); err != nil {
			m.cancel()
			return nil, err
		}
	}
	if err := m.watchGroup(kv); err != nil {
		return nil, err
	}
	// Consumer lifecycle advisories of the work stream wake a waiting
	// instance the moment the consumer holding its partitions goes away.
	es.adv = make(chan *nats.Msg, 256)
	if sub, err := c.Conn().ChanSubscribe("$JS.EVENT.ADVISORY.CONSUMER.*."+m.cstream+".*", es.adv); err == nil {
		es.advisory = sub
	}
	m.started(ctx, Event{Kind: EventJoined})
	return m.joinedDynamic(ctx)(m, nil)
}

// joinedDynamic finishes a join with dynamic membership, when asked: a
// member that cannot add itself does not run.
func (m *Member) joinedDynamic(ctx context.Context) func(*Member, error) (*Member, error) {
	return func(j *Member, err error) (*Member, error) {
		if err != nil || !m.opts.Dynamic {
			return j, err
		}
		if err := m.startDynamic(ctx); err != nil {
			m.Stop()
			return nil, err
		}
		return m, nil
	}
}

// runElastic is the controller: it serialises configuration changes,
// advisories and retries, and reconciles the instance's binding with the
// member's partitions after each.
func (m *elasticStrategy) runElastic() {
	es, adv := m, m.adv
	defer close(es.ctrlDone)
	defer func() {
		if es.advisory != nil {
			_ = es.advisory.Unsubscribe()
		}
	}()
	var retry <-chan time.Time
	backoff := 20 * time.Millisecond
	again := func(d time.Duration) {
		if d <= 0 {
			retry, backoff = nil, 20*time.Millisecond
			return
		}
		retry = time.After(d)
	}
	for {
		select {
		case <-m.ctx.Done():
			return
		case e, ok := <-m.watcher.Updates():
			if !ok {
				return
			}
			apply, done := m.elasticUpdate(e, &m.elastic)
			if done {
				return
			}
			if apply {
				again(m.reconcile())
			}
		case <-adv:
			if m.waitingOn != "" {
				again(m.reconcile())
			}
		case <-es.kick:
			again(m.reconcile())
		case <-retry:
			d := m.reconcile()
			if d > 0 {
				// Back off while the same wait goes on, up to a second:
				// advisories usually wake us well before.
				backoff = min(max(backoff*2, d), time.Second)
				d = backoff
			}
			again(d)
		}
	}
}

// reconcile makes the binding match the member's partitions in the current
// configuration. It returns when to look again (0: nothing to wait for).
func (m *elasticStrategy) reconcile() time.Duration {
	m.mu.Lock()
	cfg := m.elastic
	b := m.bound
	m.mu.Unlock()
	want := cfg.MemberFilters(m.member)
	parts := cfg.Assignment().MemberPartitions(m.member)
	if b != nil && len(want) > 0 && slices.Equal(b.filters, want) {
		// Still right, unless the consumer went away under us.
		ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
		_, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
		cancel()
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return m.workStreamGone()
		}
		if !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return 0
		}
		m.release(releaseKeep)
		b = nil
	}
	if b != nil {
		// Let go first: the partitions we lose must be free before their
		// new owner can take them (work-queue filters never overlap), and
		// the ones we gain must start from their oldest message, which our
		// consumer may be past. So the pinned instance, once the message in
		// hand is acked, deletes the consumer; it is recreated below.
		m.release(releaseDelete)
	}
	m.mu.Lock()
	m.partitions = parts
	m.mu.Unlock()
	if len(want) == 0 {
		reason := "not a member of the group; waiting to be added"
		if cfg.IsMember(m.member) {
			reason = "member owns no partitions"
		}
		m.setWaiting(reason)
		return 0
	}
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err == nil && !groupConsumer(cons.CachedInfo().Config, m.stream, m.group, cfg.MaxMembers) {
		// Not this group's: never join, change or delete it.
		_, why := MemberConsumerOwned(cons.CachedInfo().Config, KindElastic, m.stream, m.group, m.member, want)
		m.setWaiting(notOwned("consumer", m.consumer+" on "+m.cstream, fmt.Sprintf("elastic group %q on %s (member %q)", m.group, m.stream, m.member), why, "remove it to let this member consume").Error())
		return time.Second
	}
	switch {
	case err == nil && compatible(cons.CachedInfo().Config, want):
		if err := m.ackPendingProblem(cons.CachedInfo().Config); err != nil {
			m.setWaiting(err.Error())
			return time.Second
		}
		return m.attachElastic(want, parts)
	case err == nil:
		// Our consumer with stale partitions: whoever is pinned deletes it
		// after acking the message in hand. With nothing in hand, anyone
		// may; if the pinned instance is gone, we do after the ack wait.
		ci := cons.CachedInfo()
		if ci.NumAckPending > 0 && !m.staleTooLong(m.consumer) {
			m.setWaiting("waiting for the pinned instance to finish its message and let go of the old partitions")
			return 50 * time.Millisecond
		}
		m.deleteConsumerIf(ctx, m.consumer, ci.Config)
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return m.workStreamGone()
	case m.ctx.Err() != nil:
		return 0
	default:
		m.emit(Event{Kind: EventWarning, Err: err, Reason: "looking up consumer: " + err.Error()})
		return 250 * time.Millisecond
	}
	_, err = m.c.createConsumer(ctx, m.cstream, m.consumerConfig(want))
	var apiErr *jetstream.APIError
	switch {
	case err == nil:
		return m.attachElastic(want, parts)
	case errors.Is(err, jetstream.ErrConsumerExists):
		return 10 * time.Millisecond // another instance made it just now
	case errors.As(err, &apiErr) && apiErr.ErrorCode == errFilterOverlap:
		if m.clearStale(ctx, cfg, want) {
			return 10 * time.Millisecond
		}
		m.setWaiting("waiting for the previous owner to let go of partitions " + partition.Ranges(parts))
		return 100 * time.Millisecond
	case m.ctx.Err() != nil:
		return 0
	default:
		m.emit(Event{Kind: EventWarning, Err: err, Reason: "creating consumer: " + err.Error()})
		return 250 * time.Millisecond
	}
}

func (m *elasticStrategy) attachElastic(want []string, parts []int) time.Duration {
	if m.stopping.Load() {
		return 0
	}
	if err := m.attach(want); err != nil {
		m.emit(Event{Kind: EventWarning, Err: err, Reason: err.Error()})
		return 250 * time.Millisecond
	}
	delete(m.staleSeen, m.consumer)
	m.waitingOn = ""
	m.emit(Event{Kind: EventRebalanced, Partitions: parts, Reason: "pulling partitions " + partition.Ranges(parts)})
	m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
	return 0
}

func (m *elasticStrategy) setWaiting(reason string) {
	if m.waitingOn == reason {
		return
	}
	m.waitingOn = reason
	m.emit(Event{Kind: EventWaiting, Reason: reason})
}

// staleTooLong reports whether consumer name has been seen with stale
// partitions for longer than the ack wait: its pinned instance is gone.
func (m *elasticStrategy) staleTooLong(name string) bool {
	first, ok := m.staleSeen[name]
	if !ok {
		m.staleSeen[name] = time.Now()
		return false
	}
	return time.Since(first) > m.opts.AckWait+time.Second
}

// deleteConsumerIf deletes consumer name if it still has the given
// configuration's filters (not one an instance has just recreated).
func (m *elasticStrategy) deleteConsumerIf(ctx context.Context, name string, seen jetstream.ConsumerConfig) bool {
	cons, err := m.c.js.Consumer(ctx, m.cstream, name)
	if err != nil || !sameFilters(consumerFilters(cons.CachedInfo().Config), consumerFilters(seen)) {
		return false
	}
	m.mu.Lock()
	n := m.elastic.MaxMembers
	m.mu.Unlock()
	if !groupConsumer(cons.CachedInfo().Config, m.stream, m.group, n) {
		return false // not the group's: never deleted
	}
	if err := m.c.js.DeleteConsumer(ctx, m.cstream, name); err != nil {
		return false
	}
	delete(m.staleSeen, name)
	return true
}

// clearStale deletes consumers on the work stream that hold some of our
// partitions but no longer should: those of members dropped from the
// group, and those whose partitions changed with nothing in hand (or whose
// pinned instance is gone). It reports whether it deleted any.
func (m *elasticStrategy) clearStale(ctx context.Context, cfg ElasticConfig, want []string) bool {
	s, err := m.c.js.Stream(ctx, m.cstream)
	if err != nil {
		return false
	}
	mine := map[string]bool{}
	for _, f := range want {
		p, _, _ := strings.Cut(f, ".")
		mine[p] = true
	}
	deleted := false
	for ci := range s.ListConsumers(ctx).Info() {
		if ci.Name == m.consumer || !groupConsumer(ci.Config, m.stream, m.group, cfg.MaxMembers) {
			continue
		}
		overlaps := false
		for _, f := range consumerFilters(ci.Config) {
			if p, _, _ := strings.Cut(f, "."); mine[p] {
				overlaps = true
				break
			}
		}
		if !overlaps {
			continue
		}
		stale := !cfg.IsMember(ci.Name) || !sameFilters(consumerFilters(ci.Config), cfg.MemberFilters(ci.Name))
		if !stale {
			continue
		}
		if cfg.IsMember(ci.Name) && ci.NumAckPending > 0 && !m.staleTooLong(ci.Name) {
			continue // its pinned instance is finishing a message
		}
		if m.deleteConsumerIf(ctx, ci.Name, ci.Config) {
			deleted = true
		}
	}
	return deleted
}

// elasticUpdate reads one update of an elastic group's stored
// configuration as a running instance's controller does, against the
// configuration it follows, *cur (guarded by m.mu): done when the group
// was deleted or changed shape (the instance is stopping); apply when the
// update is the membership to follow now, stored in *cur; neither for an
// entry to ignore.
func (m *Member) elasticUpdate(e jetstream.KeyValueEntry, cur *ElasticConfig) (apply, done bool) {
	if e == nil {
		return false, false
	}
	switch e.Operation() {
	case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
		go m.stopFor(nil, CauseGroupDeleted)
		return false, true
	}
	cfg, err := decodeElastic(e.Key(), e.Value())
	if err != nil {
		m.emit(Event{Kind: EventWarning, Err: err, Reason: "ignoring an unusable configuration, keeping the last good one: " + err.Error()})
		return false, false
	}
	m.mu.Lock()
	was := *cur
	m.mu.Unlock()
	if !was.SameShape(cfg) {
		go m.stopFor(fmt.Errorf("%w: elastic group %s changed %s; these never change on a live group: delete and recreate it", ErrConfigChanged, Key(m.stream, m.group), strings.Join(was.ShapeDiff(cfg), ", ")), CauseConfigChanged)
		return false, true
	}
	m.mu.Lock()
	*cur = cfg
	m.mu.Unlock()
	return true, false
}
