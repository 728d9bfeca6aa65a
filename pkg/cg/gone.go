package cg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
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
