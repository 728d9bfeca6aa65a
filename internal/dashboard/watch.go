package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/pkg/cg"
)

// tracked is what Run keeps of one group between samples. Its fields are
// guarded by Server.mu (pin advisories arrive on NATS goroutines).
type tracked struct {
	key       groupKey
	cstream   string // the stream its member consumers live on
	sampler   *health.Sampler
	last      []byte            // the last published state, SampledAt zeroed
	consumers map[string]string // consumer name → member
	pin       map[string]string // member → its last pin id seen
	unpinWhy  map[string]string // member → the reason of its last unpin, "" after a pin
	removed   bool
	sampled   bool // a sample has succeeded
	// inst is each member's recent instance counts (the last
	// failoverWindow), check the step-downs that may be failovers.
	inst  map[string][]instCount
	check map[string]failCheck
	// dynamic is each member's dynamic mark as last seen with any of its
	// records: a sample reads the membership and the marks one after the
	// other, so one taken while a dynamic member's last instance stops
	// (its record deleted, the member dropped, then its mark) can show it
	// still a member with no record at all, and its removal would lose the
	// mark.
	dynamic map[string]bool
}

type instCount struct {
	at time.Time
	n  int
}

// failCheck is an admin unpin under watch: cg's own standbys unpin a
// pinned instance that stopped answering (liveness) through the same API
// a step-down uses, so the advisory cannot tell them apart. If the
// member has fewer instances within failoverWindow while another is
// pinned, the pinned one went away: a failover.
type failCheck struct {
	prev   string // the pin released
	before int    // the most instances seen shortly before
	until  time.Time
	// lowSince is when the member was first seen with fewer instances
	// (zero while it has not, or had them back since): a step-down's
	// unpinned instance drops its pull request for a moment and pulls
	// again, a dead one does not, so only a drop that lasts
	// failoverSettle is a failover.
	lowSince time.Time
}

// failoverSettle is how long the drop in instances must last.
const failoverSettle = time.Second

// failoverWindow is how long after an admin unpin a drop in instances
// counts as the pinned one having gone (a dead instance's pull request
// expires within a second).
const failoverWindow = 4 * time.Second

// maxInst is the most instances member had over the last failoverWindow.
func (t *tracked) maxInst(member string) int {
	n := 0
	for _, c := range t.inst[member] {
		n = max(n, c.n)
	}
	return n
}

// watchState is Run's, guarded by Server.mu.
type watchState struct {
	groups  map[groupKey]*tracked
	watches map[string]func() // consumer stream → stop its pin advisories
}

// Run samples the groups every Options.Every (and at once after a control
// or a pin advisory) and publishes what changed, until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	s.mu.Lock()
	s.watch = watchState{groups: map[groupKey]*tracked{}, watches: map[string]func(){}}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		for _, stop := range s.watch.watches {
			stop()
		}
		s.watch.watches = map[string]func(){}
		s.mu.Unlock()
	}()
	connDone := make(chan struct{})
	go func() { defer close(connDone); s.watchConn(ctx) }()
	defer func() { <-connDone }()
	bucketsDone := make(chan struct{})
	go func() { defer close(bucketsDone); s.watchBuckets(ctx) }()
	defer func() { <-bucketsDone }()

	tick := time.NewTicker(s.opts.Every)
	defer tick.Stop()
	var keys []groupKey
	var listed time.Time
	for {
		if s.connected() {
			// Listing the groups reads the KV keys (a consumer on the
			// bucket each time): at once when a bucket watcher saw a
			// change, after a control or a reconnect, and every
			// listEvery; the groups known are sampled every time, and
			// one deleted goes at its next sample.
			if keys == nil || time.Since(listed) >= listEvery || s.relist.Swap(false) {
				if k, ok := s.listAll(ctx); ok {
					keys, listed = k, time.Now()
				}
			}
			s.sampleAll(ctx, keys)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-s.wake:
		}
	}
}

func (s *Server) connected() bool {
	nc := s.client.Conn()
	return nc != nil && nc.Status() == nats.CONNECTED
}

