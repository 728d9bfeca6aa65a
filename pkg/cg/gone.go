package cg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// Members whose consumer or work stream is deleted under them (a `nats
// consumer rm`, a `nats stream rm`) must not stall in silence. The pull
// loop sees it first: its request is answered 409 "Consumer Deleted", and
// every later one 503 (no responders). It kicks the member, which looks
// at the server:
//
//   - static: when the group's stored configuration is still there and
//     unchanged, the member consumer is recreated, resuming just after the
//     member's saved position (positions.go), as after an inactivity
//     removal; when the group was deleted the instance stops cleanly; when
//     the stream itself is gone it stops with ErrConsumerGone.
//   - elastic: a deleted member consumer is recreated by reconcile as in
//     a rebalance. A deleted work stream cannot be recreated by a member
//     (it would re-source the origin stream from its start): the instance
//     stops with ErrWorkStreamGone, naming the repair (re-run create).

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

// workStreamGone stops an elastic instance whose work stream was deleted:
// cleanly when the group itself was deleted, else with ErrWorkStreamGone.
func (m *elasticStrategy) workStreamGone() time.Duration {
	ctx, cancel := context.WithTimeout(m.ctx, 5*time.Second)
	defer cancel()
	if _, _, err := m.c.getElastic(ctx, m.stream, m.group); errors.Is(err, ErrGroupNotFound) {
		go m.stop(nil, "group deleted")
		return 0
	}
	go m.stop(&health.Error{Err: ErrWorkStreamGone,
		Fix: fmt.Sprintf("re-run the group's create with its partitions and filters (it rebuilds the work stream, re-sourcing %s from its start, so handled messages come again), or delete the group", m.stream),
		Remedy: health.Remedy{Code: health.RemedyRebuildWorkStream, Kind: KindElastic.String(), Stream: m.stream, Group: m.group,
			Lead: fmt.Sprintf("work stream %s of elastic group %s was deleted; a member cannot recreate it: ", m.cstream, m.group)}}, "work stream deleted")
	return 0
}
