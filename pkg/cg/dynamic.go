package cg

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// Dynamic membership (JoinOptions.Dynamic). The membership list stays
// where every implementation reads it, the group's own entry, and changes
// only through the compare-and-set add and drop of updateElastic with the
// fewest moves, so reference members of a mixed group go on following it.
// What the reference never reads lives in a bucket of cg's own,
// DynamicBucket, under the group's <stream>.<group> prefix:
//
//   - <stream>.<group>.<m>: the member joined by itself (a dynamic member).
//     Only members with this key are ever dropped by the reaper; a member
//     an operator added has none (AddMembers removes it), so it is never
//     reaped.
//   - <stream>.<group>.<m>.<instance>: one running instance's liveness
//     record, written again every dynamicRefresh.
//
// <m> is the member name when it is a valid key token, else "=" and its
// unpadded base64url form (dynamicToken); the values name the member.
//
// Every dynamic instance watches the group's prefix and judges the other
// members by its own monotonic clock: a dynamic member none of whose
// records it has seen written for the member's session timeout (counted
// from when it started watching, at the earliest) is gone. Wall clocks are
// never compared, so machines need not agree on the time. The drop is one
// compare-and-set write: whichever instance writes first drops it, the
// others find it dropped and write nothing. An instance that was itself
// starved or cut off (its ticks late, its connection re-established) gives
// everyone a fresh grace period instead of judging from stale news.

// DynamicBucket is the KV bucket of dynamic membership: which members of
// which elastic groups joined by themselves, and their instances' liveness
// records. cg's own; the reference never reads it.
const DynamicBucket = "cg-dynamic-members"

const (
	// dynamicRefresh is how often an instance rewrites its liveness record
	// (and how often it looks for members gone quiet).
	dynamicRefresh = 500 * time.Millisecond
	// MinSessionTimeout is the shortest JoinOptions.SessionTimeout: four
	// refreshes, so that one or two late writes on a loaded machine are
	// never taken for a death.
	MinSessionTimeout = 4 * dynamicRefresh
	// DefaultSessionTimeout is JoinOptions.SessionTimeout's default, from
	// measurement (docs/dynamic.md): the longest gap between two liveness
	// writes seen under load was a small fraction of it, and a dead
	// member's partitions wait for it at most once.
	DefaultSessionTimeout = 10 * time.Second
	// dynamicStarved: a tick this late means this instance was frozen or
	// starved, and what it saw (or did not see) meanwhile proves nothing.
	dynamicStarved = 3 * dynamicRefresh
)

// EventMemberAdded: the instance added its member to the group (a dynamic
// join, or coming back after being dropped).
const EventMemberAdded EventKind = "member_added"

// EventMemberDropped: the instance dropped a member from the group: its own
// on the clean stop of its last instance, or Peer, gone for its session
// timeout.
const EventMemberDropped EventKind = "member_dropped"

// dynamicMarker is the value of a dynamic member's key.
type dynamicMarker struct {
	Member string `json:"member"`
	// Since is when the member added itself, by the writer's clock (for
	// people to read; never compared).
	Since          time.Time `json:"since"`
	SessionTimeout string    `json:"session_timeout"`
}

// dynamicRecord is the value of an instance's liveness record.
type dynamicRecord struct {
	Member         string    `json:"member"`
	Instance       string    `json:"instance"`
	Host           string    `json:"host,omitempty"`
	PID            int       `json:"pid,omitempty"`
	Started        time.Time `json:"started"`
	SessionTimeout string    `json:"session_timeout"`
	Refresh        string    `json:"refresh"`
	// Dynamic: the member is in the group because it joined by itself.
	Dynamic bool `json:"dynamic"`
	// Beat counts the writes; a record is seen alive by its revision
	// changing, not by reading this.
	Beat uint64 `json:"beat"`
}

// dynamicToken is member's token in DynamicBucket keys.
func dynamicToken(member string) string {
	ok := member != "" && member[0] != '='
	for _, r := range member {
		if !isKVKeyRune(r) {
			ok = false
			break
		}
	}
	if ok {
		return member
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(member))
}