// watchConn reports the dashboard's own connection going and coming back.
func (s *Server) watchConn(ctx context.Context) {
	nc := s.client.Conn()
	if nc == nil {
		return
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	was := nats.CONNECTED
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := nc.Status()
		if now == was {
			continue
		}
		var state string
		switch now {
		case nats.CONNECTED:
			if was != nats.CONNECTED {
				state = ConnReconnected
			}
		case nats.CLOSED:
			state = ConnClosed
		case nats.RECONNECTING, nats.DISCONNECTED:
			if was == nats.CONNECTED {
				state = ConnDisconnected
			}
		}
		was = now
		if state == "" {
			continue
		}
		s.mu.Lock()
		s.conn = state
		if state == ConnReconnected {
			s.conn = ""
			// Send every group's state again after the next sample, so
			// a page sees the view resume even when nothing changed.
			for _, t := range s.watch.groups {
				t.last = nil
			}
		}
		s.emitLocked(Event{Type: TypeConnection, State: state, Reason: nc.ConnectedUrlRedacted()})
		s.mu.Unlock()
		if state == ConnReconnected {
			s.relist.Store(true)
			s.opts.Logf("dashboard: NATS connection back")
			s.kick()
		} else {
			s.opts.Logf("dashboard: NATS connection %s", state)
		}
	}
}

// list returns the groups in view.
func (s *Server) list(ctx context.Context) ([]groupKey, error) {
	refs, err := s.client.ListGroups(ctx)
	if err != nil {
		return nil, err
	}
	var out []groupKey
	for _, r := range refs {
		if s.opts.Stream != "" && r.Stream != s.opts.Stream || s.opts.Group != "" && r.Group != s.opts.Group {
			continue
		}
		out = append(out, groupKey{kind: r.Kind, stream: r.Stream, group: r.Group})
	}
	return out, nil
}

// listEvery is how often the groups are listed again when the bucket
// watchers (buckets.go) saw no change.
const listEvery = 10 * time.Second

// listAll lists the groups in view and forgets those no longer there.
func (s *Server) listAll(ctx context.Context) ([]groupKey, bool) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	keys, err := s.list(lctx)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			s.opts.Logf("dashboard: listing groups: %s", hints.Error(err))
		}
		return nil, false
	}
	s.mu.Lock()
	s.gone = map[groupKey]bool{}
	for k, t := range s.watch.groups {
		if !slices.Contains(keys, k) {
			s.removeLocked(t, "the group's configuration is gone")
		}
	}
	s.mu.Unlock()
	if keys == nil {
		keys = []groupKey{}
	}
	return keys, true
}

// sampleAll samples the groups listed once each.
func (s *Server) sampleAll(ctx context.Context, keys []groupKey) {
	for _, k := range keys {
		if ctx.Err() != nil {
			return
		}
		s.sample(ctx, k)
	}
}

// removeLocked forgets a group and tells the subscribers. s.mu held.
func (s *Server) removeLocked(t *tracked, why string) {
	if t.removed {
		return
	}
	t.removed = true
	s.gone[t.key] = true
	s.relist.Store(true)
	delete(s.watch.groups, t.key)
	delete(s.states, t.key)
	s.emitLocked(Event{Type: TypeGroupRemoved, Stream: t.key.stream, Group: t.key.group, Kind: t.key.kind, Reason: why})
	for _, o := range s.watch.groups {
		if o.cstream == t.cstream {
			return
		}
	}
	if stop := s.watch.watches[t.cstream]; stop != nil {
		stop()
		delete(s.watch.watches, t.cstream)
	}
}

