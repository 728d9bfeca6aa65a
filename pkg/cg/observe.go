package cg

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
)

// Observers see a member instance from inside: each message handed to
// user code and how it ended, pin changes, the join and the stop. They are
// how metrics and tracing plug in (the plugin packages beside this one)
// without the engine depending on any such library, in the manner of
// franz-go's hooks: an observer is any value implementing one or more of
// the hook interfaces below, and the runtime calls only the ones it does.
// With no observer the runtime's only cost is a nil check per message.
//
// Hooks are called from the instance's goroutines (a concurrent instance
// calls the message hooks from several at once) and must not block.
type Observer any

// MessageStartHook is called right before a message is handed to the
// handler. The context it returns is the one the handler receives, so a
// tracer can start a span there and user code sees it; return ctx itself
// to leave it as is.
type MessageStartHook interface {
	OnMessageStart(ctx context.Context, info *MessageInfo) context.Context
}

// MessageDoneHook is called once the handler returned (and, under a retry
// policy, once the policy settled the message), with the context the
// start hooks made, how the message ended and how long the handler took.
type MessageDoneHook interface {
	OnMessageDone(ctx context.Context, info *MessageInfo, result MessageResult, took time.Duration)
}

// JoinHook is called once the instance has joined (bound and pulling), so
// an observer can read the member's state later (Member.QueueDepth).
type JoinHook interface {
	OnJoin(m *Member)
}

// PinHook is called when this instance starts or stops holding the pin of
// partitions: pinned by the server, the pin lost, released or fenced off,
// and on the stop.
type PinHook interface {
	OnPin(change PinChange)
}

// StopHook is called once the instance stopped; cause and err are those
// of Member.StopCause and Member.Err.
type StopHook interface {
	OnStop(m *Member, cause EventCause, err error)
}

// MessageResult is how a handled message ended, as of the end of the
// handler call (an ack sent later by user code is not seen).
type MessageResult string

const (
	// ResultAcked: the message was acked.
	ResultAcked MessageResult = "acked"
	// ResultFailed: the handler did not ack it (it nak'ed or terminated
	// it, or left it to the ack wait, or the ack was refused): it is
	// redelivered, or settled later by the retry policy.
	ResultFailed MessageResult = "failed"
	// ResultDeadLettered: poison under the retry policy, published to the
	// dead-letter subject and acked.
	ResultDeadLettered MessageResult = "dead_lettered"
	// ResultParked: poison under the retry policy, parked on the member.
	ResultParked MessageResult = "parked"
)

// MessageInfo describes a message handed to user code.
type MessageInfo struct {
	Stream   string
	Group    string
	Member   string
	Consumer string
	// Subject is the subject without the partition token.
	Subject   string
	Partition int
	// StreamSeq is the message's sequence in the stream the member
	// consumes (the group's stream, or an elastic group's work stream).
	StreamSeq uint64
	// Delivered counts the deliveries of the message, this one included.
	Delivered uint64
	// MsgID is the publisher's Nats-Msg-Id header, "" when it set none.
	MsgID  string
	PinID  string
	Header nats.Header
	// Size is the body's size in bytes.
	Size int
	// Batch is the number of the batch the message is in, 0 outside
	// batches. Batch handlers receive one context for the whole batch:
	// the one the message hooks made for each message is given to their
	// done hooks only.
	Batch uint64
}

// PinChange is a change of the partitions this instance holds the pin of.
type PinChange struct {
	Stream     string
	Group      string
	Member     string
	Consumer   string
	Partitions []int
	Pinned     bool
	PinID      string
	// Cause is why a pin was lost (CauseOtherPinned, CauseFenced,
	// CauseReleasedOnStop…); empty when pinned.
	Cause EventCause
}

// observers are a member's hooks, sorted by kind once at the join.
type observers struct {
	start []MessageStartHook
	done  []MessageDoneHook
	join  []JoinHook
	pin   []PinHook
	stop  []StopHook

	mu     sync.Mutex
	pinned map[int]string // partition → pin id, as last told to the pin hooks
}

func newObservers(list []Observer) *observers {
	o := &observers{pinned: map[int]string{}}
	for _, v := range list {
		if h, ok := v.(MessageStartHook); ok {
			o.start = append(o.start, h)
		}
		if h, ok := v.(MessageDoneHook); ok {
			o.done = append(o.done, h)
		}
		if h, ok := v.(JoinHook); ok {
			o.join = append(o.join, h)
		}
		if h, ok := v.(PinHook); ok {
			o.pin = append(o.pin, h)
		}
		if h, ok := v.(StopHook); ok {
			o.stop = append(o.stop, h)
		}
	}
	if len(o.start)+len(o.done)+len(o.join)+len(o.pin)+len(o.stop) == 0 {
		return nil
	}
	return o
}

func (m *Member) messageInfo(raw *nats.Msg, subject string, part int) *MessageInfo {
	info := &MessageInfo{Stream: m.stream, Group: m.group, Member: m.member, Consumer: m.consumer,
		Subject: subject, Partition: part, Header: raw.Header,
		MsgID: raw.Header.Get(nats.MsgIdHdr), PinID: raw.Header.Get("Nats-Pin-Id"), Size: len(raw.Data)}
	if md, err := raw.Metadata(); err == nil {
		info.StreamSeq, info.Delivered = md.Sequence.Stream, md.NumDelivered
	}
	return info
}

func (o *observers) messageStart(ctx context.Context, info *MessageInfo) context.Context {
	for _, h := range o.start {
		ctx = h.OnMessageStart(ctx, info)
	}
	return ctx
}

