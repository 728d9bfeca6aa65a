package cg

import (
	"context"
	"fmt"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// layoutInfo fills gi's members for a partition-layout group from the
// consumers of its partitions on cstream (listed once: a group of many
// partitions costs one listing, not a request per partition), and returns
// each partition's consumer for the lag reads. A consumer with a
// partition's name that is not the partition's own (PartitionConsumerOwned)
// is left out: check reports it.
func (c *Client) layoutInfo(ctx context.Context, gi *health.GroupInfo, k Kind, cstream string, cfg health.GroupConfig) (map[int]*jetstream.ConsumerInfo, error) {
	gi.Layout = string(LayoutPartition)
	s, err := c.js.Stream(ctx, cstream)
	if err != nil {
		return nil, fmt.Errorf("stream %s: %w", cstream, err)
	}
	byName := map[string]*jetstream.ConsumerInfo{}
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		byName[ci.Name] = ci
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("list consumers of %s: %w", cstream, err)
	}
	parts := map[int]*jetstream.ConsumerInfo{}
	for p := range cfg.PartitionCount() {
		ci := byName[PartitionConsumerName(gi.Group, p)]
		if ci == nil {
			continue
		}
		if ok, _ := PartitionConsumerOwned(ci.Config, k, gi.Stream, gi.Group, p); ok {
			parts[p] = ci
		}
	}
	l := newLayout(cfg)
	for _, m := range cfg.MemberNames() {
		ms := health.MemberStatus{Member: m, Partitions: l.parts[m], Filters: l.memberFilters(cfg, m)}
		if ms.Partitions == nil {
			ms.Partitions = []int{}
		}
		var lag health.Lag
		for _, p := range ms.Partitions {
			pc := health.PartitionConsumer{Partition: p, Consumer: PartitionConsumerName(gi.Group, p), Owner: m}
			if ci := parts[p]; ci != nil {
				pc.Exists = true
				pc.Waiting, pc.Pending, pc.AckPending, pc.AckFloor = ci.NumWaiting, ci.NumPending, ci.NumAckPending, ci.AckFloor.Stream
				for _, pg := range ci.PriorityGroups {
					if pg.Group == PriorityGroup && pg.PinnedClientID != "" {
						pc.Pinned, pc.PinID, pc.PinnedSince = true, pg.PinnedClientID, pg.PinnedTS
						if !ms.Pinned || pg.PinnedTS.Before(ms.PinnedSince) {
							ms.PinnedSince = pg.PinnedTS
						}
					}
				}
				ms.ConsumerExists = true
				ms.Active = ms.Active || ci.NumWaiting > 0
				ms.Waiting = max(ms.Waiting, ci.NumWaiting)
				ms.Pending += ci.NumPending
				ms.AckPending += ci.NumAckPending
				ms.Delivered = max(ms.Delivered, ci.Delivered.Stream)
				ms.DeliveredConsumerSeq += ci.Delivered.Consumer
				ms.AckFloorConsumerSeq += ci.AckFloor.Consumer
				if ms.AckFloor == 0 || ci.AckFloor.Stream < ms.AckFloor {
					ms.AckFloor = ci.AckFloor.Stream
				}
				lag.Pending += ci.NumPending + uint64(max(ci.NumAckPending, 0))
			}
			if pc.Pinned && !ms.Pinned {
				ms.Pinned, ms.PinID = true, pc.PinID
			}
			ms.PartitionConsumers = append(ms.PartitionConsumers, pc)
		}
		if ms.ConsumerExists {
			ms.Lag = &lag
		}
		ms.Standbys = ms.Waiting
		if ms.Pinned && ms.Standbys > 0 {
			ms.Standbys--
		}
		gi.Members = append(gi.Members, ms)
	}
	return parts, nil
}

// layoutStepDown unpins every pinned consumer of the member's partitions:
// the member's instances then stand by for all of them, and the server
// pins one on its next pull (another instance when there is one).
func (c *Client) layoutStepDown(ctx context.Context, cstream string, ms health.MemberStatus) (StepDownResult, error) {
	res := StepDownResult{Member: ms.Member, PrevPinID: ms.PinID}
	if nothing, why := notPinned(ms); nothing {
		res.NothingPinned, res.Why = true, why
		return res, nil
	}
	s, err := c.js.Stream(ctx, cstream)
	if err != nil {
		return res, err
	}
	for _, pc := range ms.PartitionConsumers {
		if !pc.Pinned {
			continue
		}
		if err := s.UnpinConsumer(ctx, pc.Consumer, PriorityGroup); err != nil {
			return res, fmt.Errorf("unpin %s: %w", pc.Consumer, err)
		}
		res.Consumers = append(res.Consumers, pc.Consumer)
	}
	if len(res.Consumers) > 0 {
		res.Consumer = res.Consumers[0]
	}
	return res, nil
}
