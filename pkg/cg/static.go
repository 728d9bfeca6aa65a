package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// maxConsumerName is the server's limit on a consumer name.
const maxConsumerName = 255

// CreateStaticResult tells what CreateStatic did.
type CreateStaticResult struct {
	Config StaticConfig
	// Created is false when an identical group already existed.
	Created bool
	// Transform is the stream's partitioning transform the group rests on.
	Transform partition.PartitionTransform
}

// stream returns the stream's info or ErrStreamNotFound.
func (c *Client) streamInfo(ctx context.Context, stream string) (*jetstream.StreamInfo, error) {
	if err := ValidateName("stream", stream); err != nil {
		return nil, err
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, fmt.Errorf("%w: %q", ErrStreamNotFound, stream)
		}
		return nil, fmt.Errorf("look up stream %q: %w", stream, err)
	}
	return s.CachedInfo(), nil
}

// StreamPartitioning returns the stream's subject transform when its
// destination starts with {{partition(N,...)}}, or ErrStreamNotReady saying
// what the stream has instead.
func StreamPartitioning(si *jetstream.StreamInfo) (partition.PartitionTransform, error) {
	st := si.Config.SubjectTransform
	if st == nil || st.Destination == "" {
		return partition.PartitionTransform{}, &health.Error{Err: ErrStreamNotReady, Fix: "source 'orders.*' to destination '{{partition(10,1)}}.orders.{{wildcard(1)}}'",
			Remedy: health.Remedy{Code: health.RemedyStreamTransformExample, Kind: KindStatic.String(), Stream: si.Config.Name,
				Lead: fmt.Sprintf("%v: stream %q has no subject transform; static groups need one whose destination starts with {{partition(N,...)}}, e.g. ", ErrStreamNotReady, si.Config.Name),
				Tail: " (or use an elastic group, which works on any stream)"}}
	}
	pt, ok, err := partition.ParsePartitionTransform(st.Source, st.Destination)
	if err != nil {
		return pt, fmt.Errorf("%w: stream %q transform %q: %v", ErrStreamNotReady, si.Config.Name, st.Destination, err)
	}
	if !ok {
		return pt, fmt.Errorf("%w: stream %q transform destination %q does not start with {{partition(N,...)}}; make the partition token the first token of the destination", ErrStreamNotReady, si.Config.Name, st.Destination)
	}
	return pt, nil
}

// CreateStatic creates a static group over a partition-stamped stream.
// Everything is checked before anything is written. Re-running an identical
// create succeeds with Created false; a different one fails with
// ErrGroupExists naming what differs.
func (c *Client) CreateStatic(ctx context.Context, stream, group string, cfg StaticConfig) (CreateStaticResult, error) {
	res := CreateStaticResult{Config: cfg}
	if err := ValidateName("stream", stream); err != nil {
		return res, err
	}
	if err := ValidateName("group", group); err != nil {
		return res, err
	}
	cfg.Layout = cfg.Layout.stored()
	res.Config = cfg
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	if cfg.LayoutOf() == LayoutPartition {
		if n := len(PartitionConsumerName(group, cfg.MaxMembers-1)); n > maxConsumerName {
			return res, invalid("group name", strconv.Quote(group[:32]+"..."), "makes partition consumer names %d bytes long; the server allows %d: shorten the group name", n, maxConsumerName)
		}
	}
	for _, m := range cfg.MemberNames() {
		if n := len(StaticConsumerName(group, m)); n > maxConsumerName {
			return res, invalid("member name", strconv.Quote(m), "makes consumer name %q %d bytes long; the server allows %d: shorten the group or member name", StaticConsumerName(group, m)[:32]+"...", n, maxConsumerName)
		}
	}
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return res, err
	}
	if err := staticPreflight(si, cfg, false); err != nil {
		return res, err
	}
	pt, err := StreamPartitioning(si)
	if err != nil {
		return res, err
	}
	res.Transform = pt
	if pt.Partitions != cfg.MaxMembers {
		return res, fmt.Errorf("%w: stream %q partitions into %d ({{partition(%d,...)}}) but max-members is %d; they must be equal", ErrStreamNotReady, stream, pt.Partitions, pt.Partitions, cfg.MaxMembers)
	}
	v, err := c.ServerVersion()
	if err != nil {
		return res, err
	}
	if err := CheckServerVersion(v, len(pt.Wildcards) == 0); err != nil {
		return res, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return res, err
	}
	if err := c.otherLayoutHas(ctx, KindStatic, stream, group, cfg.Layout); err != nil {
		return res, err
	}
	if err := c.checkStaticNames(ctx, stream, group, cfg); err != nil {
		return res, err
	}
	kv, err := c.bucketFor(ctx, KindStatic.LayoutBucket(cfg.Layout), si.Config.Replicas)
	if err != nil {
		return res, err
	}
	if err := c.EnsurePoisonBucket(ctx, si.Config.Replicas); err != nil {
		return res, err
	}
	if rev, err := kv.Create(ctx, Key(stream, group), raw); err == nil {
		if err := c.settleStaticClash(ctx, kv, stream, group, cfg, rev); err != nil {
			return res, err
		}
		res.Created = true
		return res, c.ensurePositions(ctx, si.Config.Replicas)
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return res, fmt.Errorf("store group %s: %w", Key(stream, group), err)
	}
	existing, _, err := c.getStatic(ctx, stream, group)
	if err != nil {
		return res, err
	}
	if existing.Equal(cfg) {
		res.Config = existing
		return res, c.ensurePositions(ctx, si.Config.Replicas)
	}
	return res, fmt.Errorf("%w: static group %q on %q has %s; delete it first to recreate", ErrGroupExists, group, stream, strings.Join(existing.Diff(cfg), ", "))
}

