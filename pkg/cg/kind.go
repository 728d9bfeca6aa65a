package cg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// Kind is one of the two kinds of consumer group: static or elastic. The
// exported fields that name a kind (GroupRef.Kind, Finding.Kind) stay
// strings holding these same values; GroupRef.KindOf converts.
type Kind string

// The two kinds of group.
const (
	// KindStatic groups have a fixed member list chosen at creation;
	// member consumers live on the group's own stream.
	KindStatic Kind = "static"
	// KindElastic groups take members in and out while they run; member
	// consumers live on the group's work-queue stream <stream>-<group>.
	KindElastic Kind = "elastic"
)

// Kinds lists the kinds in the order cg shows them.
func Kinds() []Kind { return []Kind{KindStatic, KindElastic} }

// ParseKind reads a kind's name, "static" or "elastic".
func ParseKind(s string) (Kind, error) {
	k := Kind(s)
	if err := k.Valid(); err != nil {
		return "", err
	}
	return k, nil
}

// String returns the kind's name.
func (k Kind) String() string { return string(k) }

// Valid reports, as an error wrapping ErrUnknownKind, a kind that is
// neither static nor elastic.
func (k Kind) Valid() error {
	switch k {
	case KindStatic, KindElastic:
		return nil
	}
	return fmt.Errorf("%w %q: want %q or %q", ErrUnknownKind, string(k), KindStatic, KindElastic)
}

// kindOps is what a kind does its own way for the calls both kinds share;
// those calls are written once, over it, and no other code asks which kind
// it holds to pick between them.
type kindOps interface {
	bucket() string
	partitionBucket() string
	workStream(stream, group string) string
	config(ctx context.Context, c *Client, stream, group string) (health.GroupConfig, error)
	info(ctx context.Context, c *Client, stream, group string, scope lagScope) (health.GroupInfo, error)
	delete(ctx context.Context, c *Client, stream, group string) (DeleteResult, error)
	join(ctx context.Context, c *Client, stream, group, member string, h Handler, opts JoinOptions) (*Member, error)
}

type staticOps struct{}

