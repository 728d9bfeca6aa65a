package cg

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// A member instance of a partition-layout group runs one single-consumer
// runtime per partition its member owns: each is a full Member (pull loop,
// pin, fencing, liveness, delivery stage, poison handling, graceful
// hand-off) bound to that partition's consumer, sharing the handler. The
// instance the caller holds is their parent: it follows the stored
// configuration, starts and stops the partition runtimes, and stops them
// all when it stops or when one of them ends on its own.
//
// Pins are per partition: the server pins one instance per partition
// consumer, so of two instances of one member each may hold the pins of
// some partitions and stand by for the others. One active worker per
// partition is the guarantee, as with the member layout; a standby is
// standby per partition. Delivery settings are per partition consumer:
// Concurrency N runs up to N handler calls for each partition, a batch
// holds messages of one partition, max ack pending bounds each partition
// consumer.

// Ownership marks of a partition-layout group's consumers (beside MarkKind,
// MarkStream, MarkGroup; MarkMember is absent: a partition consumer is
// read by whichever member owns the partition).
const (
	MarkLayout    = "cg.layout"    // "partition"
	MarkPartition = "cg.partition" // the partition the consumer reads
)

// PartitionMarks is the metadata cg puts on partition p's consumer.
func PartitionMarks(k Kind, stream, group string, p int) map[string]string {
	md := Marks(k, stream, group, "")
	md[MarkLayout] = string(LayoutPartition)
	md[MarkPartition] = strconv.Itoa(p)
	return md
}

// PartitionConsumerOwned decides whether a consumer is partition p's of
// the partition-layout group (k, stream, group): it must carry exactly
// those marks. The reference never makes such consumers, so an unmarked
// one is never the group's.
func PartitionConsumerOwned(cc jetstream.ConsumerConfig, k Kind, stream, group string, p int) (owned bool, why string) {
	md := cc.Metadata
	if !isMarked(md) {
		return false, "it carries no cg marks, and cg marks every partition consumer it makes"
	}
	if md[MarkKind] == string(k) && md[MarkStream] == stream && md[MarkGroup] == group && md[MarkMember] == "" &&
		md[MarkLayout] == string(LayoutPartition) && md[MarkPartition] == strconv.Itoa(p) {
		return true, ""
	}
	return false, "it is marked as made for " + markOwner(md)
}

// deletePartitionConsumer deletes consumer name on s when it is partition
// p's own, else says why it was kept.
func (c *Client) deletePartitionConsumer(ctx context.Context, s jetstream.Stream, cstream, name string, k Kind, stream, group string, p int) (deleted bool, kept string, err error) {
	ci, err := c.consumerInfo(ctx, cstream, name)
	if err != nil || ci == nil {
		return false, "", err
	}
	if ok, why := PartitionConsumerOwned(ci.Config, k, stream, group, p); !ok {
		return false, fmt.Sprintf("consumer %s on %s: %s", name, cstream, why), nil
	}
	if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, "", fmt.Errorf("delete consumer %s: %w", name, err)
	}
	return true, "", nil
}

// layoutParent is a partition-layout instance's set of partition runtimes.
type layoutParent struct {
	m   *Member // the instance the caller holds
	k   Kind
	cfg health.GroupConfig // the configuration joined (static) or last applied (elastic)

	mu       sync.Mutex
	children map[int]*Member
	stopping bool
}

// firstPin is the pin of the lowest partition this instance holds.
func (lp *layoutParent) firstPin() string {
	pins := lp.pins()
	keys := make([]int, 0, len(pins))
	for p := range pins {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return ""
	}
	return pins[keys[0]]
}

func (lp *layoutParent) pins() map[int]string {
	lp.mu.Lock()
	defer lp.mu.Unlock()
	out := map[int]string{}
	for p, ch := range lp.children {
		if pin := ch.PinID(); pin != "" {
			out[p] = pin
		}
	}
	return out
}

// Pins are the pins this instance holds, by partition: on a
// partition-layout group one per partition whose consumer pinned it; on a
// member-layout group the member consumer's pin under each partition the
// member owns (or none).
func (m *Member) Pins() map[int]string {
	if m.layout != nil {
		return m.layout.pins()
	}
	out := map[int]string{}
	if pin := m.PinID(); pin != "" {
		for _, p := range m.Partitions() {
			out[p] = pin
		}
	}
	return out
}