// StaticConfig returns a static group's stored configuration.
func (c *Client) StaticConfig(ctx context.Context, stream, group string) (StaticConfig, error) {
	cfg, _, err := c.getStatic(ctx, stream, group)
	return cfg, err
}

// fillConfig sets the configuration-derived fields of gi. (A function, not
// a method: GroupInfo is health.GroupInfo.)
func fillConfig(gi *health.GroupInfo, cfg health.GroupConfig) {
	gi.Config, gi.Partitions, gi.Mode = cfg, cfg.PartitionCount(), cfg.Mode()
	gi.Filters = cfg.SubjectFilters()
	gi.Owners = cfg.Assignment().Owner
}

func memberStatus(member string, partitions []int, filters []string, consumer string, ci *jetstream.ConsumerInfo) health.MemberStatus {
	ms := health.MemberStatus{Member: member, Partitions: partitions, Consumer: consumer, Filters: filters}
	if ms.Partitions == nil {
		ms.Partitions = []int{}
	}
	ms.Unusable = ConsumerNameProblem(consumer)
	if ci == nil {
		return ms
	}
	ms.ConsumerExists = true
	ms.Waiting = ci.NumWaiting
	ms.Active = ci.NumWaiting > 0
	ms.Pending = ci.NumPending
	ms.AckPending = ci.NumAckPending
	ms.Delivered = ci.Delivered.Stream
	ms.AckFloor = ci.AckFloor.Stream
	ms.DeliveredConsumerSeq = ci.Delivered.Consumer
	ms.AckFloorConsumerSeq = ci.AckFloor.Consumer
	for _, pg := range ci.PriorityGroups {
		if pg.Group == PriorityGroup && pg.PinnedClientID != "" {
			ms.Pinned = true
			ms.PinID = pg.PinnedClientID
			ms.PinnedSince = pg.PinnedTS
		}
	}
	ms.Standbys = ms.Waiting
	if ms.Pinned && ms.Standbys > 0 {
		ms.Standbys--
	}
	return ms
}

// consumerInfo returns nil, nil when the consumer does not exist.
func (c *Client) consumerInfo(ctx context.Context, stream, consumer string) (*jetstream.ConsumerInfo, error) {
	if ConsumerNameProblem(consumer) != "" {
		return nil, nil // no such consumer can exist; memberStatus says why
	}
	cons, err := c.js.Consumer(ctx, stream, consumer)
	if err != nil {
		if errors.Is(err, jetstream.ErrConsumerNotFound) || badServerName(err) {
			return nil, nil // a name the server cannot have: no such consumer
		}
		return nil, fmt.Errorf("consumer %s on %s: %w", consumer, stream, err)
	}
	return cons.CachedInfo(), nil
}

// staticInfo reads a static group's configuration, member states and lag
// per member and per partition.
func (c *Client) staticInfo(ctx context.Context, stream, group string, scope lagScope) (health.GroupInfo, error) {
	gi := health.GroupInfo{Kind: KindStatic.String(), Stream: stream, Group: group}
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return gi, err
	}
	cfg, _, err := c.getStatic(ctx, stream, group)
	if err != nil {
		return gi, err
	}
	fillConfig(&gi, cfg)
	if cfg.LayoutOf() == LayoutPartition {
		parts, err := c.layoutInfo(ctx, &gi, KindStatic, stream, cfg)
		if err != nil {
			return gi, err
		}
		c.fillLag(ctx, &gi, lagInput{stream: stream, si: si, parts: parts, static: true, group: group, origin: stream}, scope)
		return gi, ctx.Err()
	}
	l := newLayout(cfg)
	cis := map[string]*jetstream.ConsumerInfo{}
	for _, m := range cfg.MemberNames() {
		name := StaticConsumerName(group, m)
		ci, err := c.consumerInfo(ctx, stream, name)
		if err != nil {
			return gi, err
		}
		cis[m] = ci
		gi.Members = append(gi.Members, memberStatus(m, l.parts[m], l.memberFilters(cfg, m), name, ci))
	}
	c.fillLag(ctx, &gi, lagInput{stream: stream, si: si, cis: cis, static: true, group: group, origin: stream}, scope)
	return gi, ctx.Err() // a cancelled info is cut short, not complete
}