// sample reads one group and publishes what changed.
func (s *Server) sample(ctx context.Context, k groupKey) {
	kind := cg.Kind(k.kind)
	s.mu.Lock()
	t := s.watch.groups[k]
	if t == nil && s.gone[k] {
		s.mu.Unlock()
		return // deleted since the last listing
	}
	if t == nil {
		t = &tracked{key: k, cstream: k.stream, sampler: health.NewSampler(),
			consumers: map[string]string{}, pin: map[string]string{}, unpinWhy: map[string]string{},
			inst: map[string][]instCount{}, check: map[string]failCheck{}, dynamic: map[string]bool{}}
		if kind.HasWorkStream() {
			t.cstream = kind.WorkStream(k.stream, k.group)
		}
		s.watch.groups[k] = t
	}
	needWatch := s.watch.watches[t.cstream] == nil
	s.mu.Unlock()
	if needWatch {
		s.watchPins(t.cstream)
	}

	ictx, cancel := context.WithTimeout(ctx, 5*time.Second)
	gi, err := s.client.Info(ictx, kind, k.stream, k.group)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.removed {
		return
	}
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, cg.ErrGroupNotFound) || errors.Is(err, cg.ErrStreamNotFound) {
			s.removeLocked(t, hints.Error(err))
			return
		}
		// A blip: keep showing the last state, saying the sample failed.
		prev := s.states[k]
		if prev == nil {
			prev = &GroupState{Kind: k.kind, Members: []MemberState{}, PartitionStats: []PartitionStat{}}
		}
		st := *prev
		st.Error = hints.Error(err)
		st.ReadOnly = s.opts.ReadOnly
		s.publishLocked(t, &st)
		return
	}
	snap := t.sampler.Add(gi)
	st := buildState(gi, snap, s.opts.ReadOnly)
	for _, ms := range gi.Members {
		t.consumers[ms.Consumer] = ms.Member
	}
	if prev := s.states[k]; t.sampled && prev != nil {
		s.diffLocked(t, prev, st)
	}
	for _, m := range st.Members {
		// A member with no record at all says nothing about its mark
		// (see tracked.dynamic); with a liveness record but no mark it is
		// an operator's member.
		if m.Dynamic || !m.LastSeen.IsZero() {
			t.dynamic[m.Name] = m.Dynamic
		}
	}
	// Pins seen by sampling that no advisory announced (advisories lost
	// while disconnected, or the watch could not start).
	first := !t.sampled
	t.sampled = true
	now := time.Now()
	for _, m := range st.Members {
		h := append(t.inst[m.Name], instCount{now, len(m.Instances)})
		for len(h) > 1 && now.Sub(h[0].at) > failoverWindow {
			h = h[1:]
		}
		t.inst[m.Name] = h
		if fc, ok := t.check[m.Name]; ok {
			switch {
			case now.After(fc.until):
				delete(t.check, m.Name)
			case len(m.Instances) >= fc.before:
				fc.lowSince = time.Time{}
				t.check[m.Name] = fc
			case m.PinID == "" || m.PinID == fc.prev:
			case fc.lowSince.IsZero():
				fc.lowSince = now
				t.check[m.Name] = fc
			case now.Sub(fc.lowSince) >= failoverSettle:
				delete(t.check, m.Name)
				s.emitLocked(Event{Type: TypeFailover, Stream: k.stream, Group: k.group, Kind: k.kind, Member: m.Name,
					PinID: m.PinID, PrevPinID: fc.prev, Reason: "the pinned instance went away; a standby took over"})
			}
		}
	}
	for _, m := range st.Members {
		if first {
			t.pin[m.Name] = m.PinID
			continue
		}
		if m.PinID != t.pin[m.Name] && m.PinID != "" {
			prevPin := t.pin[m.Name]
			s.emitLocked(Event{Type: TypePin, Stream: k.stream, Group: k.group, Kind: k.kind, Member: m.Name,
				PinID: m.PinID, PrevPinID: prevPin, Reason: "sampled"})
			if prevPin != "" && t.unpinWhy[m.Name] != "admin" {
				s.emitLocked(Event{Type: TypeFailover, Stream: k.stream, Group: k.group, Kind: k.kind, Member: m.Name,
					PinID: m.PinID, PrevPinID: prevPin, Reason: cmpOr(t.unpinWhy[m.Name], "sampled")})
			}
			s.counts.pins[memberKey{k, m.Name}]++
			t.pin[m.Name], t.unpinWhy[m.Name] = m.PinID, ""
		}
	}
	s.publishLocked(t, st)
}

