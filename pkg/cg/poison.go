package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The member side of poison messages (poison_api.go says what they are).
// Under a RetryPolicy the binding's sink hands each message to
// poisonState.handle instead of straight to the handler: it runs the
// handler with an outcome recorder behind the message's settle methods,
// and afterwards settles the message itself: a failure is nak'ed with its
// backoff delay (and the lane stage holds its key until the redelivery is
// back), or, once poison, dead-lettered, parked or stopped on. Everything
// happens inside the handler call, so a concurrent stage keeps the key's
// later messages waiting exactly as for a message still in user code.

// poisonState is a member's poison handling under a retry policy.
type poisonState struct {
	m      *Member
	pol    RetryPolicy
	action PoisonAction
	kv     jetstream.KeyValue
	prefix string
	once   sync.Once

	mu sync.Mutex
	// records are the member's parked messages as stored, by sequence;
	// releases the release requests not yet acted on (true: skip).
	records  map[uint64]ParkedMessage
	releases map[uint64]bool
	// relRev is the KV revision of each release request seen; used the
	// newest revision acted on per sequence, so that a request seen again
	// (the watch replays what the join read) is not acted on twice.
	relRev map[uint64]uint64
	used   map[uint64]uint64
	// held are parked messages this instance holds (kept alive).
	held map[uint64]heldMsg
	// holds are how long the lane stage holds the key of a message that
	// ended unacked: until its backoff passed, or forever (parked, stopped).
	holds map[uint64]time.Time
	// owed are poison messages whose dead letter (or park record) could
	// not be written yet: the handler is done with them, and each
	// redelivery retries the write only (see settleOwed).
	owed map[uint64]owedPoison
}

// owedPoison is what a poison message still owes: the reason and error to
// dead-letter (or park) it with, and the writes tried so far.
type owedPoison struct {
	reason, errText string
	attempts        int
}

// maxOwedBackoff bounds the wait between two tries of a dead letter that
// cannot be written (its stream is gone, the publish is denied).
const maxOwedBackoff = 30 * time.Second

type heldMsg struct {
	raw  *nats.Msg
	sink bindingSink
}

// holdForever holds a key until its message comes back (a release).
var holdForever = time.Now().Add(100 * 365 * 24 * time.Hour)

// outcomeKind is how a handler asked to settle a message under a policy.
type outcomeKind int

const (
	outNone outcomeKind = iota
	outNak
	outTerm
)

// msgOutcome records, for one delivery under a retry policy, what the
// handler asked for (the nak and term methods record instead of sending)
// and the last error it reported.
type msgOutcome struct {
	mu      sync.Mutex
	kind    outcomeKind
	delay   time.Duration
	delayed bool
	err     error
}

func (o *msgOutcome) set(k outcomeKind, delay time.Duration, delayed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.kind == outTerm {
		return // poison stays poison
	}
	o.kind, o.delay, o.delayed = k, delay, delayed
}

func (o *msgOutcome) setErr(err error) {
	if err == nil {
		return
	}
	o.mu.Lock()
	o.err = err
	o.mu.Unlock()
}

func (o *msgOutcome) get() (outcomeKind, time.Duration, bool, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kind, o.delay, o.delayed, o.err
}

// Fail records err as the error of this attempt, for RetryPolicy.Classify
// and the dead-letter header Cg-Error. It does not settle the message: the
// handler then returns without an ack (or naks), and the retry policy
// decides. Without a retry policy it does nothing.
func (m *Msg) Fail(err error) {
	if m.out != nil {
		m.out.setErr(err)
	}
}

// Poison says the message is poison: no retry. Under a retry policy the
// policy's action is taken (dead-letter, park or stop) and err is recorded
// for the Cg-Error header; without one it is Term.
func (m *Msg) Poison(err error) error {
	if m.out != nil {
		m.out.setErr(err)
	}
	return m.Msg.Term()
}

// PoisonKeyPrefix is the prefix of a member's keys in PoisonBucket:
// <kind>.<stream>.<group>.<member>, the member name with every byte outside
// [A-Za-z0-9_-] written =XX, so that it is one KV token. Under it:
// parked.<seq> (a ParkedMessage), release.<seq> (a release request) and
// counts (dead-letter counts per partition).
func PoisonKeyPrefix(kind Kind, stream, group, member string) string {
	return string(kind) + "." + stream + "." + group + "." + keyToken(member)
}

func keyToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	return b.String()
}

func unKeyToken(t string) string {
	var b strings.Builder
	for i := 0; i < len(t); i++ {
		if t[i] == '=' && i+2 < len(t) {
			if v, err := strconv.ParseUint(t[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(v))
				i += 2
				continue
			}
		}
		b.WriteByte(t[i])
	}
	return b.String()
}