func (staticOps) bucket() string                     { return StaticBucket }
func (staticOps) partitionBucket() string            { return StaticPartitionBucket }
func (staticOps) workStream(stream, _ string) string { return stream }
func (staticOps) config(ctx context.Context, c *Client, stream, group string) (health.GroupConfig, error) {
	cfg, err := c.StaticConfig(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}
func (staticOps) info(ctx context.Context, c *Client, stream, group string, scope lagScope) (health.GroupInfo, error) {
	return c.staticInfo(ctx, stream, group, scope)
}
func (staticOps) delete(ctx context.Context, c *Client, stream, group string) (DeleteResult, error) {
	return c.deleteStatic(ctx, stream, group)
}
func (staticOps) join(ctx context.Context, c *Client, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	return c.JoinStatic(ctx, stream, group, member, h, opts)
}

type elasticOps struct{}

func (elasticOps) bucket() string                         { return ElasticBucket }
func (elasticOps) partitionBucket() string                { return ElasticPartitionBucket }
func (elasticOps) workStream(stream, group string) string { return WorkStreamName(stream, group) }
func (elasticOps) config(ctx context.Context, c *Client, stream, group string) (health.GroupConfig, error) {
	cfg, err := c.ElasticConfig(ctx, stream, group)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}
func (elasticOps) info(ctx context.Context, c *Client, stream, group string, scope lagScope) (health.GroupInfo, error) {
	return c.elasticInfo(ctx, stream, group, scope)
}
func (elasticOps) delete(ctx context.Context, c *Client, stream, group string) (DeleteResult, error) {
	return c.deleteElastic(ctx, stream, group)
}
func (elasticOps) join(ctx context.Context, c *Client, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	return c.JoinElastic(ctx, stream, group, member, h, opts)
}

// ops returns the kind's operations, or an error wrapping ErrUnknownKind.
func (k Kind) ops() (kindOps, error) {
	switch k {
	case KindStatic:
		return staticOps{}, nil
	case KindElastic:
		return elasticOps{}, nil
	}
	return nil, k.Valid()
}

// Bucket is the KV bucket the kind's configurations are stored in, "" for
// an unknown kind.
func (k Kind) Bucket() string {
	if o, err := k.ops(); err == nil {
		return o.bucket()
	}
	return ""
}

// WorkStream names the stream a group's member consumers live on: the
// group's own stream for static groups, the hidden work-queue stream
// <stream>-<group> for elastic ones; "" for an unknown kind.
func (k Kind) WorkStream(stream, group string) string {
	if o, err := k.ops(); err == nil {
		return o.workStream(stream, group)
	}
	return ""
}

// HasWorkStream reports whether the kind's groups own a stream of their
// own (elastic groups do).
func (k Kind) HasWorkStream() bool { return k == KindElastic }

// CanChangeMembers reports whether members can be added to and dropped
// from a group of this kind after it is created (elastic groups only).
func (k Kind) CanChangeMembers() bool { return k == KindElastic }

// KindOf returns the reference's kind as a Kind; check it with Valid.
func (r GroupRef) KindOf() Kind { return Kind(r.Kind) }

// List returns the names of the groups of kind k on stream.
func (c *Client) List(ctx context.Context, k Kind, stream string) ([]string, error) {
	if err := k.Valid(); err != nil {
		return nil, err
	}
	if _, err := c.streamInfo(ctx, stream); err != nil {
		return nil, err
	}
	return c.listGroups(ctx, k, stream)
}

// Config returns a group's stored configuration behind the interface the
// two kinds share (a StaticConfig or an ElasticConfig).
func (c *Client) Config(ctx context.Context, k Kind, stream, group string) (health.GroupConfig, error) {
	o, err := k.ops()
	if err != nil {
		return nil, err
	}
	return o.config(ctx, c, stream, group)
}

// Info returns a group's configuration, member states and lag per member
// and per partition; for an elastic group also the per-partition backlog
// in its work stream and that stream's sourcing lag.
func (c *Client) Info(ctx context.Context, k Kind, stream, group string) (health.GroupInfo, error) {
	o, err := k.ops()
	if err != nil {
		return health.GroupInfo{}, err
	}
	return o.info(ctx, c, stream, group, lagScope{all: true})
}

// MemberInfo returns one member's state, with its lag.
func (c *Client) MemberInfo(ctx context.Context, k Kind, stream, group, member string) (health.MemberStatus, error) {
	return c.memberInfo(ctx, k, stream, group, member, lagScope{member: member})
}

func (c *Client) memberInfo(ctx context.Context, k Kind, stream, group, member string, scope lagScope) (health.MemberStatus, error) {
	o, err := k.ops()
	if err != nil {
		return health.MemberStatus{}, err
	}
	gi, err := o.info(ctx, c, stream, group, scope)
	if err != nil {
		return health.MemberStatus{}, err
	}
	for _, ms := range gi.Members {
		if ms.Member == member {
			return ms, nil
		}
	}
	return health.MemberStatus{}, fmt.Errorf("%w: %q is not a member of %s group %q (members: %s)", ErrMemberNotFound, member, k, group, strings.Join(gi.Config.MemberNames(), ", "))
}

// StepDown unpins the member's pinned instance so the server pins another
// (a standby, or the same instance when it is the only one).
func (c *Client) StepDown(ctx context.Context, k Kind, stream, group, member string) (StepDownResult, error) {
	for try := 0; ; try++ {
		ms, err := c.memberInfo(ctx, k, stream, group, member, lagScope{})
		if err != nil {
			return StepDownResult{}, err
		}
		res, err := c.stepDown(ctx, k.WorkStream(stream, group), ms)
		// A rebalance remakes the consumer of an elastic member whose
		// partitions changed: between the read and the unpin it can be
		// gone, and a moment later it is there again. Read it again rather
		// than fail a step-down given right after an add or a drop.
		if !k.CanChangeMembers() || !errors.Is(err, jetstream.ErrConsumerNotFound) || try == 4 {
			return res, err
		}
		select {
		case <-ctx.Done():
			return res, err
		case <-time.After(time.Duration(try+1) * 100 * time.Millisecond):
		}
	}
}

// Delete removes a group's KV entry and what cg made for it (a static
// group's member consumers, an elastic group's work-queue stream), nothing
// else: an object with the group's names that was not made for it is kept
// and reported in Kept. Running members see the deletion and stop.
func (c *Client) Delete(ctx context.Context, k Kind, stream, group string) (DeleteResult, error) {
	o, err := k.ops()
	if err != nil {
		return DeleteResult{}, err
	}
	return o.delete(ctx, c, stream, group)
}

// Join starts an instance of member in a group of kind k, as JoinStatic
// and JoinElastic do.
func (c *Client) Join(ctx context.Context, k Kind, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	o, err := k.ops()
	if err != nil {
		return nil, err
	}
	return o.join(ctx, c, stream, group, member, h, opts)
}