// publishLocked stores st and sends it when it differs from the last one
// sent. s.mu held.
func (s *Server) publishLocked(t *tracked, st *GroupState) {
	s.states[t.key] = st
	cmp := *st
	cmp.SampledAt = time.Time{}
	b, _ := json.Marshal(&cmp)
	if bytes.Equal(b, t.last) {
		return
	}
	t.last = b
	c := *st
	s.emitLocked(Event{Type: TypeGroup, Time: st.SampledAt, Stream: t.key.stream, Group: t.key.group, Kind: t.key.kind, State: &c})
}

// diffLocked emits the timeline events between two states of a group:
// members added and removed, mappings created and deleted, and partitions
// that changed owner (a rebalance). s.mu held.
func (s *Server) diffLocked(t *tracked, prev, cur *GroupState) {
	k := t.key
	ev := func(typ, member string) Event {
		return Event{Type: typ, Stream: k.stream, Group: k.group, Kind: k.kind, Member: member}
	}
	had := map[string]bool{}
	for _, m := range prev.Members {
		had[m.Name] = true
	}
	has := map[string]bool{}
	for _, m := range cur.Members {
		has[m.Name] = true
		if !had[m.Name] {
			e := ev(TypeMemberAdded, m.Name)
			e.Partitions = m.Partitions
			if m.Dynamic {
				// Its mark is written before the add, so the first
				// sample with the member has it.
				e.Dynamic, e.Reason = true, "added itself: a dynamic member's instance started"
			}
			s.emitLocked(e)
		}
	}
	for _, m := range prev.Members {
		if !has[m.Name] {
			e := ev(TypeMemberRemoved, m.Name)
			e.PrevPinID = m.PinID
			if m.Dynamic || t.dynamic[m.Name] {
				// The sample cannot tell which: its mark goes with it
				// either way.
				e.Dynamic, e.Reason = true, "a dynamic member, dropped: its last instance stopped, it gave no sign of life for its session timeout, or it was dropped by hand"
			}
			s.emitLocked(e)
			delete(t.pin, m.Name)
			delete(t.unpinWhy, m.Name)
			delete(t.inst, m.Name)
			delete(t.check, m.Name)
			delete(t.dynamic, m.Name)
		}
	}
	switch {
	case prev.Mode != "mapped" && cur.Mode == "mapped":
		s.emitLocked(ev(TypeMappingCreated, ""))
	case prev.Mode == "mapped" && cur.Mode != "mapped":
		s.emitLocked(ev(TypeMappingDeleted, ""))
	}
	var moves []Move
	var parts []int
	for i := range max(len(prev.PartitionStats), len(cur.PartitionStats)) {
		var from, to string
		if i < len(prev.PartitionStats) {
			from = prev.PartitionStats[i].Owner
		}
		if i < len(cur.PartitionStats) {
			to = cur.PartitionStats[i].Owner
		}
		if from != to {
			moves = append(moves, Move{Partition: i, From: from, To: to})
			parts = append(parts, i)
		}
	}
	if len(moves) > 0 {
		e := ev(TypeRebalance, "")
		e.Moves, e.Partitions = moves, parts
		e.Reason = fmt.Sprintf("%d of %d partitions changed owner", len(moves), cur.Partitions)
		s.emitLocked(e)
		s.counts.rebalances[k]++
	}
}