// EnsurePoisonBucket creates PoisonBucket when it is missing (file storage,
// replicas as given, at least 1). Group creation calls it; members never do.
func (c *Client) EnsurePoisonBucket(ctx context.Context, replicas int) error {
	_, err := c.bucketFor(ctx, PoisonBucket, replicas)
	return err
}

func (c *Client) poisonKV(ctx context.Context) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, PoisonBucket)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("%w: KV bucket %s, which keeps parked messages, release requests and dead-letter counts, does not exist; it is made when a group is created (or created again identically) by someone allowed to create buckets", ErrNoPoisonState, PoisonBucket)
		}
		return nil, fmt.Errorf("open KV bucket %s: %w", PoisonBucket, err)
	}
	return kv, nil
}

// setupPoison checks and prepares a member's retry policy before anything
// is joined: the dead-letter subject is captured by a stream that is not
// the group's, and the poison bucket exists.
func (m *Member) setupPoison(ctx context.Context) error {
	p := m.opts.Retry
	if p == nil {
		return nil
	}
	if err := p.Validate(); err != nil {
		return err
	}
	pol := *p
	pol.Backoff = slices.Clone(p.Backoff)
	if pol.DeadLetter != "" {
		name, err := m.c.js.StreamNameBySubject(ctx, pol.DeadLetter)
		if err != nil {
			if errors.Is(err, jetstream.ErrStreamNotFound) || isNotFound(err) {
				return fmt.Errorf("%w: no stream captures dead-letter subject %q, so dead letters would be lost: create a stream that captures it first", ErrStreamNotFound, pol.DeadLetter)
			}
			return fmt.Errorf("look up the stream capturing dead-letter subject %q: %w", pol.DeadLetter, err)
		}
		if name == m.stream || name == m.cstream {
			return invalid("dead-letter subject", strconv.Quote(pol.DeadLetter), "is captured by the group's own stream %s, so dead letters would be consumed again: use a subject a separate stream captures", name)
		}
	}
	kv, err := m.c.poisonKV(ctx)
	if err != nil {
		return err
	}
	ps := &poisonState{m: m, pol: pol, action: pol.action(), kv: kv,
		prefix:  PoisonKeyPrefix(m.kind.name(), m.stream, m.group, m.member),
		records: map[uint64]ParkedMessage{}, releases: map[uint64]bool{},
		relRev: map[uint64]uint64{}, used: map[uint64]uint64{},
		held: map[uint64]heldMsg{}, holds: map[uint64]time.Time{}, owed: map[uint64]owedPoison{}}
	// What is parked already: a redelivery of it is parked again at once.
	keys, err := m.c.kvKeys(ctx, kv, ps.prefix+".>")
	if err != nil {
		return fmt.Errorf("read %s in KV bucket %s: %w", ps.prefix, PoisonBucket, err)
	}
	for _, k := range keys {
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		if seq, ok := strings.CutPrefix(k, ps.prefix+".owed."); ok {
			var o owedRecord
			if n, err := strconv.ParseUint(seq, 10, 64); err == nil && json.Unmarshal(e.Value(), &o) == nil {
				ps.owed[n] = owedPoison{reason: o.Reason, errText: o.Error}
			}
			continue
		}
		ps.apply(e.Key(), e.Value(), e.Revision(), false)
	}
	m.stages.poison = ps
	return nil
}

// start begins watching the member's keys (release requests) and keeping
// parked messages alive, once the member runs.
func (ps *poisonState) start() {
	ps.once.Do(func() {
		go ps.watch()
		go ps.keepParked()
	})
}

// apply takes in one stored key (deleted: a deletion). It returns the
// sequence of a release request just seen (0 for anything else).
func (ps *poisonState) apply(key string, val []byte, rev uint64, deleted bool) uint64 {
	rest, ok := strings.CutPrefix(key, ps.prefix+".")
	if !ok {
		return 0
	}
	what, seqs, _ := strings.Cut(rest, ".")
	seq, err := strconv.ParseUint(seqs, 10, 64)
	if err != nil {
		return 0
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	switch what {
	case "parked":
		var rec ParkedMessage
		if deleted || json.Unmarshal(val, &rec) != nil {
			delete(ps.records, seq)
			return 0
		}
		ps.records[seq] = rec
	case "release":
		var req releaseRequest
		if deleted || json.Unmarshal(val, &req) != nil {
			delete(ps.releases, seq)
			return 0
		}
		if rev <= ps.used[seq] {
			return 0 // acted on already
		}
		ps.releases[seq] = req.Skip
		ps.relRev[seq] = rev
		return seq
	}
	return 0
}

// releaseRequest is the value of a release key.
type releaseRequest struct {
	Skip bool      `json:"skip"`
	At   time.Time `json:"at"`
}

// watch follows the member's keys; a release of a message this instance
// holds parked hands it back (nak) so it is redelivered at once, and
// handle then retries or skips it.
func (ps *poisonState) watch() {
	m := ps.m
	w, err := ps.kv.Watch(m.ctx, ps.prefix+".>")
	if err != nil {
		if m.ctx.Err() != nil || m.stopping.Load() {
			// The member stopped while the watch was being set up: there
			// is nothing left to watch for, and no event may follow its
			// stop (its receiver may be gone, as consume's output is).
			return
		}
		m.emit(Event{Kind: EventWarning, Err: err, Reason: "cannot watch for releases of parked messages: " + err.Error()})
		return
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case <-m.done:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			del := e.Operation() != jetstream.KeyValuePut
			seq := ps.apply(e.Key(), e.Value(), e.Revision(), del)
			if seq == 0 {
				continue
			}
			ps.mu.Lock()
			h, ok := ps.held[seq]
			delete(ps.held, seq)
			ps.mu.Unlock()
			if ok {
				_ = h.raw.Nak()
			}
		}
	}
}

