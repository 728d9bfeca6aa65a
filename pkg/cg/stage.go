package cg

import (
	"errors"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Delivery stages as plug-ins. Each stage is described once, by a
// stageSpec: what in JoinOptions chooses it, how it checks the join's
// handler and the options and fills in their defaults (the max ack pending
// it needs among them), what it refuses of an existing member consumer,
// what it prepares before the instance binds, and how it is built over a
// binding's sink. The runtime (member.go and the kinds' strategies) asks
// the chosen spec and names no stage; a stage is handed only its options
// and the sink (delivery.go), never the Member. The retry policy is a
// wrapper rather than a stage of its own: it sits between any stage and
// the handler (stageState.deliver), as middleware does.

// stageSpec describes one delivery stage.
type stageSpec struct {
	name string
	// chosen reports whether the options pick this stage (the first
	// spec of stageSpecs that says so is the instance's).
	chosen func(o JoinOptions) bool
	// handler checks the join's per-message handler against the stage.
	handler func(h Handler) error
	// defaults checks the stage's options and fills in its defaults. Every
	// spec's runs (a spec not chosen checks that its options are unset or
	// valid), in stageSpecs order.
	defaults func(o JoinOptions) (JoinOptions, error)
	// consumerProblem refuses an existing member consumer whose settings
	// the stage cannot work with (nil: any will do).
	consumerProblem func(o JoinOptions, consumer, stream string, cc jetstream.ConsumerConfig) error
	// build makes the stage of one binding.
	build func(o JoinOptions, st *stageState, sink deliverySink) delivery
}

// stageSpecs are the stages, most specific first; the serial stage, last,
// takes what no other chooses.
var stageSpecs = []*stageSpec{&batchSpec, &laneSpec, &serialSpec}

var serialSpec = stageSpec{
	name:   "serial",
	chosen: func(JoinOptions) bool { return true },
	handler: func(h Handler) error {
		if h == nil {
			return errors.New("a message handler is required")
		}
		return nil
	},
	defaults: func(o JoinOptions) (JoinOptions, error) { return o, nil },
	build: func(_ JoinOptions, _ *stageState, sink deliverySink) delivery {
		return newSerialDelivery(sink)
	},
}

// stageOf is the spec the options choose.
func stageOf(o JoinOptions) *stageSpec {
	for _, s := range stageSpecs {
		if s.chosen(o) {
			return s
		}
	}
	return &serialSpec
}

// stageDefaults runs every spec's defaults (withDefaults).
func (o JoinOptions) stageDefaults() (JoinOptions, error) {
	for _, s := range stageSpecs {
		var err error
		if o, err = s.defaults(o); err != nil {
			return o, err
		}
	}
	return o, o.Retry.Validate()
}

// stageState is what a member instance keeps for its delivery stages
// across its bindings.
type stageState struct {
	// keyOf reads the partitioning key off a delivered subject, for stages
	// that order by key and the records of the retry policy (lanes.go).
	keyOf func(subject string) (string, bool)
	// batches numbers this instance's batches.
	batches atomic.Uint64
	// poison is the retry policy's state (poison.go); nil without one.
	poison *poisonState
}

// ackPendingProblem refuses an existing member consumer whose settings (its
// max ack pending) the instance's stage cannot work with.
func (m *Member) ackPendingProblem(cc jetstream.ConsumerConfig) error {
	if s := stageOf(m.opts); s.consumerProblem != nil {
		return s.consumerProblem(m.opts, m.consumer, m.cstream, cc)
	}
	return nil
}

// deliver hands an admitted message to user code through the wrappers the
// options ask for.
func (s bindingSink) deliver(raw *nats.Msg) {
	if ps := s.m.stages.poison; ps != nil {
		ps.handle(s, raw) // under a retry policy (poison.go)
		return
	}
	s.callHandler(raw)
}

// unpinsOnStop reports whether a stop for cause hands the pin over at once
// (the next instance takes over without waiting for the pinned TTL): a
// requested stop, and a batch given up, which the next instance must get
// first.
func unpinsOnStop(cause EventCause) bool {
	return cause == CauseStopRequested || cause == CauseBatchFailed
}
