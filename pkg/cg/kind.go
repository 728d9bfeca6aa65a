package cg

import (
	"context"
	"errors"
	"fmt"

	"github.com/cg-dev/cg/pkg/cg/health"
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

// ErrUnknownKind is returned, wrapped, for a Kind that is neither
// KindStatic nor KindElastic.
var ErrUnknownKind = errors.New("unknown group kind")

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

// Bucket is the KV bucket the kind's configurations are stored in, "" for
// an unknown kind.
func (k Kind) Bucket() string {
	switch k {
	case KindStatic:
		return StaticBucket
	case KindElastic:
		return ElasticBucket
	}
	return ""
}

// WorkStream names the stream a group's member consumers live on: the
// group's own stream for static groups, the hidden work-queue stream
// <stream>-<group> for elastic ones; "" for an unknown kind.
func (k Kind) WorkStream(stream, group string) string {
	switch k {
	case KindStatic:
		return stream
	case KindElastic:
		return WorkStreamName(stream, group)
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

// List returns the names of the groups of kind k on stream, as ListStatic
// and ListElastic do.
func (c *Client) List(ctx context.Context, k Kind, stream string) ([]string, error) {
	switch k {
	case KindStatic:
		return c.ListStatic(ctx, stream)
	case KindElastic:
		return c.ListElastic(ctx, stream)
	}
	return nil, k.Valid()
}

// Config returns a group's stored configuration, as StaticConfig and
// ElasticConfig do, behind the interface the two share.
func (c *Client) Config(ctx context.Context, k Kind, stream, group string) (health.GroupConfig, error) {
	switch k {
	case KindStatic:
		cfg, err := c.StaticConfig(ctx, stream, group)
		if err != nil {
			return nil, err
		}
		return cfg, nil
	case KindElastic:
		cfg, err := c.ElasticConfig(ctx, stream, group)
		if err != nil {
			return nil, err
		}
		return cfg, nil
	}
	return nil, k.Valid()
}

// Info describes a group of kind k, as StaticInfo and ElasticInfo do.
func (c *Client) Info(ctx context.Context, k Kind, stream, group string) (health.GroupInfo, error) {
	switch k {
	case KindStatic:
		return c.StaticInfo(ctx, stream, group)
	case KindElastic:
		return c.ElasticInfo(ctx, stream, group)
	}
	return health.GroupInfo{}, k.Valid()
}

// MemberInfo describes one member of a group of kind k, as
// StaticMemberInfo and ElasticMemberInfo do.
func (c *Client) MemberInfo(ctx context.Context, k Kind, stream, group, member string) (health.MemberStatus, error) {
	switch k {
	case KindStatic:
		return c.StaticMemberInfo(ctx, stream, group, member)
	case KindElastic:
		return c.ElasticMemberInfo(ctx, stream, group, member)
	}
	return health.MemberStatus{}, k.Valid()
}

// StepDown unpins a member's instance, as StaticStepDown and
// ElasticStepDown do.
func (c *Client) StepDown(ctx context.Context, k Kind, stream, group, member string) (StepDownResult, error) {
	switch k {
	case KindStatic:
		return c.StaticStepDown(ctx, stream, group, member)
	case KindElastic:
		return c.ElasticStepDown(ctx, stream, group, member)
	}
	return StepDownResult{}, k.Valid()
}

// Delete removes a group of kind k, as DeleteStatic and DeleteElastic do.
func (c *Client) Delete(ctx context.Context, k Kind, stream, group string) (DeleteResult, error) {
	switch k {
	case KindStatic:
		return c.DeleteStatic(ctx, stream, group)
	case KindElastic:
		return c.DeleteElastic(ctx, stream, group)
	}
	return DeleteResult{}, k.Valid()
}

// Join runs member of a group of kind k, as JoinStatic and JoinElastic do.
func (c *Client) Join(ctx context.Context, k Kind, stream, group, member string, h Handler, opts JoinOptions) (*Member, error) {
	switch k {
	case KindStatic:
		return c.JoinStatic(ctx, stream, group, member, h, opts)
	case KindElastic:
		return c.JoinElastic(ctx, stream, group, member, h, opts)
	}
	return nil, k.Valid()
}