// keepParked sends in-progress acks for the parked messages this instance
// holds, so the server does not redeliver them; one whose binding is gone
// is let go (the next binding or instance is redelivered it after the ack
// wait and parks it again).
func (ps *poisonState) keepParked() {
	m := ps.m
	t := time.NewTicker(max(m.opts.AckWait/4, 20*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.done:
			return
		case <-t.C:
		}
		m.mu.Lock()
		cur := m.bound
		m.mu.Unlock()
		ps.mu.Lock()
		var due []heldMsg
		for seq, h := range ps.held {
			if h.sink.b != cur {
				delete(ps.held, seq)
				continue
			}
			due = append(due, h)
		}
		ps.mu.Unlock()
		for _, h := range due {
			_ = h.sink.keepAlive(h.raw)
		}
	}
}

// holdUntil tells the lane stage how long to hold the key of raw, which
// ended unacked: past its backoff, or until it comes back when parked.
func (s bindingSink) holdUntil(raw *nats.Msg) (time.Time, bool) {
	ps := s.m.stages.poison
	if ps == nil {
		return time.Time{}, false
	}
	seq := streamSeq(raw)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	t, ok := ps.holds[seq]
	return t, ok
}

// before deals with what the policy knows of raw before user code may see
// it: a parked message not released is held again, one released to be
// skipped is dead-lettered, one whose dead letter is owed has only its
// publish retried. call is false when the policy settled (or holds) raw
// itself; parked says raw was parked and is released to be retried (rec
// is its record).
func (ps *poisonState) before(s bindingSink, raw *nats.Msg, md *nats.MsgMetadata, subject string, part int) (rec ParkedMessage, parked, call bool) {
	m := ps.m
	seq := md.Sequence.Stream
	ps.mu.Lock()
	rec, parked = ps.records[seq]
	skip, released := ps.releases[seq]
	delete(ps.holds, seq)
	ps.mu.Unlock()
	if parked && !released {
		// Parked before (by this or another instance): parked again,
		// without the handler.
		rec.Deliveries = md.NumDelivered
		ps.hold(s, raw, rec)
		return rec, parked, false
	}
	if parked && skip {
		dl := rec.DeadLetter
		if dl == "" {
			dl = ps.pol.DeadLetter
		}
		if dl == "" {
			// Nowhere to skip it to (Release refuses this): parked on.
			ps.mu.Lock()
			ps.useRelease(seq)
			ps.mu.Unlock()
			ps.deleteKey(rec, "release")
			ps.hold(s, raw, rec)
			return rec, parked, false
		}
		if ps.deadLetter(s, raw, md, dl, subject, part, DLReasonSkip, rec.Error) {
			ps.clear(seq)
		}
		return rec, parked, false
	}
	if parked {
		// Released to retry once more: the request is used up now.
		ps.mu.Lock()
		ps.useRelease(seq)
		ps.mu.Unlock()
		ps.deleteKey(rec, "release")
	}
	ps.mu.Lock()
	owed, isOwed := ps.owed[seq]
	ps.mu.Unlock()
	if !parked && isOwed {
		// The handler is done with it (its deliveries used up, or it
		// called the message poison): what failed since is the dead
		// letter's publish, so only that is tried again, never the
		// handler. The delivery count cannot tell this apart (a message
		// handed back unhandled also counts one), so it is the owed
		// record, kept here and in the poison bucket for the member's
		// next instance, that does.
		if s.b.releasing.Load() || m.stopping.Load() || m.ackStale(raw) {
			if !m.ackStale(raw) {
				_ = raw.Nak()
			}
			return rec, parked, false
		}
		ps.settle(s, raw, md, subject, part, owed.reason, owed.errText, nil, false)
		return rec, parked, false
	}
	return rec, parked, true
}