func dynamicPrefix(stream, group string) string { return Key(stream, group) }

// checkDynamic checks the dynamic options of a join of kind k.
func (o JoinOptions) checkDynamic(k Kind, group string) (JoinOptions, error) {
	if !o.Dynamic {
		if o.SessionTimeout != 0 {
			return o, invalid("session timeout", o.SessionTimeout.String(), "only applies to a dynamic member: join with the dynamic option, or leave the timeout out")
		}
		return o, nil
	}
	if k != KindElastic {
		return o, invalid("dynamic", group, "%s group %q has a fixed membership; only an elastic group's members can add and drop themselves", k, group)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = DefaultSessionTimeout
	}
	if o.SessionTimeout < MinSessionTimeout {
		return o, invalid("session timeout", o.SessionTimeout.String(), "is below %s: the liveness record is refreshed every %s and a member must be allowed to miss a few refreshes; use %s or more (%s is the default)", MinSessionTimeout, dynamicRefresh, MinSessionTimeout, DefaultSessionTimeout)
	}
	return o, nil
}

// dynPeer is what an instance has seen of one member's records.
type dynPeer struct {
	member  string
	marker  uint64 // the marker's revision; 0: no marker (not dynamic)
	timeout time.Duration
	last    time.Time // by this process's monotonic clock: the last write seen, or when watching began
	maxRev  uint64    // the highest revision seen of its instance records, deletes included
	insts   map[string]dynInst
}

type dynInst struct {
	rev     uint64
	at      time.Time // monotonic: when its last write was seen
	timeout time.Duration
}

// dynamicMember is a dynamic instance's membership runtime.
type dynamicMember struct {
	m        *Member
	kv       jetstream.KeyValue // DynamicBucket
	gkv      jetstream.KeyValue // the group's bucket
	prefix   string
	tok      string
	instance string
	key      string // this instance's record
	timeout  time.Duration
	started  time.Time

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	dynamic  bool
	peers    map[string]*dynPeer // by token
	beat     uint64
	inGroup  bool
	warned   string
	addAfter time.Time
}