func (o *observers) messageDone(ctx context.Context, info *MessageInfo, res MessageResult, took time.Duration) {
	for _, h := range o.done {
		h.OnMessageDone(ctx, info, res, took)
	}
}

// observedRun is one observed handler call: the poison handling reports
// through it how it settled the message.
type observedRun struct {
	ctx    context.Context
	result MessageResult
}

// handlerCtx is the context the handler of s's current message gets.
func (s bindingSink) handlerCtx() context.Context {
	if s.run != nil {
		return s.run.ctx
	}
	return s.m.ctx
}

// settled records how the retry policy settled the current message.
func (s bindingSink) settled(res MessageResult) {
	if s.run != nil {
		s.run.result = res
	}
}

// observeHandle is handle with the message hooks around it.
func (s bindingSink) observeHandle(raw *nats.Msg) {
	m := s.m
	subject, p := partition.StripPartition(raw.Subject)
	info := m.messageInfo(raw, subject, p)
	run := &observedRun{ctx: m.obs.messageStart(m.ctx, info)}
	s.run = run
	began := time.Now()
	s.deliver(raw)
	took := time.Since(began)
	res := run.result
	if res == "" {
		res = ResultFailed
		if s.acked(raw) {
			res = ResultAcked
		}
	}
	m.obs.messageDone(run.ctx, info, res, took)
}

// observeBatch runs the start hooks for each message of a batch about to
// be handed over, and returns what runs their done hooks.
func (m *Member) observeBatch(ctx context.Context, no uint64, items []*batchItem) func(MessageResult) {
	ctxs, infos := make([]context.Context, len(items)), make([]*MessageInfo, len(items))
	for i, q := range items {
		infos[i] = m.messageInfo(q.raw, q.msg.subject, q.msg.partition)
		infos[i].Batch = no
		ctxs[i] = m.obs.messageStart(ctx, infos[i])
	}
	began := time.Now()
	return func(res MessageResult) {
		took := time.Since(began)
		for i := range infos {
			m.obs.messageDone(ctxs[i], infos[i], res, took)
		}
	}
}

// observeEvent tells the hooks what an event means to them.
func (m *Member) observeEvent(e Event) {
	o := m.obs
	switch e.Kind {
	case EventJoined:
		for _, h := range o.join {
			h.OnJoin(m)
		}
	case EventPinned:
		o.pinChange(e, true, false)
	case EventPinLost:
		o.pinChange(e, false, false)
	case EventFenced:
		if e.Cause == CauseFenced { // not a doubt the server may clear
			o.pinChange(e, false, false)
		}
	case EventStopped:
		o.pinChange(e, false, false)
		for _, h := range o.stop {
			h.OnStop(m, e.Cause, e.Err)
		}
	}
}

// isPartitionRuntime tells a partition-layout instance's per-partition
// runtime, whose events reach the observers through its instance.
func (m *Member) isPartitionRuntime() bool {
	_, ok := m.kind.(*partStrategy)
	return ok
}

// observePartitionEvent tells the hooks of a pin change of one partition
// runtime of this (partition-layout) instance: each partition has a pin
// of its own, so a loss lets go of that partition alone.
func (m *Member) observePartitionEvent(e Event) {
	o := m.obs
	switch {
	case e.Kind == EventPinned:
		o.pinChange(e, true, true)
	case e.Kind == EventPinLost, e.Kind == EventFenced && e.Cause == CauseFenced:
		o.pinChange(e, false, true)
	}
}

// pinChange reports the partitions whose pin state changed: pinned ones
// are e's partitions; a loss lets go of every partition held, or of e's
// partitions alone when each has its own pin (only).
func (o *observers) pinChange(e Event, pinned, only bool) {
	if len(o.pin) == 0 {
		return
	}
	o.mu.Lock()
	var changed []int
	if pinned {
		for _, p := range e.Partitions {
			if o.pinned[p] != e.PinID {
				o.pinned[p] = e.PinID
				changed = append(changed, p)
			}
		}
	} else if only {
		for _, p := range e.Partitions {
			if _, held := o.pinned[p]; held {
				delete(o.pinned, p)
				changed = append(changed, p)
			}
		}
	} else {
		for p := range o.pinned {
			changed = append(changed, p)
		}
		clear(o.pinned)
	}
	o.mu.Unlock()
	if len(changed) == 0 {
		return
	}
	slices.Sort(changed)
	c := PinChange{Stream: e.Stream, Group: e.Group, Member: e.Member, Consumer: e.Consumer,
		Partitions: changed, Pinned: pinned, PinID: e.PinID}
	if !pinned {
		c.Cause = e.Cause
	}
	for _, h := range o.pin {
		h.OnPin(c)
	}
}

// QueueDepth is how many messages this instance has pulled that wait for
// the handler (in the pull buffer and the delivery stage's queues), not
// counting those in the handler's hands.
func (m *Member) QueueDepth() int {
	if lp := m.layout; lp != nil {
		lp.mu.Lock()
		children := make([]*Member, 0, len(lp.children))
		for _, ch := range lp.children {
			children = append(children, ch)
		}
		lp.mu.Unlock()
		n := 0
		for _, ch := range children {
			n += ch.QueueDepth()
		}
		return n
	}
	m.mu.Lock()
	b := m.bound
	m.mu.Unlock()
	if b == nil {
		return 0
	}
	n := len(b.work)
	if st, ok := b.stage.Load().(interface{ queueDepth() int }); ok {
		n += st.queueDepth()
	}
	return n
}

// Stream is the group's stream.
func (m *Member) Stream() string { return m.stream }

// Group is the group's name.
func (m *Member) Group() string { return m.group }

// Name is the member's name.
func (m *Member) Name() string { return m.member }