// handle runs the handler for raw under the retry policy and settles it.
func (ps *poisonState) handle(s bindingSink, raw *nats.Msg) {
	ps.start()
	m := ps.m
	subject, part := partition.StripPartition(raw.Subject)
	md, err := raw.Metadata()
	if err != nil {
		m.handler(s.handlerCtx(), &Msg{Msg: s.msg(raw), subject: subject, partition: part, pinID: raw.Header.Get("Nats-Pin-Id")})
		return
	}
	seq := md.Sequence.Stream
	rec, parked, call := ps.before(s, raw, md, subject, part)
	if !call {
		return
	}
	out := &msgOutcome{}
	j := s.msg(raw)
	j.out = out
	msg := &Msg{Msg: j, subject: subject, partition: part, pinID: raw.Header.Get("Nats-Pin-Id"), out: out}
	m.handler(s.handlerCtx(), msg)
	if s.acked(raw) {
		if parked {
			ps.clear(seq)
		}
		return
	}
	kind, delay, delayed, herr := out.get()
	if s.b.releasing.Load() || m.stopping.Load() || m.ackStale(raw) {
		// Leaving, or no longer sure of the pin: the next pinned
		// instance (or owner) retries it.
		if !m.ackStale(raw) {
			_ = raw.Nak()
		}
		return
	}
	reason := ""
	switch {
	case kind == outTerm:
		reason = DLReasonTerm
	case ps.pol.Classify != nil && ps.pol.Classify(msg, herr):
		reason = DLReasonClassified
	case parked:
		reason = rec.Reason
	case ps.pol.MaxDeliver > 0 && md.NumDelivered >= uint64(ps.pol.MaxDeliver):
		reason = DLReasonMaxDeliver
	}
	if reason == "" {
		if kind == outNone && len(ps.pol.Backoff) == 0 {
			// No schedule and no nak: redelivered after the ack wait, as
			// without a policy (never a tight loop of redeliveries).
			return
		}
		d := ps.pol.delay(md.NumDelivered)
		if delayed {
			d = delay
		}
		ps.mu.Lock()
		ps.holds[seq] = time.Now().Add(d)
		ps.mu.Unlock()
		if d > 0 {
			_ = raw.NakWithDelay(d)
		} else {
			_ = raw.Nak()
		}
		return
	}
	errText := ""
	if herr != nil {
		errText = herr.Error()
	}
	ps.settle(s, raw, md, subject, part, reason, errText, herr, parked)
}

// The retry policy as a batch stage uses it (batch.go). A batch stage
// hands its messages to user code several at a time, so the policy cannot
// run inside one handler call: the stage asks it, per message, whether the
// message must first be dealt with alone (waiting), lets it do that
// (first), and, once a message has failed alone, has it take the policy's
// action (now).

// waiting reports whether raw is a message the policy must deal with
// before user code sees it: parked (released or not), or owed to the
// dead-letter subject.
func (ps *poisonState) waiting(raw *nats.Msg) bool {
	seq := streamSeq(raw)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, parked := ps.records[seq]
	_, owed := ps.owed[seq]
	return parked || owed
}

// first deals with a waiting message as handle does before its handler
// call; true when user code must see it once more (released to retry).
func (ps *poisonState) first(s bindingSink, raw *nats.Msg) bool {
	ps.start()
	md, err := raw.Metadata()
	if err != nil {
		return true
	}
	subject, part := partition.StripPartition(raw.Subject)
	_, _, call := ps.before(s, raw, md, subject, part)
	return call
}

// now takes the policy's action on raw, which failed in user code on its
// own after its batch failed every attempt (herr: the last error).
func (ps *poisonState) now(s bindingSink, raw *nats.Msg, herr error) {
	ps.start()
	md, err := raw.Metadata()
	if err != nil {
		return
	}
	m := ps.m
	if s.b.releasing.Load() || m.stopping.Load() || m.ackStale(raw) {
		if !m.ackStale(raw) {
			_ = raw.Nak()
		}
		return
	}
	subject, part := partition.StripPartition(raw.Subject)
	seq := md.Sequence.Stream
	ps.mu.Lock()
	rec, parked := ps.records[seq]
	ps.mu.Unlock()
	reason := DLReasonMaxDeliver
	if parked {
		reason = rec.Reason
	}
	errText := ""
	if herr != nil {
		errText = herr.Error()
	}
	ps.settle(s, raw, md, subject, part, reason, errText, herr, parked)
}

// handled forgets raw's park record once user code handled it (a parked
// message released to retry, then acked).
func (ps *poisonState) handled(raw *nats.Msg) {
	seq := streamSeq(raw)
	ps.mu.Lock()
	_, parked := ps.records[seq]
	ps.mu.Unlock()
	if parked {
		ps.clear(seq)
	}
}

