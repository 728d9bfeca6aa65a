package cg

import (
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A Member is one runtime (member.go, pull.go, liveness.go, delivery.go:
// pulling, pinning, fencing, liveness, handing messages to user code,
// stopping) with a strategy behind it for what its kind of group does
// differently: how it binds the member consumer, how it follows the
// stored configuration, and, for elastic groups, how it reconciles a
// changing membership (static_member.go, elastic_member.go). The runtime
// calls the strategy; the strategy calls
// back into the runtime (attach, release, stop) and never the other way
// round through a kind switch.
type strategy interface {
	// name is the kind, as the ownership marks spell it.
	name() Kind
	// shape sets the kind's part of the member consumer's configuration:
	// durable or named, and how long it outlives its last instance.
	shape(cc *jetstream.ConsumerConfig)
	// start runs the kind's goroutines (config watcher, consumer guard or
	// controller) once the instance has joined.
	start()
	// lookAgain is the pull loop's word that the member consumer may have
	// gone (a 409 Consumer Deleted, a 503): look at the server and
	// rebind, recreate or stop.
	lookAgain()
	// halt returns once the strategy can no longer bind behind a stopping
	// runtime's back.
	halt()
	// stopped runs on stop, after the release, with whether the instance
	// held the pin and why it stops.
	stopped(wasPinned bool, cause EventCause)
}

// elasticStrategy is an elastic member's: its controller goroutine
// reconciles the binding with the member's partitions after every change
// (elastic_member.go).
type elasticStrategy struct {
	*Member
	elastic   ElasticConfig        // guarded by Member.mu
	kick      chan struct{}        // a reason to reconcile now (consumer deleted…)
	ctrlDone  chan struct{}        // closed when the controller has returned
	staleSeen map[string]time.Time // when a stale consumer was first seen
	waitingOn string               // why the instance waits ("" when bound)
	adv       chan *nats.Msg       // consumer advisories of the work stream
	advisory  *nats.Subscription
}

func (m *elasticStrategy) name() Kind { return KindElastic }

func (m *elasticStrategy) shape(cc *jetstream.ConsumerConfig) {
	// Not durable: it goes away by inactivity, one ack wait after every
	// instance of the member has stopped. The threshold is the
	// reference's, so that instances of both share the consumer.
	cc.Name = m.consumer
	cc.InactiveThreshold = m.opts.AckWait
}

func (m *elasticStrategy) start() { go m.runElastic() }

// lookAgain asks the controller to reconcile now.
func (m *elasticStrategy) lookAgain() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *elasticStrategy) halt() { <-m.ctrlDone }

func (m *elasticStrategy) stopped(bool, EventCause) {}