// startDynamic makes the instance's member follow it (JoinOptions.Dynamic):
// it writes the instance's liveness record, adds the member to the group
// unless it is there, and starts refreshing the record and watching the
// others. It runs once the instance has joined, so the membership it
// writes reaches the instance through its own watch.
func (m *Member) startDynamic(ctx context.Context) error {
	c := m.c
	si, err := c.streamInfo(ctx, m.stream)
	if err != nil {
		return err
	}
	sg, err := c.findGroup(ctx, KindElastic, m.stream, m.group)
	if err != nil {
		return err
	}
	if cfg, err := decodeElastic(sg.entry.Key(), sg.entry.Value()); err != nil {
		return err
	} else if err := roomFor(cfg, m.group, m.member); err != nil {
		return err // before anything is written
	}
	kv, err := c.bucketFor(ctx, DynamicBucket, si.Config.Replicas)
	if err != nil {
		return err
	}
	var id [8]byte
	_, _ = rand.Read(id[:])
	d := &dynamicMember{m: m, kv: kv, gkv: sg.kv, prefix: dynamicPrefix(m.stream, m.group), tok: dynamicToken(m.member),
		instance: hex.EncodeToString(id[:]), timeout: m.opts.SessionTimeout, started: time.Now(),
		peers: map[string]*dynPeer{}, done: make(chan struct{})}
	d.key = d.prefix + "." + d.tok + "." + d.instance
	if err := d.writeRecord(ctx); err != nil {
		return err
	}
	fail := func(err error) error {
		_ = kv.Delete(context.WithoutCancel(ctx), d.key)
		return err
	}
	cfg, _, err := c.getElastic(ctx, m.stream, m.group)
	if err != nil {
		return fail(err)
	}
	if cfg.IsMember(m.member) {
		_, err := kv.Get(ctx, d.prefix+"."+d.tok)
		switch {
		case err == nil:
			d.dynamic = true
		case !isNotFound(err):
			return fail(fmt.Errorf("read dynamic membership of %s: %w", m.member, err))
		}
		d.inGroup = true
	} else if err := d.addSelf(ctx); err != nil {
		return fail(err)
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	dw, err := kv.Watch(d.ctx, d.prefix+".>")
	if err != nil {
		d.cancel()
		return fail(fmt.Errorf("watch dynamic membership of %s: %w", d.prefix, err))
	}
	gw, err := sg.kv.Watch(d.ctx, Key(m.stream, m.group))
	if err != nil {
		d.cancel()
		return fail(fmt.Errorf("watch group %s: %w", Key(m.stream, m.group), err))
	}
	m.mu.Lock()
	closed := m.dynClosed
	if !closed {
		m.dyn = d
	}
	m.mu.Unlock()
	go d.run(dw, gw)
	if closed {
		// The instance stopped while this was under way: leave as it would.
		d.leave(m.StopCause())
	}
	return nil
}

// leaveDynamic runs on the instance's stop, after its release.
func (m *Member) leaveDynamic(cause EventCause) {
	m.mu.Lock()
	d := m.dyn
	m.dyn, m.dynClosed = nil, true
	m.mu.Unlock()
	if d != nil {
		d.leave(cause)
	}
}

func (d *dynamicMember) writeRecord(ctx context.Context) error {
	d.mu.Lock()
	d.beat++
	host, _ := os.Hostname()
	rec := dynamicRecord{Member: d.m.member, Instance: d.instance, Host: host, PID: os.Getpid(), Started: d.started,
		SessionTimeout: d.timeout.String(), Refresh: dynamicRefresh.String(), Dynamic: d.dynamic, Beat: d.beat}
	d.mu.Unlock()
	raw, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := d.kv.Put(ctx, d.key, raw); err != nil {
		return fmt.Errorf("write liveness record %s: %w", d.key, err)
	}
	return nil
}

// addSelf marks the member dynamic and adds it to the group, the fewest
// partitions moving. The mark comes first: a member in the list without it
// would be taken for an operator's, never to be reaped.
func (d *dynamicMember) addSelf(ctx context.Context) error {
	m := d.m
	raw, err := json.Marshal(dynamicMarker{Member: m.member, Since: time.Now().UTC(), SessionTimeout: d.timeout.String()})
	if err != nil {
		return err
	}
	mark, err := d.kv.Put(ctx, d.prefix+"."+d.tok, raw)
	if err != nil {
		return fmt.Errorf("mark member %s dynamic: %w", m.member, err)
	}
	mc, err := m.c.updateElastic(ctx, m.stream, m.group, changeOptions{minimal: true}, func(cfg *ElasticConfig, mc *MembershipChange) error {
		if cfg.IsMember(m.member) {
			mc.Unchanged = []string{m.member}
			return nil
		}
		if err := roomFor(*cfg, m.group, m.member); err != nil {
			return err
		}
		setMembers(cfg, append(currentMembers(*cfg), m.member), true)
		mc.Changed = []string{m.member}
		return nil
	})
	if err != nil {
		_ = d.kv.Delete(context.WithoutCancel(ctx), d.prefix+"."+d.tok, jetstream.LastRevision(mark))
		return err
	}
	d.mu.Lock()
	d.dynamic, d.inGroup = true, true
	d.mu.Unlock()
	if len(mc.Changed) > 0 {
		m.emit(Event{Kind: EventMemberAdded, Peer: m.member, Partitions: mc.Config.Assignment().MemberPartitions(m.member),
			Reason: fmt.Sprintf("added member %s to the group (dynamic, session timeout %s): %d partition(s) moved", m.member, d.timeout, len(mc.Moves))})
	}
	return nil
}

// roomFor refuses to add member to a group with as many members as
// partitions.
func roomFor(cfg ElasticConfig, group, member string) error {
	if cfg.IsMember(member) {
		return nil
	}
	if n := len(partition.BalancedMembers(append(currentMembers(cfg), member), -1)); n > cfg.MaxMembers {
		return invalid("member", member, "elastic group %q has %d partitions and as many members already: drop a member, or create the group with more partitions", group, cfg.MaxMembers)
	}
	return nil
}

// dropMember drops member from the group the fewest-moves way, writing
// nothing when it is not a member or ok (asked inside the compare-and-set
// loop, against the configuration about to be replaced) says no.
func (d *dynamicMember) dropMember(ctx context.Context, member string, ok func() bool) (MembershipChange, error) {
	m := d.m
	return m.c.updateElastic(ctx, m.stream, m.group, changeOptions{minimal: true}, func(cfg *ElasticConfig, mc *MembershipChange) error {
		if !cfg.IsMember(member) || (ok != nil && !ok()) {
			return nil
		}
		list := slices.DeleteFunc(currentMembers(*cfg), func(x string) bool { return x == member })
		setMembers(cfg, list, true)
		mc.Changed = []string{member}
		return nil
	})
}

func (d *dynamicMember) run(dw, gw jetstream.KeyWatcher) {
	defer close(d.done)
	defer func() {
		_ = dw.Stop()
		_ = gw.Stop()
	}()
	nc := d.m.c.Conn()
	tick := time.NewTicker(dynamicRefresh)
	defer tick.Stop()
	lastTick := time.Now()
	reconnects := nc.Stats().Reconnects
	dws, gws := dw.Updates(), gw.Updates()
	for {
		select {
		case <-d.ctx.Done():
			return
		case e, ok := <-dws:
			if !ok {
				dws = nil
				continue
			}
			d.observe(e)
		case e, ok := <-gws:
			if !ok {
				gws = nil
				continue
			}
			d.followConfig(e)
		case <-tick.C:
			late := time.Since(lastTick) > dynamicStarved
			lastTick = time.Now()
			n := nc.Stats().Reconnects
			if late || n != reconnects || !nc.IsConnected() {
				reconnects = n
				d.grace()
			}
			ctx, cancel := context.WithTimeout(d.ctx, dynamicRefresh*2)
			if err := d.writeRecord(ctx); err != nil && d.ctx.Err() == nil {
				d.warn(err)
			}
			d.rejoin(ctx)
			if !late {
				d.reap(ctx)
			}
			cancel()
		}
	}
}

func (d *dynamicMember) warn(err error) {
	d.mu.Lock()
	same := d.warned == err.Error()
	d.warned = err.Error()
	d.mu.Unlock()
	if !same {
		d.m.emit(Event{Kind: EventWarning, Err: err, Reason: "dynamic membership: " + err.Error()})
	}
}

// grace restarts every member's clock: this instance may have missed
// their writes.
func (d *dynamicMember) grace() {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range d.peers {
		p.last = now
		for id, in := range p.insts {
			in.at = now
			p.insts[id] = in
		}
	}
}

// observe takes in one change of the group's dynamic records. Only writes
// are signs of life; a delete (a clean stop, or a reaper tidying up) is not.
func (d *dynamicMember) observe(e jetstream.KeyValueEntry) {
	if e == nil {
		return
	}
	rest, ok := strings.CutPrefix(e.Key(), d.prefix+".")
	if !ok {
		return
	}
	tok, inst, _ := strings.Cut(rest, ".")
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.peers[tok]
	if p == nil {
		p = &dynPeer{last: now, insts: map[string]dynInst{}}
		d.peers[tok] = p
	}
	put := e.Operation() == jetstream.KeyValuePut
	if inst == "" {
		p.marker = 0
		if put {
			var mk dynamicMarker
			if json.Unmarshal(e.Value(), &mk) == nil && mk.Member != "" {
				p.member, p.marker, p.last = mk.Member, e.Revision(), now
				if t, err := time.ParseDuration(mk.SessionTimeout); err == nil {
					p.timeout = t
				}
			}
		}
		if tok == d.tok {
			// An operator's add takes the mark away: the member is theirs now.
			d.dynamic = p.marker != 0
		}
		return
	}
	p.maxRev = max(p.maxRev, e.Revision())
	if !put {
		delete(p.insts, inst)
		return
	}
	var rec dynamicRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Member == "" {
		return
	}
	in := dynInst{rev: e.Revision(), at: now}
	if t, err := time.ParseDuration(rec.SessionTimeout); err == nil {
		in.timeout = t
	}
	p.member, p.last = rec.Member, now
	p.insts[inst] = in
}

// followConfig notes whether the member is still in the group.
func (d *dynamicMember) followConfig(e jetstream.KeyValueEntry) {
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return
	}
	cfg, err := decodeElastic(e.Key(), e.Value())
	if err != nil {
		return
	}
	d.mu.Lock()
	d.inGroup = cfg.IsMember(d.m.member)
	d.mu.Unlock()
}