// settle takes the policy's action on a poison message: dead-letter, stop
// or park it.
func (ps *poisonState) settle(s bindingSink, raw *nats.Msg, md *nats.MsgMetadata, subject string, part int, reason, errText string, herr error, parked bool) {
	m := ps.m
	seq := md.Sequence.Stream
	switch ps.action {
	case PoisonDeadLetter:
		if ps.deadLetter(s, raw, md, ps.pol.DeadLetter, subject, part, reason, errText) && parked {
			ps.clear(seq)
		}
	case PoisonStop:
		ps.mu.Lock()
		ps.holds[seq] = holdForever
		ps.mu.Unlock()
		perr := &PoisonError{Stream: m.stream, Consumed: md.Stream, Sequence: seq, Subject: subject, Partition: part,
			Deliveries: md.NumDelivered, Reason: reason, Err: herr}
		go m.stopFor(perr, CausePoison)
	default:
		rec := ParkedMessage{Member: m.member, Stream: md.Stream, Sequence: seq, Subject: subject, Partition: part,
			Key: ps.keyOf(subject), Deliveries: md.NumDelivered, Error: errText, Reason: reason,
			DeadLetter: ps.pol.DeadLetter, ParkedAt: time.Now().UTC()}
		ps.mu.Lock()
		ps.records[seq] = rec
		ps.mu.Unlock()
		if err := ps.record(rec); err != nil {
			// Parked all the same (held here, its key waiting, the handler
			// done with it); the record is written again until it holds,
			// so that release can see it.
			m.emit(Event{Kind: EventWarning, Err: err, Reason: fmt.Sprintf("parked message %d is not recorded in KV bucket %s yet (%v): it is held here and the record retried", seq, PoisonBucket, err)})
			go ps.recordLater(rec)
		}
		ps.hold(s, raw, rec)
		m.emit(Event{Kind: EventPoison, Cause: CauseParked, Reason: fmt.Sprintf("parked message %s sequence %d (subject %s, partition %d) after %s (%s): its key waits for a release",
			md.Stream, seq, subject, part, plural(md.NumDelivered, "delivery", "deliveries"), strings.ReplaceAll(reason, "_", " "))})
	}
}

// owedRecord is the value of an owed key: a poison message whose dead
// letter is still to be published.
type owedRecord struct {
	Reason string `json:"reason"`
	Error  string `json:"error,omitempty"`
}

// writeOwed records in the poison bucket that seq's dead letter is owed,
// so that the member's next instance, redelivered it, publishes it without
// handing it to its handler again. Best effort: when the bucket cannot be
// written either, this instance still knows, and a next one hands the
// message to its handler once more before dead-lettering it.
func (ps *poisonState) writeOwed(seq uint64, o owedPoison) {
	val, _ := json.Marshal(owedRecord{Reason: o.reason, Error: o.errText})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = ps.kv.Put(ctx, ps.key(seq, "owed"), val)
}

// record writes a parked message's record.
func (ps *poisonState) record(rec ParkedMessage) error {
	val, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = ps.kv.Put(ctx, ps.key(rec.Sequence, "parked"), val)
	return err
}

// recordLater retries a parked message's record, with a doubling wait,
// while the message is still parked and the instance runs.
func (ps *poisonState) recordLater(rec ParkedMessage) {
	m := ps.m
	for d := time.Second; ; d = min(2*d, maxOwedBackoff) {
		select {
		case <-m.done:
			return
		case <-time.After(d):
		}
		ps.mu.Lock()
		_, still := ps.records[rec.Sequence]
		ps.mu.Unlock()
		if !still {
			return
		}
		if err := ps.record(rec); err == nil {
			m.emit(Event{Kind: EventWarning, Reason: fmt.Sprintf("parked message %d is recorded in KV bucket %s now", rec.Sequence, PoisonBucket)})
			return
		}
	}
}

// keyOf is the partitioning key of a subject when the member reads keys
// (concurrent instances), else "".
func (ps *poisonState) keyOf(subject string) string {
	if ps.m.stages.keyOf == nil {
		return ""
	}
	if k, ok := ps.m.stages.keyOf(subject); ok {
		return k
	}
	return ""
}

func (ps *poisonState) key(seq uint64, what string) string {
	return ps.prefix + "." + what + "." + strconv.FormatUint(seq, 10)
}

// hold keeps raw parked on this instance: kept alive, its key held. A
// release that came in meanwhile (the watcher found nothing held to hand
// back) hands it back at once.
func (ps *poisonState) hold(s bindingSink, raw *nats.Msg, rec ParkedMessage) {
	s.settled(ResultParked)
	s.run = nil // the handler call is over; a release uses the sink later
	ps.mu.Lock()
	ps.records[rec.Sequence] = rec
	ps.holds[rec.Sequence] = holdForever
	_, released := ps.releases[rec.Sequence]
	if !released {
		ps.held[rec.Sequence] = heldMsg{raw: raw, sink: s}
	}
	ps.mu.Unlock()
	if released {
		_ = raw.Nak()
	}
}

// useRelease marks seq's release request acted on. Under ps.mu.
func (ps *poisonState) useRelease(seq uint64) {
	ps.used[seq] = max(ps.used[seq], ps.relRev[seq])
	delete(ps.releases, seq)
	delete(ps.relRev, seq)
}