// PartitionConsumers names the consumer this instance reads each partition
// through: one per partition on a partition-layout group, the member
// consumer for all of them on a member-layout one.
func (m *Member) PartitionConsumers() map[int]string {
	out := map[int]string{}
	for _, p := range m.Partitions() {
		if m.layout != nil {
			out[p] = PartitionConsumerName(m.group, p)
		} else {
			out[p] = m.consumer
		}
	}
	return out
}

// joinLayout finishes the join of m, whose options, configuration and
// preflight checks are done, as an instance of a partition-layout group.
func (c *Client) joinLayout(ctx context.Context, m *Member, k Kind, cfg health.GroupConfig) (*Member, error) {
	if m.opts.ReferenceCompatible {
		return nil, fmt.Errorf("%w: %s group %q uses the partition layout, which the reference library cannot read; join without reference compatibility", ErrLayout, k, m.group)
	}
	if err := m.opts.checkLayoutCeilings(cfg.PartitionCount()); err != nil {
		return nil, err
	}
	lp := &layoutParent{m: m, k: k, cfg: cfg, children: map[int]*Member{}}
	m.layout = lp
	m.consumer = ""
	m.stages.poison = nil // each partition runtime keeps its own
	var ecfg *ElasticConfig
	if e, ok := cfg.(ElasticConfig); ok {
		ecfg = &e
	}
	if err := m.prepareLanes(ctx, ecfg); err != nil {
		return nil, err
	}
	kv := m.joinKV
	if kv == nil {
		sg, err := c.findGroup(ctx, k, m.stream, m.group)
		if err != nil {
			return nil, err
		}
		kv = sg.kv
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	if err := m.watchGroup(kv); err != nil {
		return nil, err
	}
	switch k {
	case KindStatic:
		st := &layoutStatic{staticStrategy: &staticStrategy{Member: m, static: cfg.(StaticConfig)}, lp: lp}
		m.kind = st
		parts := cfg.Assignment().MemberPartitions(m.member)
		m.partitions = parts
		if err := lp.startAll(ctx, parts); err != nil {
			lp.stopAll(CauseStopRequested)
			_ = m.watcher.Stop()
			m.cancel()
			return nil, err
		}
	case KindElastic:
		m.kind = &layoutElastic{Member: m, lp: lp, elastic: *ecfg, kick: make(chan struct{}, 1), ctrlDone: make(chan struct{})}
	}
	m.started(ctx, Event{Kind: EventJoined})
	return m, nil
}

// startAll starts the runtimes of parts, a few at a time (each is a couple
// of requests to the server).
func (lp *layoutParent) startAll(ctx context.Context, parts []int) error {
	return errors.Join(lp.startEach(ctx, parts)...)
}

// startEach starts the runtimes of parts, a few at a time, and returns
// each one's error.
func (lp *layoutParent) startEach(ctx context.Context, parts []int) []error {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	errs := make([]error, len(parts))
	for i, p := range parts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs[i] = lp.start(ctx, p)
		}()
	}
	wg.Wait()
	return errs
}

// start binds and starts partition p's runtime.
func (lp *layoutParent) start(ctx context.Context, p int) error {
	m := lp.m
	ch := &Member{c: m.c, stream: m.stream, cstream: m.cstream, group: m.group, member: m.member,
		consumer: PartitionConsumerName(m.group, p), handler: m.handler, done: make(chan struct{}),
		partitions: []int{p}, stages: stageState{keyOf: m.stages.keyOf}, posName: partitionPositionName(p), opts: m.opts}
	// The partition runtime hands its messages to the instance's
	// observers; its pin changes reach them through the instance, which
	// reports its own joined and stopped.
	ch.obs = m.obs
	onEvent := m.opts.OnEvent
	ch.opts.OnEvent = func(e Event) {
		if e.Kind == EventJoined || e.Kind == EventStopped {
			return
		}
		if m.obs != nil {
			m.observePartitionEvent(e)
		}
		if onEvent != nil {
			onEvent(e)
		}
	}
	ps := &partStrategy{Member: ch, k: lp.k, parent: lp, p: p, gone: make(chan struct{}, 1),
		filters: PartitionConsumerFilters(lp.cfg, p)}
	ch.kind = ps
	if err := ch.setupPoison(ctx); err != nil {
		return err
	}
	ch.ctx, ch.cancel = context.WithCancel(context.Background())
	if err := ps.bind(ctx); err != nil {
		ch.cancel()
		return err
	}
	lp.mu.Lock()
	if lp.stopping {
		lp.mu.Unlock()
		ps.asked.Store(true)
		ch.Stop()
		return nil
	}
	lp.children[p] = ch
	lp.mu.Unlock()
	if ps.resumed != "" {
		ch.emit(Event{Kind: EventWarning, Reason: "partition consumer " + ch.consumer + ": " + ps.resumed})
	}
	ch.kind.start()
	return nil
}