// rejoin adds the member again when it was dropped while this instance
// runs (reaped while cut off, or dropped by hand): the membership follows
// the processes.
func (d *dynamicMember) rejoin(ctx context.Context) {
	d.mu.Lock()
	in, wait := d.inGroup, time.Now().Before(d.addAfter)
	d.mu.Unlock()
	if in || wait || d.m.stopping.Load() {
		return
	}
	if err := d.addSelf(ctx); err != nil && d.ctx.Err() == nil {
		d.mu.Lock()
		d.addAfter = time.Now().Add(2 * time.Second)
		d.mu.Unlock()
		d.warn(err)
	}
}

func (p *dynPeer) sessionTimeout(own time.Duration) time.Duration {
	t := p.timeout
	for _, in := range p.insts {
		t = max(t, in.timeout)
	}
	if t <= 0 {
		t = own
	}
	return t
}

type reapCandidate struct {
	tok, member string
	marker      uint64
	maxRev      uint64
	timeout     time.Duration
	insts       map[string]uint64
}

// reap tidies away liveness records not written for their session timeout
// and drops the dynamic members all of whose records are that quiet.
func (d *dynamicMember) reap(ctx context.Context) {
	now := time.Now()
	var stale []struct {
		key string
		rev uint64
	}
	var gone []reapCandidate
	d.mu.Lock()
	for tok, p := range d.peers {
		timeout := p.sessionTimeout(d.timeout)
		if tok != d.tok && p.marker != 0 && now.Sub(p.last) > timeout {
			c := reapCandidate{tok: tok, member: p.member, marker: p.marker, maxRev: p.maxRev, timeout: timeout, insts: map[string]uint64{}}
			for id, in := range p.insts {
				c.insts[id] = in.rev
			}
			gone = append(gone, c)
			continue // its records go with it, once it is dropped
		}
		for id, in := range p.insts {
			if tok == d.tok && id == d.instance {
				continue
			}
			if t := max(in.timeout, MinSessionTimeout); now.Sub(in.at) > t {
				stale = append(stale, struct {
					key string
					rev uint64
				}{d.prefix + "." + tok + "." + id, in.rev})
			}
		}
	}
	d.mu.Unlock()
	for _, s := range stale {
		_ = d.kv.Delete(ctx, s.key, jetstream.LastRevision(s.rev))
	}
	for _, c := range gone {
		d.reapMember(ctx, c)
	}
}