// clear forgets a parked message that was handled or dead-lettered.
func (ps *poisonState) clear(seq uint64) {
	ps.mu.Lock()
	rec, ok := ps.records[seq]
	delete(ps.records, seq)
	ps.useRelease(seq)
	delete(ps.held, seq)
	delete(ps.holds, seq)
	ps.mu.Unlock()
	if !ok {
		rec = ParkedMessage{Sequence: seq}
	}
	ps.deleteKey(rec, "release")
	ps.deleteKey(rec, "parked")
	ps.m.emit(Event{Kind: EventPoison, Cause: CauseReleased, Reason: fmt.Sprintf("parked message %d released", seq)})
}

func (ps *poisonState) deleteKey(rec ParkedMessage, what string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = ps.kv.Delete(ctx, ps.key(rec.Sequence, what))
}

// dlSkipHeader: the original's headers a dead letter does not carry, the
// server's own (Nats-*): some it refuses on a publish (a sourced message's
// Nats-Stream-Source), some would act on the dead-letter stream
// (Nats-Rollup, Nats-Expected-*, Nats-TTL), and Nats-Msg-Id is cg's.
func dlSkipHeader(k string) bool {
	return len(k) >= 5 && strings.EqualFold(k[:5], "Nats-")
}

// deadLetter publishes raw to subject, waits for the PubAck, then acks raw
// (in that order: a crash in between leaves the original to be redelivered
// and dead-lettered again under the same Nats-Msg-Id). It reports whether
// both went through; on a failed publish the message is retried later.
func (ps *poisonState) deadLetter(s bindingSink, raw *nats.Msg, md *nats.MsgMetadata, subject, origSubject string, part int, reason, errText string) bool {
	m := ps.m
	seq := md.Sequence.Stream
	hdr := nats.Header{}
	for k, v := range raw.Header {
		if !dlSkipHeader(k) {
			hdr[k] = slices.Clone(v)
		}
	}
	hdr.Set(HeaderDLStream, m.stream)
	hdr.Set(HeaderDLConsumedStream, md.Stream)
	hdr.Set(HeaderDLSequence, strconv.FormatUint(seq, 10))
	hdr.Set(HeaderDLSubject, origSubject)
	hdr.Set(HeaderDLPartition, strconv.Itoa(part))
	hdr.Set(HeaderDLKind, m.kind.name().String())
	hdr.Set(HeaderDLGroup, m.group)
	hdr.Set(HeaderDLMember, m.member)
	hdr.Set(HeaderDLDeliveries, strconv.FormatUint(md.NumDelivered, 10))
	hdr.Set(HeaderDLError, errText)
	hdr.Set(HeaderDLReason, reason)
	hdr.Set(HeaderDLTime, time.Now().UTC().Format(time.RFC3339Nano))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	id := "cg-dl." + md.Stream + "." + strconv.FormatUint(seq, 10)
	if _, err := m.c.js.PublishMsg(ctx, &nats.Msg{Subject: subject, Header: hdr, Data: raw.Data}, jetstream.WithMsgID(id)); err != nil {
		// The message stays poison: it is owed to the dead-letter
		// subject, and its redeliveries (after a doubling wait, its key
		// held meanwhile, other keys going on) retry the publish only,
		// never the handler.
		ps.mu.Lock()
		o, had := ps.owed[seq]
		o.reason, o.errText = reason, errText
		o.attempts++
		ps.owed[seq] = o
		d := min(max(ps.pol.delay(md.NumDelivered), 250*time.Millisecond)<<min(o.attempts-1, 16), maxOwedBackoff)
		ps.holds[seq] = time.Now().Add(d)
		ps.mu.Unlock()
		if !had {
			ps.writeOwed(seq, o)
		}
		_ = raw.NakWithDelay(d)
		m.emit(Event{Kind: EventWarning, Err: err, Reason: fmt.Sprintf("dead letter of message %d to %s not confirmed (%v, attempt %d): it is held, its key waiting, and the publish retried in %s without handling it again", seq, subject, err, o.attempts, d)})
		return false
	}
	ps.mu.Lock()
	_, had := ps.owed[seq]
	delete(ps.owed, seq)
	ps.mu.Unlock()
	if had {
		ps.deleteKey(ParkedMessage{Sequence: seq}, "owed")
	}
	if hook := m.opts.afterDeadLetter; hook != nil && hook(seq) {
		return false // a test's crash between the PubAck and the ack
	}
	if err := s.msg(raw).DoubleAck(ctx); err != nil {
		// Redelivered later and dead-lettered again under the same id.
		m.emit(Event{Kind: EventWarning, Err: err, Reason: fmt.Sprintf("message %d was dead-lettered to %s but its ack failed (%v): a redelivery publishes it again under the same message id", seq, subject, err)})
		return false
	}
	s.settled(ResultDeadLettered)
	ps.count(part)
	m.emit(Event{Kind: EventPoison, Cause: CauseDeadLettered, Reason: fmt.Sprintf("dead-lettered message %s sequence %d (subject %s, partition %d) to %s after %s (%s)",
		md.Stream, seq, origSubject, part, subject, plural(md.NumDelivered, "delivery", "deliveries"), strings.ReplaceAll(reason, "_", " "))})
	return true
}