// stop stops the runtimes of parts for cause, all at once, and waits.
func (lp *layoutParent) stop(parts []int, cause EventCause) {
	lp.mu.Lock()
	var chs []*Member
	for _, p := range parts {
		if ch, ok := lp.children[p]; ok {
			chs = append(chs, ch)
			delete(lp.children, p)
		}
	}
	lp.mu.Unlock()
	var wg sync.WaitGroup
	for _, ch := range chs {
		ch.kind.(*partStrategy).asked.Store(true)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch.finish(nil, cause, stopReasons[cause])
		}()
	}
	wg.Wait()
}

// stopAll stops every runtime; none is started after it.
func (lp *layoutParent) stopAll(cause EventCause) {
	lp.mu.Lock()
	lp.stopping = true
	parts := make([]int, 0, len(lp.children))
	for p := range lp.children {
		parts = append(parts, p)
	}
	lp.mu.Unlock()
	if !unpinsOnStop(cause) {
		cause = CauseGroupDeleted // any other end: let go without handing pins over
	}
	lp.stop(parts, cause)
}

// childEnded: a partition runtime stopped on its own (its stream or
// consumer gone for good, a failed batch, a poison message under stop):
// the instance stops with it, for the same reason.
func (lp *layoutParent) childEnded(ch *Member) {
	err, cause := ch.Err(), ch.StopCause()
	reason := stopReasons[cause]
	if reason == "" {
		reason = string(cause)
	}
	lp.m.finish(err, cause, reason)
}

// layoutStatic is a static partition-layout instance's strategy: the
// static group's watcher (any change stops it), and its partitions'
// runtimes stopped with it.
type layoutStatic struct {
	*staticStrategy
	lp *layoutParent
}

func (s *layoutStatic) start()                          { go s.watchStatic() }
func (s *layoutStatic) lookAgain()                      {}
func (s *layoutStatic) halt()                           {}
func (s *layoutStatic) shape(*jetstream.ConsumerConfig) {}
func (s *layoutStatic) stopped(_ bool, cause EventCause) {
	s.lp.stopAll(cause)
}

// layoutElastic is an elastic partition-layout instance's strategy: a
// controller that starts the runtimes of the partitions the member gains
// and stops those of the partitions it loses. Moving a partition moves
// its consumer's pin: the old owner's pinned instance finishes the
// message in hand, hands back what it holds in order and unpins; the new
// owner's instance, already pulling as a standby, is pinned next and is
// delivered the handed-back messages first. No filter changes, no
// consumer deleted.
type layoutElastic struct {
	*Member
	lp       *layoutParent
	elastic  ElasticConfig // guarded by Member.mu
	kick     chan struct{}
	ctrlDone chan struct{}
	waiting  string
}

func (s *layoutElastic) name() Kind                      { return KindElastic }
func (s *layoutElastic) shape(*jetstream.ConsumerConfig) {}
func (s *layoutElastic) start()                          { go s.run() }
func (s *layoutElastic) lookAgain()                      {}
func (s *layoutElastic) halt()                           { <-s.ctrlDone }
func (s *layoutElastic) stopped(_ bool, cause EventCause) {
	s.lp.stopAll(cause)
}

func (s *layoutElastic) run() {
	defer close(s.ctrlDone)
	var retry <-chan time.Time
	again := func(d time.Duration) {
		retry = nil
		if d > 0 {
			retry = time.After(d)
		}
	}
	again(s.reconcile())
	for {
		select {
		case <-s.ctx.Done():
			return
		case e, ok := <-s.watcher.Updates():
			if !ok {
				return
			}
			apply, done := s.elasticUpdate(e, &s.elastic)
			if done {
				return
			}
			if apply {
				again(s.reconcile())
			}
		case <-s.kick:
			again(s.reconcile())
		case <-retry:
			again(s.reconcile())
		}
	}
}

