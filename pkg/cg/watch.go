package cg

import (
	"encoding/json"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go"
)

// The watch sampler (Sampler, Snapshot, the statuses) lives in package
// health; what needs the server, the pin advisories, stays here.

// pinAdvisory is the part of the server's pinned/unpinned advisories a
// live view shows.
type pinAdvisory struct {
	Time     time.Time `json:"timestamp"`
	Consumer string    `json:"consumer"`
	PinnedID string    `json:"pinned_id"`
	Reason   string    `json:"reason"`
}

// WatchPins subscribes to the server's pin advisories for the consumers
// on stream (the stream member consumers live on: the group's stream for
// a static group, its work stream for an elastic one) and calls fn for
// each. The returned stop ends the subscriptions.
func (c *Client) WatchPins(stream string, fn func(health.PinEvent)) (stop func(), err error) {
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	for _, kind := range []string{"pinned", "unpinned"} {
		subj := "$JS.EVENT.ADVISORY.CONSUMER." + map[string]string{"pinned": "PINNED", "unpinned": "UNPINNED"}[kind] + "." + stream + ".*"
		sub, err := c.Conn().Subscribe(subj, func(m *nats.Msg) {
			var a pinAdvisory
			if json.Unmarshal(m.Data, &a) != nil {
				return
			}
			fn(health.PinEvent{Time: a.Time, Event: kind, Consumer: a.Consumer, PinID: a.PinnedID, Reason: a.Reason})
		})
		if err != nil {
			stop()
			return func() {}, err
		}
		subs = append(subs, sub)
	}
	// Make sure the server has the interest before the first sample, so
	// nothing that happens after it is missed.
	if err := c.Conn().Flush(); err != nil {
		stop()
		return func() {}, err
	}
	return stop, nil
}
