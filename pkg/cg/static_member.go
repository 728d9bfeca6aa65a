package cg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// The static strategy: a member of a static group reads a fixed set of
// partitions through its one durable consumer; any change of the group's
// stored configuration stops the instance, its deletion stops it cleanly,
// and a consumer deleted under it is recreated where the member left off
// (positions.go). elastic_member.go is the other kind's.

// staticStrategy is a static member's: a fixed set of partitions, any
// change of the group stops the instance, a deleted consumer is recreated
// where the member left off (guardStatic below, positions.go).
type staticStrategy struct {
	*Member
	static  StaticConfig
	gone    chan struct{} // the consumer may have been deleted (guardStatic)
	resumed string        // how a recreated consumer resumed
}

func (m *staticStrategy) name() Kind { return KindStatic }

func (m *staticStrategy) shape(cc *jetstream.ConsumerConfig) {
	cc.Durable = m.consumer
	// Not forever: see positions.go.
	cc.InactiveThreshold = m.opts.InactiveThreshold
}

func (m *staticStrategy) start() {
	go m.watchStatic()
	go m.guardStatic()
}

func (m *staticStrategy) lookAgain() { m.kickStatic() }

func (m *staticStrategy) halt() {}

func (m *staticStrategy) stopped(wasPinned bool, cause EventCause) {
	if wasPinned && cause == CauseStopRequested {
		var none uint64
		m.savePosition(&none)
	}
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
	if _, err := opts.checkDynamic(KindStatic, group); err != nil {
		return nil, err
	}
	sg, err := c.findGroup(ctx, KindStatic, stream, group)
	if err != nil {
		return nil, err
	}
	cfg, err := decodeStatic(sg.entry.Key(), sg.entry.Value())
	if err != nil {
		return nil, err
	}
	m.joinKV = sg.kv
	if err := m.setupPoison(ctx); err != nil {
		return nil, err
	}
	if !cfg.IsMember(member) {
		return nil, fmt.Errorf("%w: %q is not a member of static group %q (members: %v); static membership is fixed at creation", ErrMemberNotFound, member, group, cfg.MemberNames())
	}
	if err := CheckJoinStatic(stream, group, member, cfg); err != nil {
		return nil, err
	}
	if err := joinStaticPreflight(m.joinInfo, cfg); err != nil {
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

	kv := m.joinKV
	if sg.bucket != StaticBucket {
		if kv, err = c.bucket(ctx, StaticBucket); err != nil {
			m.cancel()
			return nil, err
		}
	}
	if err := m.watchGroup(kv); err != nil {
		return nil, err
	}
	if filters := cfg.MemberFilters(member); len(filters) > 0 {
		if err := st.bindStatic(ctx, filters); err != nil {
			_ = m.watcher.Stop()
			m.cancel()
			return nil, err
		}
	}
	m.started(ctx, Event{Kind: EventJoined, Reason: st.resumed})
	return m, nil
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
		cons, err = m.c.createConsumer(ctx, m.cstream, create)
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
	m.mu.Lock()
	b := m.bound // nil already when a stop came as soon as it was attached
	m.mu.Unlock()
	if b != nil {
		go m.keepPosition(b)
	}
	return nil
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

// kickStatic asks a static instance's guard to look at its consumer.
func (m *staticStrategy) kickStatic() {
	if m.gone == nil {
		return
	}
	select {
	case m.gone <- struct{}{}:
	default:
	}
}

// guardStatic runs for the life of a static instance: on a kick it checks
// that the member consumer still exists, and recreates it or stops.
func (m *staticStrategy) guardStatic() {
	for {
		select {
		case <-m.done:
			return
		case <-m.ctx.Done():
			return
		case <-m.gone:
		}
		if m.stopping.Load() {
			return
		}
		if m.checkStaticConsumer() {
			return
		}
	}
}

// checkStaticConsumer acts on a missing member consumer; it reports
// whether the instance is stopping.
func (m *staticStrategy) checkStaticConsumer() (stopped bool) {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	_, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	switch {
	case err == nil:
		return false // still there (or another instance recreated it)
	case errors.Is(err, jetstream.ErrStreamNotFound):
		go m.stop(&health.Error{Err: ErrConsumerGone, Fix: "recreate the stream and the group, or delete the group",
			Remedy: health.Remedy{Code: health.RemedyRecreateStreamAndGroup, Kind: KindStatic.String(), Stream: m.stream, Group: m.group, Member: m.member,
				Lead: fmt.Sprintf("stream %s was deleted under static member %s of group %s (its consumer %s with it); ", m.cstream, m.member, m.group, m.consumer)}}, "stream deleted")
		return true
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return false // cannot tell now; the next refused pull kicks again
	}
	cfg, _, err := m.c.getStatic(ctx, m.stream, m.group)
	switch {
	case errors.Is(err, ErrGroupNotFound):
		go m.stop(nil, "group deleted")
		return true
	case err != nil:
		if m.ctx.Err() != nil {
			return true
		}
		m.emit(Event{Kind: EventWarning, Err: err, Reason: "member consumer " + m.consumer + " was deleted; reading the group to recreate it: " + err.Error()})
		return false
	case !cfg.Equal(m.static):
		go m.stop(fmt.Errorf("%w: static group %s changed on the server (%v); static membership is fixed, restart against the new configuration", ErrConfigChanged, Key(m.stream, m.group), changedFrom(m.static, cfg)), "configuration changed")
		return true
	}
	// Safe to recreate: the group is still the one this instance joined.
	filters := cfg.MemberFilters(m.member)
	m.release(releaseKeep)
	m.mu.Lock()
	m.resumed = ""
	m.mu.Unlock()
	if err := m.bindStatic(ctx, filters); err != nil {
		go m.stop(&health.Error{Err: ErrConsumerGone, Fix: "start the member again",
			Remedy: health.Remedy{Code: health.RemedyRestartMember, Kind: KindStatic.String(), Stream: m.stream, Group: m.group, Member: m.member,
				Lead: fmt.Sprintf("member consumer %s on %s was deleted under static member %s and could not be recreated: %v; ", m.consumer, m.cstream, m.member, err)}}, "member consumer deleted")
		return true
	}
	if m.stopping.Load() {
		// Stopped while recreating: let go of what was just bound.
		m.release(releaseKeep)
		return true
	}
	m.mu.Lock()
	how := m.resumed
	m.mu.Unlock()
	if how == "" {
		how = "recreated by another instance, or no saved position: it starts at its deliver policy"
	}
	m.emit(Event{Kind: EventWarning, Reason: "member consumer " + m.consumer + " was deleted on the server; recreated it (" + how + ")"})
	m.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
	return false
}