// reapMember drops a dynamic member judged gone. Inside the
// compare-and-set loop it checks once more, on the server, that none of
// the member's records was written since it judged: a member coming back
// writes its record before it adds itself, so it is never dropped on news
// older than its return.
func (d *dynamicMember) reapMember(ctx context.Context, c reapCandidate) {
	quiet := func() bool {
		rev, err := d.latestRecord(ctx, c.tok)
		return err == nil && rev <= c.maxRev
	}
	mc, err := d.dropMember(ctx, c.member, quiet)
	if err != nil {
		if d.ctx.Err() == nil {
			d.warn(fmt.Errorf("drop member %s, gone for %s: %w", c.member, c.timeout, err))
		}
		return
	}
	if len(mc.Changed) > 0 {
		d.m.emit(Event{Kind: EventMemberDropped, Peer: c.member, Partitions: mc.Config.Assignment().MemberPartitions(d.m.member),
			Reason: fmt.Sprintf("dropped member %s: no sign of it for %s (its session timeout); %d partition(s) moved", c.member, c.timeout, len(mc.Moves))})
	} else if !quiet() {
		return // back meanwhile: its record says so, keep its mark
	}
	// Dropped now or before (by another instance): its mark and records go,
	// each only as last seen (a return writes them anew).
	_ = d.kv.Delete(ctx, d.prefix+"."+c.tok, jetstream.LastRevision(c.marker))
	for id, rev := range c.insts {
		_ = d.kv.Delete(ctx, d.prefix+"."+c.tok+"."+id, jetstream.LastRevision(rev))
	}
	d.mu.Lock()
	if p := d.peers[c.tok]; p != nil && p.marker == c.marker {
		p.last = time.Now()
	}
	d.mu.Unlock()
}