// reconcile runs the partitions the member owns now: it first lets go of
// those it lost, then starts those it gained. It returns when to try again
// (a partition that could not be started).
func (s *layoutElastic) reconcile() time.Duration {
	s.mu.Lock()
	cfg := s.elastic
	s.mu.Unlock()
	want := cfg.Assignment().MemberPartitions(s.member)
	s.lp.mu.Lock()
	var lost, gained []int
	for p := range s.lp.children {
		if !slices.Contains(want, p) {
			lost = append(lost, p)
		}
	}
	for _, p := range want {
		if _, ok := s.lp.children[p]; !ok {
			gained = append(gained, p)
		}
	}
	s.lp.mu.Unlock()
	if len(lost) > 0 {
		s.lp.stop(lost, CauseReleasedToRebalance)
	}
	changed := len(lost) > 0
	var failed error
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	if s.stopping.Load() {
		return 0
	}
	// All at once, as a static instance starts its partitions: each is a
	// few round trips, which one after another made the join of a member
	// of many partitions that many times slower.
	errs := s.lp.startEach(ctx, gained)
	for i := range gained {
		if errs[i] != nil {
			failed = errs[i]
			continue
		}
		changed = true
	}
	if s.stopping.Load() {
		return 0
	}
	s.mu.Lock()
	s.partitions = s.runningParts()
	parts := slices.Clone(s.partitions)
	s.mu.Unlock()
	if failed != nil {
		if errors.Is(failed, ErrNotOwned) || errors.Is(failed, ErrConsumerConflict) {
			s.setWaiting(failed.Error())
		} else if s.ctx.Err() == nil {
			s.emit(Event{Kind: EventWarning, Err: failed, Reason: "starting partition consumers: " + failed.Error()})
		}
	}
	if changed {
		s.waiting = ""
		s.emit(Event{Kind: EventRebalanced, Partitions: parts, Reason: "pulling partitions " + partition.Ranges(parts)})
		if len(parts) > 0 {
			s.emit(Event{Kind: EventWaiting, Partitions: parts, Reason: reasonStandby})
		}
	}
	if len(want) == 0 {
		reason := "not a member of the group; waiting to be added"
		if cfg.IsMember(s.member) {
			reason = "member owns no partitions"
		}
		s.setWaiting(reason)
	}
	if failed != nil {
		return 250 * time.Millisecond
	}
	return 0
}