// StepDownResult tells which pin a step-down released.
type StepDownResult struct {
	Member    string `json:"member"`
	Consumer  string `json:"consumer"`
	PrevPinID string `json:"previous_pin_id"`
	// Consumers, on a partition-layout group, are the partition consumers
	// unpinned (Consumer is the first of them).
	Consumers []string `json:"consumers,omitempty"`
	// NothingPinned: no instance was pinned (none runs, or the member has
	// no consumer yet), so there was nothing to release. The wanted state
	// holds; it is not an error, so stepping down twice succeeds.
	NothingPinned bool `json:"nothing_pinned,omitempty"`
	// Why says, when NothingPinned, why no instance was pinned.
	Why string `json:"why,omitempty"`
	// Waiting is how many pull requests waited on the member's consumer
	// when it was unpinned: with none, no instance was pulling (the pinned
	// one stopped or froze without a standby), and the server pins
	// whichever instance pulls next.
	Waiting int `json:"waiting"`
}

func (c *Client) stepDown(ctx context.Context, stream string, ms health.MemberStatus) (StepDownResult, error) {
	if len(ms.PartitionConsumers) > 0 {
		return c.layoutStepDown(ctx, stream, ms)
	}
	res := StepDownResult{Member: ms.Member, Consumer: ms.Consumer, PrevPinID: ms.PinID, Waiting: ms.Waiting}
	if nothing, why := notPinned(ms); nothing {
		res.NothingPinned, res.Why = true, why
		return res, nil
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return res, err
	}
	if err := s.UnpinConsumer(ctx, ms.Consumer, PriorityGroup); err != nil {
		return res, fmt.Errorf("unpin %s: %w", ms.Consumer, err)
	}
	return res, nil
}

// DeleteResult lists what a delete removed.
type DeleteResult struct {
	Key        string   `json:"key"`
	Consumers  []string `json:"deleted_consumers"`
	WorkStream string   `json:"deleted_work_stream,omitempty"`
	// Kept lists, with the reason, what has the group's names but was not
	// made for it and so was not deleted.
	Kept []string `json:"kept,omitempty"`
}

// deleteStatic removes the group's KV entry and its own member consumers
// (<group>-<member> for each configured member, when MemberConsumerOwned)
// and nothing else: a consumer of that name that is not the member's is
// kept and reported in Kept. Running members see the deletion and stop.
func (c *Client) deleteStatic(ctx context.Context, stream, group string) (DeleteResult, error) {
	res := DeleteResult{Key: Key(stream, group)}
	if err := ValidateStoredGroupName(group); err != nil {
		return res, err
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return res, err
	}
	sg, err := c.findGroup(ctx, KindStatic, stream, group)
	if err != nil {
		return res, err
	}
	kv, e := sg.kv, sg.entry
	// A config we cannot parse still names the members it can; their
	// consumers are deleted only when they prove to be theirs.
	var cfg StaticConfig
	_ = json.Unmarshal(e.Value(), &cfg)
	if err := kv.Delete(ctx, Key(stream, group), jetstream.LastRevision(e.Revision())); err != nil {
		return res, fmt.Errorf("delete group %s: %w", Key(stream, group), err)
	}
	c.deletePoison(ctx, KindStatic, stream, group)
	if s == nil {
		return res, nil
	}
	var errs []error
	if sg.layout == LayoutPartition {
		for p := range cfg.MaxMembers {
			name := PartitionConsumerName(group, p)
			deleted, kept, err := c.deletePartitionConsumer(ctx, s, stream, name, KindStatic, stream, group, p)
			switch {
			case err != nil:
				errs = append(errs, err)
			case deleted:
				res.Consumers = append(res.Consumers, name)
			case kept != "":
				res.Kept = append(res.Kept, kept)
			}
		}
		c.deletePositions(ctx, stream, group, partitionPositionNames(cfg.MaxMembers))
		return res, errors.Join(errs...)
	}
	for _, m := range cfg.MemberNames() {
		name := StaticConsumerName(group, m)
		deleted, kept, err := c.deleteOwnedConsumer(ctx, s, stream, name, KindStatic, group, m, staticForms(cfg, m))
		switch {
		case err != nil:
			errs = append(errs, err)
		case deleted:
			res.Consumers = append(res.Consumers, name)
		case kept != "":
			res.Kept = append(res.Kept, kept)
		}
	}
	c.deletePositions(ctx, stream, group, cfg.MemberNames())
	return res, errors.Join(errs...)
}

// ensurePositions makes the bucket the members save their positions in, at
// create (and at an identical re-run, for groups made before or by the
// reference), so that a member's user needs no right to create streams.
func (c *Client) ensurePositions(ctx context.Context, replicas int) error {
	if _, err := c.positions(ctx, replicas); err != nil {
		return fmt.Errorf("positions bucket %s: %w", PositionsBucket, err)
	}
	return nil
}