// latestRecord is the revision of the last write or delete of any of the
// member's instance records, as the server has it (0: none).
func (d *dynamicMember) latestRecord(ctx context.Context, tok string) (uint64, error) {
	s, err := d.m.c.js.Stream(ctx, "KV_"+DynamicBucket)
	if err != nil {
		return 0, err
	}
	msg, err := s.GetLastMsgForSubject(ctx, "$KV."+DynamicBucket+"."+d.prefix+"."+tok+".*")
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return msg.Sequence, nil
}

// leave ends the runtime on the instance's stop. Its record goes; on a
// clean stop of the member's last instance the member is dropped too (the
// instance has already handed its partitions back, so their new owners
// start from the oldest message it did not ack). "Last" is judged after
// the record is deleted, from the records still stored: of two instances
// stopping at once, at least the later one finds the other's gone.
func (d *dynamicMember) leave(cause EventCause) {
	d.cancel()
	<-d.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = d.kv.Delete(ctx, d.key)
	d.mu.Lock()
	dynamic := d.dynamic
	var seen map[string]dynInst
	var marker uint64
	if p := d.peers[d.tok]; p != nil {
		seen, marker = maps.Clone(p.insts), p.marker
	}
	d.mu.Unlock()
	if cause != CauseStopRequested || !dynamic {
		return
	}
	keys, err := d.m.c.kvKeys(ctx, d.kv, d.prefix+"."+d.tok+".*")
	if err != nil {
		return
	}
	others := false
	for _, k := range keys {
		id := k[strings.LastIndexByte(k, '.')+1:]
		if id == d.instance {
			continue
		}
		if _, err := d.kv.Get(ctx, k); isNotFound(err) {
			continue // deleted: that instance stopped
		}
		in, known := seen[id]
		if !known || time.Since(in.at) <= max(in.timeout, MinSessionTimeout) {
			others = true // alive, or too new to judge
		}
	}
	if others {
		return
	}
	d.unpinLeft(ctx)
	mc, err := d.dropMember(ctx, d.m.member, nil)
	if err != nil {
		d.m.emit(Event{Kind: EventWarning, Err: err, Reason: "dynamic membership: dropping the member on its last stop: " + err.Error()})
		return
	}
	if marker != 0 {
		_ = d.kv.Delete(ctx, d.prefix+"."+d.tok, jetstream.LastRevision(marker))
	}
	if len(mc.Changed) > 0 {
		d.m.emit(Event{Kind: EventMemberDropped, Peer: d.m.member,
			Reason: fmt.Sprintf("dropped member %s from the group: its last instance stopped; %d partition(s) moved", d.m.member, len(mc.Moves))})
	}
}