// poisonCounts is the value of a member's counts key.
type poisonCounts struct {
	DeadLettered map[string]uint64 `json:"dead_lettered"`
}

// count adds one dead letter of partition part to the member's counts
// (compare-and-set; counted once the original is acked, so a crash right
// after the ack may leave one uncounted).
func (ps *poisonState) count(part int) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	key := ps.prefix + ".counts"
	for range 20 {
		var c poisonCounts
		var rev uint64
		e, err := ps.kv.Get(ctx, key)
		switch {
		case err == nil:
			_ = json.Unmarshal(e.Value(), &c)
			rev = e.Revision()
		case !errors.Is(err, jetstream.ErrKeyNotFound):
			return
		}
		if c.DeadLettered == nil {
			c.DeadLettered = map[string]uint64{}
		}
		c.DeadLettered[strconv.Itoa(part)]++
		val, _ := json.Marshal(c)
		if rev == 0 {
			_, err = ps.kv.Create(ctx, key, val)
		} else {
			_, err = ps.kv.Update(ctx, key, val, rev)
		}
		if err == nil {
			return
		}
	}
}

// Release lets a member's parked message (o.Seq), or all of them (Seq 0),
// go: retried once more by the handler, or (Skip) published to the
// dead-letter subject and acked. It writes a release request the member's
// pinned instance acts on; the result lists what was asked for.
func (c *Client) Release(ctx context.Context, kind Kind, stream, group, member string, o ReleaseOptions) (ReleaseResult, error) {
	res := ReleaseResult{Kind: kind, Stream: stream, Group: group, Member: member, Skip: o.Skip}
	if err := kind.Valid(); err != nil {
		return res, err
	}
	for _, n := range [][2]string{{"stream", stream}, {"group", group}, {"member", member}} {
		if err := ValidateName(n[0], n[1]); err != nil {
			return res, err
		}
	}
	cfg, err := c.Config(ctx, kind, stream, group)
	if err != nil {
		return res, err
	}
	if names := cfg.MemberNames(); !slices.Contains(names, member) {
		// Checked before the poison state: a mistyped name is not a
		// member with nothing parked.
		list := "it has no members"
		if len(names) > 0 {
			list = "members: " + strings.Join(names, ", ")
		}
		return res, fmt.Errorf("%w: %q is not a member of %s group %q on %q (%s)", ErrMemberNotFound, member, kind, group, stream, list)
	}
	kv, err := c.poisonKV(ctx)
	if err != nil {
		return res, err
	}
	prefix := PoisonKeyPrefix(kind, stream, group, member)
	rep, err := c.poisonReport(ctx, kv, kind, stream, group)
	if err != nil {
		return res, err
	}
	mp, _ := rep.Member(member)
	var targets []ParkedMessage
	for _, p := range mp.Parked {
		if o.Seq == 0 || p.Sequence == o.Seq {
			targets = append(targets, p)
		}
	}
	if len(targets) == 0 {
		if o.Seq != 0 && len(mp.Parked) > 0 {
			seqs := make([]string, len(mp.Parked))
			for i, p := range mp.Parked {
				seqs[i] = strconv.FormatUint(p.Sequence, 10)
			}
			return res, fmt.Errorf("%w: member %q of %s group %q on %q has no parked message at sequence %d; parked: %s", ErrNotParked, member, kind, group, stream, o.Seq, strings.Join(seqs, ", "))
		}
		return res, fmt.Errorf("%w: member %q of %s group %q on %q has no parked message", ErrNotParked, member, kind, group, stream)
	}
	if o.Skip {
		for _, p := range targets {
			if p.DeadLetter == "" {
				return res, fmt.Errorf("%w: parked message %d of member %q was parked by an instance joined without a dead-letter subject, so it cannot be skipped to one; retry it instead, or join the member with a dead-letter subject", ErrNoDeadLetter, p.Sequence, member)
			}
		}
	}
	val, _ := json.Marshal(releaseRequest{Skip: o.Skip, At: time.Now().UTC()})
	for _, p := range targets {
		if _, err := kv.Put(ctx, prefix+".release."+strconv.FormatUint(p.Sequence, 10), val); err != nil {
			return res, fmt.Errorf("write release request %d in KV bucket %s: %w", p.Sequence, PoisonBucket, err)
		}
		p.Release = "retry"
		if o.Skip {
			p.Release = "skip"
		}
		res.Released = append(res.Released, p)
	}
	return res, nil
}

