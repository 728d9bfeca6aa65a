package cg

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// Layout says who reads which partition of a group.
//
//   - LayoutMember (the default, the reference's format): one consumer per
//     member, with one filter per partition the member owns. The server finds
//     the next message of such a consumer by walking the subjects it holds,
//     so its cost grows with the number of distinct keys in a backlog.
//   - LayoutPartition (cg's own): one consumer per partition, with a single
//     filter, pinned in PCG; each member's instances pull the consumers of
//     the partitions the member owns. A single-filter consumer is served at
//     a cost that does not grow with the keys.
//
// A partition-layout group is stored in a bucket the reference never
// reads (StaticPartitionBucket, ElasticPartitionBucket), so a reference
// member pointed at it finds no group and fails instead of consuming
// beside cg.
type Layout string

// The two layouts.
const (
	LayoutMember    Layout = "member"
	LayoutPartition Layout = "partition"
)

// KV buckets holding the configurations of partition-layout groups: cg's
// own, never read by the reference. The value is the same JSON as in
// StaticBucket / ElasticBucket, with "layout":"partition".
const (
	StaticPartitionBucket  = "cg-static-partition-groups"
	ElasticPartitionBucket = "cg-elastic-partition-groups"
)

// MaxLayoutPartitions is the most partitions a partition-layout group may
// have. Each partition is a consumer, all of them on one stream (the
// group's stream, or its work stream), and nats-server allows 1000
// consumers per stream by default. Each also costs the server a pull
// request per running instance, re-sent every pull expiry, and a liveness
// check per standby: several messages a second per partition and
// instance when idle, and on a replicated stream a Raft group per
// consumer. Measured (docs/layouts.md), 256 partitions join in seconds on
// one server; 512 did not settle for minutes on a loaded machine.
const MaxLayoutPartitions = 256

// ParseLayout reads a layout's name; "" is LayoutMember.
func ParseLayout(s string) (Layout, error) {
	switch Layout(s) {
	case "", LayoutMember:
		return LayoutMember, nil
	case LayoutPartition:
		return LayoutPartition, nil
	}
	return "", fmt.Errorf("%w %q: want %q (the default, the reference's format) or %q", ErrLayout, s, LayoutMember, LayoutPartition)
}

// Layouts lists the layouts in the order cg shows them.
func Layouts() []Layout { return []Layout{LayoutMember, LayoutPartition} }

// String returns the layout's name ("member" for the zero value).
func (l Layout) String() string { return string(l.orDefault()) }

func (l Layout) orDefault() Layout {
	if l == "" {
		return LayoutMember
	}
	return l
}

// stored is the value a configuration's layout field is stored with:
// empty for the member layout, so that its JSON stays the reference's
// byte for byte.
func (l Layout) stored() Layout {
	if l.orDefault() == LayoutMember {
		return ""
	}
	return l
}

// LayoutOf is the static group's layout.
func (c StaticConfig) LayoutOf() Layout { return c.Layout.orDefault() }

// LayoutOf is the elastic group's layout.
func (c ElasticConfig) LayoutOf() Layout { return c.Layout.orDefault() }

// checkLayout refuses what a layout cannot have: an unknown name, or more
// partitions than a partition-layout group may have.
func checkLayout(l Layout, partitions int) error {
	if _, err := ParseLayout(string(l)); err != nil {
		return err
	}
	if l == LayoutPartition && partitions > MaxLayoutPartitions {
		return fmt.Errorf("%w: %d partitions is more than the partition layout allows (%d, one consumer per partition): use fewer partitions or the member layout", ErrLayout, partitions, MaxLayoutPartitions)
	}
	return nil
}

// LayoutBucket is the KV bucket a group of kind k and layout l is stored
// in ("" for an unknown kind).
func (k Kind) LayoutBucket(l Layout) string {
	if l.orDefault() == LayoutMember {
		return k.Bucket()
	}
	if o, err := k.ops(); err == nil {
		return o.partitionBucket()
	}
	return ""
}

// PartitionConsumerName is the consumer of partition p of a
// partition-layout group: on the stream for a static group, on the work
// stream for an elastic one.
func PartitionConsumerName(group string, p int) string { return group + "-p" + strconv.Itoa(p) }

// PartitionConsumerFilters are the filters of partition p's consumer:
// <p>.<f> for each group filter f.
func PartitionConsumerFilters(cfg health.GroupConfig, p int) []string {
	if _, ok := cfg.(ElasticConfig); ok {
		return []string{strconv.Itoa(p) + ".>"}
	}
	return partition.PartitionFilters([]int{p}, cfg.SubjectFilters())
}

// storedGroup is one group's entry found in either layout's bucket.
type storedGroup struct {
	kv     jetstream.KeyValue
	bucket string
	layout Layout
	entry  jetstream.KeyValueEntry
}

// findGroup is the one lookup every reader of a group goes through: it
// finds the group's entry in the bucket of either layout (a name is
// unique across both) and says which. ErrGroupNotFound, wrapped with
// notFound's words, when neither holds it.
func (c *Client) findGroup(ctx context.Context, k Kind, stream, group string) (storedGroup, error) {
	notFound := fmt.Errorf("%w: no %s group %q on stream %q", ErrGroupNotFound, k, group, stream)
	for _, l := range Layouts() {
		name := k.LayoutBucket(l)
		kv, err := c.bucket(ctx, name)
		if errors.Is(err, ErrGroupNotFound) {
			continue
		}
		if err != nil {
			return storedGroup{}, err
		}
		e, err := kv.Get(ctx, Key(stream, group))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return storedGroup{}, fmt.Errorf("read group %s: %w", Key(stream, group), err)
		}
		return storedGroup{kv: kv, bucket: name, layout: l, entry: e}, nil
	}
	return storedGroup{}, notFound
}

// groupLayout says which layout's bucket holds a group; ok false when none.
func (c *Client) groupLayout(ctx context.Context, k Kind, stream, group string) (Layout, bool, error) {
	sg, err := c.findGroup(ctx, k, stream, group)
	if errors.Is(err, ErrGroupNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return sg.layout, true, nil
}

// otherLayoutHas refuses a create of a group whose name the other layout's
// bucket already holds: a name is unique across layouts, so that every
// reader finds one group under it.
func (c *Client) otherLayoutHas(ctx context.Context, k Kind, stream, group string, l Layout) error {
	have, ok, err := c.groupLayout(ctx, k, stream, group)
	if err != nil || !ok || have == l.orDefault() {
		return err
	}
	return fmt.Errorf("%w: %s group %q on %q exists with the %s layout; delete it first to recreate it with the %s layout", ErrGroupExists, k, group, stream, have, l.orDefault())
}

// LayoutOfConfig is the layout of a static or elastic configuration
// (LayoutMember for anything else).
func LayoutOfConfig(cfg health.GroupConfig) Layout {
	switch c := cfg.(type) {
	case StaticConfig:
		return c.LayoutOf()
	case ElasticConfig:
		return c.LayoutOf()
	}
	return LayoutMember
}