// unpinLeft, on a partition-layout group, unpins the partition consumers
// of the member's last instance, which has stopped. A partition runtime
// knows its pin only from a message delivered under it: one the server
// pinned while its partition was idle kept the pin for the pinned TTL
// after the stop, and the partition's new owner waited that long. As the
// member's last instance it is the only one that can hold these pins.
func (d *dynamicMember) unpinLeft(ctx context.Context) {
	m := d.m
	if m.layout == nil {
		return
	}
	cfg, _, err := m.c.getElastic(ctx, m.stream, m.group)
	if err != nil {
		return
	}
	s, err := m.c.js.Stream(ctx, m.cstream)
	if err != nil {
		return
	}
	for _, p := range cfg.Assignment().MemberPartitions(m.member) {
		_ = s.UnpinConsumer(ctx, PartitionConsumerName(m.group, p), PriorityGroup)
	}
}

// claimMembers removes the dynamic marks of members an operator added.
func (c *Client) claimMembers(ctx context.Context, stream, group string, members []string) {
	kv, err := c.bucket(ctx, DynamicBucket)
	if err != nil {
		return
	}
	for _, m := range members {
		key := dynamicPrefix(stream, group) + "." + dynamicToken(m)
		if e, err := kv.Get(ctx, key); err == nil {
			_ = kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		}
	}
}

// deleteDynamic removes a deleted group's dynamic marks and liveness
// records.
func (c *Client) deleteDynamic(ctx context.Context, stream, group string) {
	kv, err := c.js.KeyValue(ctx, DynamicBucket)
	if err != nil {
		return
	}
	keys, err := c.kvKeys(ctx, kv, dynamicPrefix(stream, group)+".>")
	if err != nil {
		return
	}
	for _, k := range keys {
		_ = kv.Purge(ctx, k)
	}
}

// dynamicSeen is what DynamicBucket holds of one member of a group, by
// the server's clock.
type dynamicSeen struct {
	// dynamic: its mark is there (it added itself); marked is when the
	// mark was written.
	dynamic bool
	marked  time.Time
	// timeout is the longest session timeout its mark and records
	// declare, 0 when none could be read.
	timeout time.Duration
	// lastSeen is the latest write of any of its liveness records,
	// instances how many records it has.
	lastSeen  time.Time
	instances int
}

// readDynamic reads a group's marks and liveness records in
// DynamicBucket, by member token. The bucket missing or unreadable gives
// none: no member of the group has ever joined dynamically, or this user
// may not read it.
func (c *Client) readDynamic(ctx context.Context, stream, group string) map[string]*dynamicSeen {
	kv, err := c.js.KeyValue(ctx, DynamicBucket)
	if err != nil {
		return nil
	}
	prefix := dynamicPrefix(stream, group) + "."
	keys, err := c.kvKeys(ctx, kv, prefix+">")
	if err != nil {
		return nil
	}
	out := map[string]*dynamicSeen{}
	for _, k := range keys {
		tok, inst, _ := strings.Cut(strings.TrimPrefix(k, prefix), ".")
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		ds := out[tok]
		if ds == nil {
			ds = &dynamicSeen{}
			out[tok] = ds
		}
		var declared struct {
			SessionTimeout string `json:"session_timeout"`
		}
		if json.Unmarshal(e.Value(), &declared) == nil {
			if t, err := time.ParseDuration(declared.SessionTimeout); err == nil {
				ds.timeout = max(ds.timeout, t)
			}
		}
		if inst == "" {
			ds.dynamic, ds.marked = true, e.Created()
			continue
		}
		ds.instances++
		if e.Created().After(ds.lastSeen) {
			ds.lastSeen = e.Created()
		}
	}
	return out
}

// fillDynamic marks gi's dynamic members and when each was last seen,
// from the group's records in DynamicBucket (none without the bucket).
func (c *Client) fillDynamic(ctx context.Context, gi *health.GroupInfo) {
	seen := c.readDynamic(ctx, gi.Stream, gi.Group)
	for i := range gi.Members {
		ms := &gi.Members[i]
		if ds := seen[dynamicToken(ms.Member)]; ds != nil {
			ms.Dynamic, ms.LastSeen, ms.Instances = ds.dynamic, ds.lastSeen, ds.instances
		}
	}
}