// Poison reports a group's poison messages per member and partition:
// dead-lettered counts and parked messages (with any release pending). A
// group whose members never had one (or no poison bucket at all) has an
// empty report.
func (c *Client) Poison(ctx context.Context, kind Kind, stream, group string) (PoisonReport, error) {
	rep := PoisonReport{Kind: kind, Stream: stream, Group: group}
	if err := kind.Valid(); err != nil {
		return rep, err
	}
	for _, n := range [][2]string{{"stream", stream}, {"group", group}} {
		if err := ValidateName(n[0], n[1]); err != nil {
			return rep, err
		}
	}
	kv, err := c.js.KeyValue(ctx, PoisonBucket)
	if err != nil {
		if isNotFound(err) {
			return rep, nil
		}
		return rep, fmt.Errorf("open KV bucket %s: %w", PoisonBucket, err)
	}
	return c.poisonReport(ctx, kv, kind, stream, group)
}

func (c *Client) poisonReport(ctx context.Context, kv jetstream.KeyValue, kind Kind, stream, group string) (PoisonReport, error) {
	rep := PoisonReport{Kind: kind, Stream: stream, Group: group}
	base := string(kind) + "." + stream + "." + group + "."
	keys, err := c.kvKeys(ctx, kv, base+">")
	if err != nil {
		return rep, fmt.Errorf("read KV bucket %s: %w", PoisonBucket, err)
	}
	members := map[string]*MemberPoison{}
	parts := map[string]map[int]*PartitionPoison{}
	get := func(tok string) (*MemberPoison, map[int]*PartitionPoison) {
		name := unKeyToken(tok)
		mp := members[name]
		if mp == nil {
			mp = &MemberPoison{Member: name}
			members[name] = mp
			parts[name] = map[int]*PartitionPoison{}
		}
		return mp, parts[name]
	}
	part := func(pp map[int]*PartitionPoison, p int) *PartitionPoison {
		if pp[p] == nil {
			pp[p] = &PartitionPoison{Partition: p}
		}
		return pp[p]
	}
	releases := map[string]map[uint64]string{}
	for _, k := range keys {
		toks := strings.Split(strings.TrimPrefix(k, base), ".")
		if len(toks) < 2 {
			continue
		}
		e, err := kv.Get(ctx, k)
		if err != nil {
			continue
		}
		switch {
		case toks[1] == "counts" && len(toks) == 2:
			var pc poisonCounts
			if json.Unmarshal(e.Value(), &pc) != nil {
				continue
			}
			mp, pp := get(toks[0])
			for ps, n := range pc.DeadLettered {
				p, err := strconv.Atoi(ps)
				if err != nil {
					continue
				}
				mp.DeadLettered += n
				part(pp, p).DeadLettered += n
			}
		case toks[1] == "parked" && len(toks) == 3:
			var pm ParkedMessage
			if json.Unmarshal(e.Value(), &pm) != nil {
				continue
			}
			mp, pp := get(toks[0])
			mp.Parked = append(mp.Parked, pm)
			part(pp, pm.Partition).Parked++
		case toks[1] == "release" && len(toks) == 3:
			var rr releaseRequest
			seq, err := strconv.ParseUint(toks[2], 10, 64)
			if err != nil || json.Unmarshal(e.Value(), &rr) != nil {
				continue
			}
			name := unKeyToken(toks[0])
			if releases[name] == nil {
				releases[name] = map[uint64]string{}
			}
			releases[name][seq] = map[bool]string{false: "retry", true: "skip"}[rr.Skip]
		}
	}
	for name, mp := range members {
		for i := range mp.Parked {
			mp.Parked[i].Release = releases[name][mp.Parked[i].Sequence]
		}
		slices.SortFunc(mp.Parked, func(a, b ParkedMessage) int { return cmpSeq(a.Sequence, b.Sequence) })
		for _, p := range parts[name] {
			mp.Partitions = append(mp.Partitions, *p)
		}
		slices.SortFunc(mp.Partitions, func(a, b PartitionPoison) int { return a.Partition - b.Partition })
		rep.Members = append(rep.Members, *mp)
	}
	slices.SortFunc(rep.Members, func(a, b MemberPoison) int { return strings.Compare(a.Member, b.Member) })
	return rep, nil
}

// deletePoison removes a deleted group's keys from PoisonBucket: parked
// records, release requests and counts (best effort; the bucket stays).
func (c *Client) deletePoison(ctx context.Context, kind Kind, stream, group string) {
	kv, err := c.js.KeyValue(ctx, PoisonBucket)
	if err != nil {
		return
	}
	keys, err := c.kvKeys(ctx, kv, string(kind)+"."+stream+"."+group+".>")
	if err != nil {
		return
	}
	for _, k := range keys {
		_ = kv.Purge(ctx, k)
	}
}