func (s *layoutElastic) runningParts() []int {
	s.lp.mu.Lock()
	defer s.lp.mu.Unlock()
	out := make([]int, 0, len(s.lp.children))
	for p := range s.lp.children {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

func (s *layoutElastic) setWaiting(reason string) {
	if s.waiting == reason {
		return
	}
	s.waiting = reason
	s.emit(Event{Kind: EventWaiting, Reason: reason})
}

// partStrategy is one partition's runtime: it binds the partition's
// consumer (creating it where it is missing: a static one resuming after
// its saved position), recreates it when it is deleted under it, and tells
// the parent when it ends on its own.
type partStrategy struct {
	*Member
	k       Kind
	parent  *layoutParent
	p       int
	filters []string
	gone    chan struct{}
	asked   atomic.Bool // the parent stops it
	resumed string
}

func (s *partStrategy) name() Kind { return s.k }

func (s *partStrategy) shape(cc *jetstream.ConsumerConfig) {
	if s.k == KindStatic {
		cc.Durable = s.consumer
		cc.InactiveThreshold = s.opts.InactiveThreshold
	} else {
		// As an elastic member consumer: it goes away one ack wait after
		// the last instance pulling it; the work stream keeps what it
		// did not ack.
		cc.Name = s.consumer
		cc.InactiveThreshold = s.opts.AckWait
	}
	cc.Metadata = PartitionMarks(s.k, s.stream, s.group, s.p)
}

func (s *partStrategy) start() { go s.guard() }

func (s *partStrategy) lookAgain() {
	select {
	case s.gone <- struct{}{}:
	default:
	}
}

func (s *partStrategy) halt() {}

func (s *partStrategy) stopped(wasPinned bool, cause EventCause) {
	if s.k == KindStatic && wasPinned && cause == CauseStopRequested {
		var none uint64
		s.savePosition(&none)
	}
	if !s.asked.Load() {
		go func() {
			<-s.done
			s.parent.childEnded(s.Member)
		}()
	}
}

// bind creates or binds the partition's consumer and starts pulling.
func (s *partStrategy) bind(ctx context.Context) error {
	want := s.consumerConfig(s.filters)
	s.resumed = ""
	cons, err := s.c.js.Consumer(ctx, s.cstream, s.consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		create := want
		if s.k == KindStatic {
			s.resumed = s.startAfter(ctx, &create)
		}
		cons, err = s.c.createConsumer(ctx, s.cstream, create)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			s.resumed = ""
			cons, err = s.c.js.Consumer(ctx, s.cstream, s.consumer)
		}
	}
	if err != nil {
		return fmt.Errorf("consumer %s on %s: %w", s.consumer, s.cstream, err)
	}
	ci := cons.CachedInfo()
	if ok, why := PartitionConsumerOwned(ci.Config, s.k, s.stream, s.group, s.p); !ok {
		return notOwned("consumer", s.consumer+" on "+s.cstream, fmt.Sprintf("%s group %q on %q (partition %d)", s.k, s.group, s.stream, s.p), why, "stop what uses it and remove it, or rename the group")
	}
	if err := s.ackPendingProblem(ci.Config); err != nil {
		return err
	}
	if !compatible(ci.Config, s.filters) {
		return fmt.Errorf("%w: consumer %s on %s has filters %v but partition %d of the group reads %v; delete the consumer and join again",
			ErrConsumerConflict, s.consumer, s.cstream, consumerFilters(ci.Config), s.p, s.filters)
	}
	if err := s.attach(s.filters); err != nil {
		return err
	}
	if s.k == KindStatic {
		go s.keepPosition(s.bound)
	}
	return nil
}

// guard recreates the partition's consumer when it is deleted under the
// runtime, and ends the runtime when its stream is gone.
func (s *partStrategy) guard() {
	for {
		select {
		case <-s.done:
			return
		case <-s.ctx.Done():
			return
		case <-s.gone:
		}
		if s.stopping.Load() || s.check() {
			return
		}
	}
}

// check acts on a consumer that may be gone; it reports whether the
// runtime is stopping.
func (s *partStrategy) check() (stopped bool) {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	_, err := s.c.js.Consumer(ctx, s.cstream, s.consumer)
	switch {
	case err == nil:
		return false
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err := s.c.findGroup(ctx, s.k, s.stream, s.group); errors.Is(err, ErrGroupNotFound) {
			go s.parent.m.stopFor(nil, CauseGroupDeleted)
			return true
		}
		if s.k == KindElastic {
			go s.stop(&health.Error{Err: ErrWorkStreamGone,
				Fix: fmt.Sprintf("re-run the group's create with its partitions and filters (it rebuilds the work stream, re-sourcing %s from its start, so handled messages come again), or delete the group", s.stream),
				Remedy: health.Remedy{Code: health.RemedyRebuildWorkStream, Kind: KindElastic.String(), Stream: s.stream, Group: s.group,
					Lead: fmt.Sprintf("work stream %s of elastic group %s was deleted; a member cannot recreate it: ", s.cstream, s.group)}}, "work stream deleted")
			return true
		}
		go s.stop(&health.Error{Err: ErrConsumerGone, Fix: "recreate the stream and the group, or delete the group",
			Remedy: health.Remedy{Code: health.RemedyRecreateStreamAndGroup, Kind: KindStatic.String(), Stream: s.stream, Group: s.group, Member: s.member,
				Lead: fmt.Sprintf("stream %s was deleted under static member %s of group %s (its partition consumer %s with it); ", s.cstream, s.member, s.group, s.consumer)}}, "stream deleted")
		return true
	case !errors.Is(err, jetstream.ErrConsumerNotFound):
		return false // cannot tell now; the next refused pull kicks again
	}
	if _, err := s.c.findGroup(ctx, s.k, s.stream, s.group); errors.Is(err, ErrGroupNotFound) {
		// Deleted with the group (its entry goes first): never recreated.
		go s.parent.m.stopFor(nil, CauseGroupDeleted)
		return true
	}
	s.release(releaseKeep)
	if err := s.bind(ctx); err != nil {
		go s.stop(&health.Error{Err: ErrConsumerGone, Fix: "start the member again",
			Remedy: health.Remedy{Code: health.RemedyRestartMember, Kind: string(s.k), Stream: s.stream, Group: s.group, Member: s.member,
				Lead: fmt.Sprintf("partition consumer %s on %s was deleted under member %s and could not be recreated: %v; ", s.consumer, s.cstream, s.member, err)}}, "member consumer deleted")
		return true
	}
	if s.stopping.Load() {
		s.release(releaseKeep)
		return true
	}
	how := s.resumed
	if how == "" {
		how = "recreated by another instance, or no saved position: it starts at its deliver policy"
	}
	s.emit(Event{Kind: EventWarning, Reason: "partition consumer " + s.consumer + " was deleted on the server; recreated it (" + how + ")"})
	s.emit(Event{Kind: EventWaiting, Reason: reasonStandby})
	return false
}