// watchPins subscribes to the pin advisories of the consumers on cstream
// (shared by every group whose members live there).
func (s *Server) watchPins(cstream string) {
	stop, err := s.client.WatchPins(cstream, func(e health.PinEvent) { s.onPin(cstream, e) })
	if err != nil {
		s.opts.Logf("dashboard: pin events of %s unavailable: %v", cstream, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch.watches == nil || s.watch.watches[cstream] != nil {
		stop()
		return
	}
	s.watch.watches[cstream] = stop
}

// onPin turns a pin advisory into timeline events of the member's group.
func (s *Server) onPin(cstream string, e health.PinEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range s.watch.groups {
		if t.cstream != cstream {
			continue
		}
		member, ok := t.consumers[e.Consumer]
		if !ok {
			continue
		}
		e.Member = member
		t.sampler.AddPin(e)
		k := t.key
		base := Event{Stream: k.stream, Group: k.group, Kind: k.kind, Member: member, Reason: e.Reason}
		if !e.Time.IsZero() {
			base.Time = e.Time
		}
		prev := t.pin[member]
		switch e.Event {
		case "pinned":
			if prev == e.PinID {
				continue // sampling saw it first
			}
			ev := base
			ev.Type, ev.PinID, ev.PrevPinID = TypePin, e.PinID, prev
			s.emitLocked(ev)
			if prev != "" && prev != e.PinID && t.unpinWhy[member] != "admin" {
				// The pinned instance went (its pin timed out, or it
				// stopped) and a standby took over.
				fo := base
				fo.Type, fo.PinID, fo.PrevPinID = TypeFailover, e.PinID, prev
				fo.Reason = t.unpinWhy[member]
				s.emitLocked(fo)
			}
			t.pin[member], t.unpinWhy[member] = e.PinID, ""
		case "unpinned":
			ev := base
			ev.Type, ev.PrevPinID = TypeUnpin, cmpOr(e.PinID, prev)
			if e.Reason == "admin" {
				ev.Type = TypeStepDown
				t.check[member] = failCheck{prev: ev.PrevPinID, before: t.maxInst(member), until: time.Now().Add(failoverWindow)}
			}
			s.emitLocked(ev)
			t.unpinWhy[member] = cmpOr(e.Reason, "unpinned")
			if e.PinID != "" {
				t.pin[member] = e.PinID
			}
		default:
			continue
		}
		s.counts.pins[memberKey{k, member}]++
	}
	s.kick()
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// buildState turns a sample into the state the page shows.
func buildState(gi health.GroupInfo, snap health.Snapshot, readOnly bool) *GroupState {
	st := &GroupState{
		Kind: gi.Kind, Partitions: gi.Partitions, Mode: gi.Mode, WorkStream: gi.WorkStream,
		Pending: snap.Pending, AckRate: snap.AckRate, LagError: snap.LagError,
		ReadOnly: readOnly, SampledAt: snap.Time,
		Members: []MemberState{}, PartitionStats: []PartitionStat{},
	}
	if len(snap.Statuses) > 0 {
		st.Statuses = map[string]int{}
		for k, v := range snap.Statuses {
			st.Statuses[string(k)] = v
		}
	}
	consumer := map[string]string{}
	for _, ms := range gi.Members {
		consumer[ms.Member] = ms.Consumer
	}
	for _, m := range snap.Members {
		ms := MemberState{
			Name: m.Member, Color: MemberColor(m.Member), Partitions: m.Partitions, Instances: []Instance{},
			Live: m.Live, Consumer: consumer[m.Member], Status: string(m.Status), AckRate: m.AckRate, PinID: m.PinID,
			Dynamic: m.Dynamic, LastSeen: m.LastSeen,
		}
		if ms.Partitions == nil {
			ms.Partitions = []int{}
		}
		if m.Lag != nil {
			ms.Pending = m.Lag.Pending
		}
		if m.PinID != "" {
			ms.Instances = append(ms.Instances, Instance{ID: m.PinID, Pinned: true, PinID: m.PinID, Since: m.PinnedSince})
		}
		for i := range m.Standbys {
			ms.Instances = append(ms.Instances, Instance{ID: fmt.Sprintf("standby-%d", i+1)})
		}
		st.Members = append(st.Members, ms)
	}
	for _, p := range snap.Partitions {
		ps := PartitionStat{Partition: p.Partition, Owner: p.Owner, Known: p.Known, Pending: p.Pending,
			Status: string(p.Status), Reason: p.Reason}
		if p.Owner != "" {
			ps.Color = MemberColor(p.Owner)
		}
		if p.Pending > 0 {
			ps.OldestAgeMs = int64(p.AgeSeconds * 1000)
		}
		if p.Rate != nil {
			ps.Rate = *p.Rate
		}
		st.PartitionStats = append(st.PartitionStats, ps)
	}
	return st
}
