package cg

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Static member consumers are durable. With JoinOptions.InactiveThreshold
// they do not stay on the server forever once every instance of a member is
// gone: the server deletes them after the threshold. So that the member does
// not lose its place when it returns, its pinned instance keeps the
// consumer's ack floor in a bucket of cg's own, and a member whose consumer
// is gone recreates it starting just after that floor. Positions are saved every
// second and on stop, so a member killed without a goodbye and away longer
// than the threshold replays at most about a second of messages: at least
// once, in order.

// PositionsBucket holds the saved positions of static members.
const PositionsBucket = "cg-static-positions"

// positionKey is the key of a member's saved position.
func positionKey(stream, group, member string) string { return stream + "." + group + "." + member }

// Position is a static member's saved place in its stream.
type Position struct {
	// AckFloor is the stream sequence up to which the member acked all
	// its messages.
	AckFloor uint64    `json:"ack_floor"`
	Saved    time.Time `json:"saved"`
}

// positions opens (or creates, with replicas) the positions bucket.
func (c *Client) positions(ctx context.Context, replicas int) (jetstream.KeyValue, error) {
	return c.bucketFor(ctx, PositionsBucket, replicas)
}

// openPositions is the positions bucket, opened once per client and kept
// (forgetPositions drops it when using it failed): ErrBucketNotFound
// (wrapped) when there is none yet.
func (c *Client) openPositions(ctx context.Context) (jetstream.KeyValue, error) {
	c.posMu.Lock()
	kv := c.posKV
	c.posMu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := c.js.KeyValue(ctx, PositionsBucket)
	if err != nil {
		return nil, err
	}
	c.keepPositions(kv)
	return kv, nil
}

func (c *Client) keepPositions(kv jetstream.KeyValue) {
	c.posMu.Lock()
	c.posKV = kv
	c.posMu.Unlock()
}

// forgetPositions drops the kept bucket kv (deleted, say): the next use
// opens it afresh.
func (c *Client) forgetPositions(kv jetstream.KeyValue) {
	c.posMu.Lock()
	if c.posKV == kv {
		c.posKV = nil
	}
	c.posMu.Unlock()
}

// savedPosition reads a member's saved position (ok false when none).
func (c *Client) savedPosition(ctx context.Context, stream, group, member string) (Position, bool) {
	kv, err := c.openPositions(ctx)
	if err != nil {
		return Position{}, false
	}
	e, err := kv.Get(ctx, positionKey(stream, group, member))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			c.forgetPositions(kv)
		}
		return Position{}, false
	}
	var p Position
	if json.Unmarshal(e.Value(), &p) != nil {
		return Position{}, false
	}
	return p, true
}

// savePosition records the consumer's ack floor when it moved on.
func (m *Member) savePosition(last *uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	cons, err := m.c.js.Consumer(ctx, m.cstream, m.consumer)
	if err != nil {
		return
	}
	floor := cons.CachedInfo().AckFloor.Stream
	if floor == 0 || floor == *last {
		return
	}
	kv, err := m.c.openPositions(ctx)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		// The first save of all: made with the stream's replicas.
		si, err := m.c.js.Stream(ctx, m.cstream)
		if err != nil {
			return
		}
		if kv, err = m.c.positions(ctx, si.CachedInfo().Config.Replicas); err != nil {
			return
		}
		m.c.keepPositions(kv)
	} else if err != nil {
		return
	}
	raw, _ := json.Marshal(Position{AckFloor: floor, Saved: time.Now().UTC()})
	if _, err := kv.Put(ctx, positionKey(m.stream, m.group, m.positionName()), raw); err == nil {
		*last = floor
	} else {
		m.c.forgetPositions(kv)
	}
}

// positionName is what the instance's position is saved under: the member,
// or, for a partition-layout group's partition, "=p<k>" (no member name
// in a group of that layout is needed there, and '=' keeps it apart from
// the member names cg itself writes).
func (m *Member) positionName() string {
	if m.posName != "" {
		return m.posName
	}
	return m.member
}

// partitionPositionNames are the position names of a partition-layout
// group's n partitions.
func partitionPositionNames(n int) []string {
	out := make([]string, n)
	for p := range n {
		out[p] = partitionPositionName(p)
	}
	return out
}

func partitionPositionName(p int) string { return "=p" + strconv.Itoa(p) }

// keepPosition saves the position every second while this instance is
// the pinned one, until the binding is released.
func (m *Member) keepPosition(b *binding) {
	var last uint64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-b.pullDone:
			return
		case <-tick.C:
			if m.PinID() != "" {
				m.savePosition(&last)
			}
		}
	}
}

// deletePositions removes the saved positions of a group's members.
func (c *Client) deletePositions(ctx context.Context, stream, group string, members []string) {
	kv, err := c.js.KeyValue(ctx, PositionsBucket)
	if err != nil {
		return
	}
	for _, m := range members {
		if err := kv.Purge(ctx, positionKey(stream, group, m)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
	}
}

// startAfter configures a new consumer to start just after a saved ack
// floor, returning a description for events ("" when there is none).
func (m *Member) startAfter(ctx context.Context, cc *jetstream.ConsumerConfig) string {
	p, ok := m.c.savedPosition(ctx, m.stream, m.group, m.positionName())
	if !ok {
		return ""
	}
	cc.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
	cc.OptStartSeq = p.AckFloor + 1
	return "consumer recreated after inactivity, resuming after stream sequence " + strconv.FormatUint(p.AckFloor, 10) + " (saved " + p.Saved.Format(time.RFC3339) + ")"
}

// hasRun reports whether a static member has run before: it saved a
// position (a lookup that fails counts as yes, so check errs on the side
// of alarm).
func (c *Client) hasRun(ctx context.Context, stream, group, member string) bool {
	kv, err := c.js.KeyValue(ctx, PositionsBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false
	}
	if err != nil {
		return true
	}
	_, err = kv.Get(ctx, positionKey(stream, group, member))
	return !errors.Is(err, jetstream.ErrKeyNotFound)
}
