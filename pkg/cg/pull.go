package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The member runtime drives its pull requests itself rather than through
// jetstream.Consume, because a graceful handover needs what Consume does
// not give: to stop asking for messages while still listening, so that
// anything the server sends before the pin is released is handed straight
// back (nak) instead of vanishing into an unsubscribed inbox and sitting
// unacknowledged, blocking its partition, until the ack wait runs out.

// pullBatch is how many messages one pull request may bring, at least;
// a consumer allowed more unacknowledged messages asks for half of them
// at a time, up to maxPullBatch (pullBatchFor).
const (
	pullBatch    = 128
	maxPullBatch = 1024
)

// pullBatchFor is the batch of a consumer with max ack pending mp. The
// next request leaves only once the last one was filled, so a batch far
// below what the consumer may have outstanding (a member at max ack
// pending 1000) left the partition without a request, waiting a round
// trip, every 128 messages; half the window keeps one filling while the
// member works through the other half, as jetstream's Consume does.
func pullBatchFor(mp int) int { return min(max(mp/2, pullBatch), maxPullBatch) }

// pullRequest is the JetStream "next messages" request with a priority group.
type pullRequest struct {
	Expires time.Duration `json:"expires,omitempty"`
	Batch   int           `json:"batch,omitempty"`
	Group   string        `json:"group,omitempty"`
	ID      string        `json:"id,omitempty"`
	// Heartbeat makes the server send a status 100 this often while the
	// request waits, so a silent connection (a black hole) shows.
	Heartbeat time.Duration `json:"idle_heartbeat,omitempty"`
}

// apiPrefix is the JetStream API prefix of js, honouring a domain.
func apiPrefix(js jetstream.JetStream) string {
	o := js.Options()
	switch {
	case o.Domain != "":
		return "$JS." + o.Domain + ".API."
	case o.APIPrefix != "":
		return strings.TrimSuffix(o.APIPrefix, ".") + "."
	default:
		return jetstream.DefaultAPIPrefix
	}
}

// jsMsg adapts a pulled *nats.Msg to jetstream.Msg.
type jsMsg struct {
	m     *nats.Msg
	nc    *nats.Conn
	mem   *Member  // refuses acks once the instance is fenced
	acked *seqRing // records what was acked, to recognise redeliveries
	// out, under a retry policy, records naks and terms instead of
	// sending them: the policy settles the message (poison.go).
	out *msgOutcome
	// pipe, when the delivery stage can hold a key while a double ack's
	// reply is outstanding (the lane stage), sends DoubleAckAsync's acks
	// (ackpipe.go); nil elsewhere, where DoubleAckAsync waits for the reply.
	pipe *ackPipe
}

// note records an ack (or an attempt that may have reached the server).
func (j jsMsg) note() {
	if j.acked == nil {
		return
	}
	if _, seq, _, ok := ackSeqs(j.m); ok {
		j.acked.add(seq)
	}
}

var _ jetstream.Msg = jsMsg{}

func (j jsMsg) Data() []byte         { return j.m.Data }
func (j jsMsg) Headers() nats.Header { return j.m.Header }
func (j jsMsg) Subject() string      { return j.m.Subject }
func (j jsMsg) Reply() string        { return j.m.Reply }
func (j jsMsg) Nak() error {
	if j.out != nil {
		j.out.set(outNak, 0, false)
		return nil
	}
	return j.m.Nak()
}

// stale refuses to settle a message delivered under a pin this instance
// can no longer be sure of: the new pinned instance owns it now.
func (j jsMsg) stale() error {
	if j.mem != nil && j.mem.ackStale(j.m) {
		return ErrFenced
	}
	return nil
}

func (j jsMsg) Ack() error {
	if err := j.stale(); err != nil {
		return err
	}
	err := j.m.Ack()
	if err == nil {
		j.note()
	}
	return err
}

func (j jsMsg) InProgress() error {
	if err := j.stale(); err != nil {
		return err
	}
	return j.m.InProgress()
}

func (j jsMsg) Term() error {
	if err := j.stale(); err != nil {
		return err
	}
	if j.out != nil {
		j.out.set(outTerm, 0, false)
		return nil
	}
	return j.m.Term()
}
func (j jsMsg) NakWithDelay(d time.Duration) error {
	if j.out != nil {
		j.out.set(outNak, d, true)
		return nil
	}
	return j.m.NakWithDelay(d)
}

// doubleAckTimeout bounds a DoubleAck given a context without a deadline:
// jetstream's default API timeout.
const doubleAckTimeout = 5 * time.Second

func (j jsMsg) DoubleAck(ctx context.Context) error {
	if err := j.stale(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		// As jetstream.Msg does: a context without a deadline gets the
		// API timeout, or an ack whose reply never comes (the consumer
		// was deleted under the message) would hold the handler, and
		// with it the member's stop, forever.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, doubleAckTimeout)
		defer cancel()
	}
	err := ackSyncRetrying(ctx, j.m)
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
		// A timed-out ack may still have been applied: either way the
		// message was handled, and a redelivery is settled, not handled.
		j.note()
	}
	return err
}

// doubleAckAsync double-acks through the binding's pipe, or, without
// one, waits for the reply as DoubleAck does before calling done.
func (j jsMsg) doubleAckAsync(bound time.Duration, done func(error)) {
	if err := j.stale(); err != nil {
		done(err)
		return
	}
	if bound <= 0 {
		bound = doubleAckTimeout
	}
	if j.pipe == nil {
		ctx, cancel := context.WithTimeout(context.Background(), bound)
		err := j.DoubleAck(ctx)
		cancel()
		done(err)
		return
	}
	j.pipe.send(j.m, done)
}

func (j jsMsg) TermWithReason(reason string) error {
	if err := j.stale(); err != nil {
		return err
	}
	if j.m.Reply == "" {
		return nats.ErrMsgNoReply
	}
	if j.out != nil {
		j.out.setErr(errors.New(reason))
		j.out.set(outTerm, 0, false)
		return nil
	}
	return j.nc.Publish(j.m.Reply, []byte("+TERM "+reason))
}

func (j jsMsg) Metadata() (*jetstream.MsgMetadata, error) {
	if md, ok := ackMetadata(j.m); ok {
		return md, nil
	}
	return j.slowMetadata()
}

// slowMetadata is Metadata through nats.go, for what ackMetadata leaves.
func (j jsMsg) slowMetadata() (*jetstream.MsgMetadata, error) {
	md, err := j.m.Metadata()
	if err != nil {
		return nil, err
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: md.Sequence.Consumer, Stream: md.Sequence.Stream},
		NumDelivered: md.NumDelivered,
		NumPending:   md.NumPending,
		Timestamp:    md.Timestamp,
		Stream:       md.Stream,
		Consumer:     md.Consumer,
		Domain:       md.Domain,
	}, nil
}

// puller keeps one pull request outstanding for a member instance and
// passes delivered messages to the work channel.
type puller struct {
	m       *Member
	nc      *nats.Conn
	subject string // the consumer's MSG.NEXT API subject
	inbox   string
	in      chan *nats.Msg
	sub     *nats.Subscription
	batch   int

	// lastTick is when the pull loop last ran (unix nanos): a gap longer
	// than the pinned TTL means the process was frozen or starved.
	lastTick atomic.Int64
	// lastGood is when the newest request that the server answered (with
	// a message, a heartbeat or an expiry, not a 423) was sent.
	lastGood atomic.Int64
	// lastHeard is when anything (a message, a heartbeat, a status) last
	// came from the server: with idle heartbeats on every request, a gap
	// longer than the fence threshold means the connection went silent.
	lastHeard atomic.Int64
	// inboxHeard is when anything last came in on the pull's inbox: what
	// pullLost judges the outstanding request by. (lastHeard is also moved
	// on by a fence's confirmation from the server, which says the pin is
	// still this instance's, not that its request is still held: after a
	// consumer leader change that masked the request's loss until its
	// deadline, and the new leader let the pin run out meanwhile.)
	inboxHeard atomic.Int64

	// stalledAt is when the loop last found itself unable to be sure of a
	// pin (unsure): frozen, starved, or nothing heard for the fence
	// threshold (unix nanos).
	stalledAt atomic.Int64

	// got records the stream sequences delivered to this instance lately,
	// so that a new pin's hand back of orphans (handBackOrphans) leaves
	// alone what was redelivered to it already.
	got *seqRing

	// cancelled: the pull request was withdrawn (cancel); nothing more is
	// asked for.
	cancelled  atomic.Bool
	cancelOnce sync.Once

	// gotUpTo is the highest consumer sequence the loop has taken in (its
	// stream sequence is in got by then).
	gotUpTo atomic.Uint64

	// Owned by the loop goroutine.
	sentAt      time.Time
	outstanding bool
	received    int
	deadline    time.Time
	retryAt     time.Time
	lost        lostDeliveries // deliveries a reconnect may have lost (liveness.go)
}

func newPuller(m *Member) (*puller, error) {
	nc := m.c.Conn()
	p := &puller{
		m:       m,
		nc:      nc,
		subject: fmt.Sprintf("%sCONSUMER.MSG.NEXT.%s.%s", apiPrefix(m.c.js), m.cstream, m.consumer),
		inbox:   nc.NewInbox(),
		// One long-lived request rather than one per message: the server
		// sends the next message the moment the last is acked, and the
		// request stays visible as this instance's waiting pull.
		batch: pullBatchFor(m.opts.MaxAckPending),
	}
	// The server never has more than MaxAckPending messages unacknowledged,
	// so the loop never blocks on a channel this size.
	p.in = make(chan *nats.Msg, min(m.opts.MaxAckPending, 4096)+p.batch+64)
	p.got = newSeqRing(cap(p.in))
	sub, err := nc.ChanSubscribe(p.inbox, p.in)
	if err != nil {
		return nil, fmt.Errorf("subscribe for pulls: %w", err)
	}
	p.sub = sub
	return p, nil
}

// pull sends the next request, carrying our pin id when we hold one.
func (p *puller) pull() {
	if !p.nc.IsConnected() {
		// A request buffered while reconnecting would leave later than
		// sentAt says, and fencing relies on sentAt.
		p.retryAt = time.Now().Add(100 * time.Millisecond)
		return
	}
	req := pullRequest{Expires: p.m.opts.PullExpiry, Batch: p.batch, Group: PriorityGroup, ID: p.m.PinID(), Heartbeat: p.m.heartbeat()}
	body, _ := json.Marshal(req)
	if err := p.nc.PublishRequest(p.subject, p.inbox, body); err != nil {
		// Disconnected: try again shortly; the reconnect will let it through.
		p.retryAt = time.Now().Add(250 * time.Millisecond)
		return
	}
	p.outstanding, p.received, p.sentAt = true, 0, time.Now()
	// The server answers an expired request with 408; without an answer
	// (a reconnect lost it) the request is given up after a margin.
	p.deadline = time.Now().Add(p.m.opts.PullExpiry + time.Second)
}

// run is the pull loop. It ends when stop is closed, after which nothing
// more is requested (messages still arriving are handled by drain).
func (p *puller) run(stop <-chan struct{}, work chan<- *nats.Msg) {
	tick := time.NewTicker(min(100*time.Millisecond, p.m.opts.PinnedTTL/4))
	defer tick.Stop()
	p.lastTick.Store(time.Now().UnixNano())
	p.lastHeard.Store(time.Now().UnixNano())
	for {
		p.checkFence()
		if !p.outstanding && !time.Now().Before(p.retryAt) && !p.cancelled.Load() {
			p.pull()
		}
		select {
		case <-stop:
			return
		case <-tick.C:
			if p.outstanding && (time.Now().After(p.deadline) || p.pullLost()) {
				p.outstanding = false
			}
			p.checkLost()
		case msg := <-p.in:
			p.lastHeard.Store(time.Now().UnixNano())
			p.inboxHeard.Store(time.Now().UnixNano())
			if p.status(msg) {
				continue
			}
			p.good()
			p.lost.note(msg)
			p.received++
			if p.received >= p.batch {
				p.outstanding = false
			}
			p.m.notePin(msg, p.lateNews())
			_, sseq, cseq, _ := ackSeqs(msg)
			p.got.add(sseq)
			storeMaxU(&p.gotUpTo, cseq)
			work <- msg
		}
	}
}

// status handles a status message (true) or says msg is a message (false).
func (p *puller) status(msg *nats.Msg) bool {
	if len(msg.Data) != 0 || msg.Header == nil {
		return false
	}
	code := msg.Header.Get("Status")
	if code == "" {
		return false
	}
	desc := msg.Header.Get("Description")
	switch code {
	case "100": // idle heartbeat or flow control
		p.good()
		return true
	case "404", "408": // no messages / request expired: ask again
		p.good()
		p.outstanding = false
	case "423": // our pin id is stale: the server moved the pin
		p.outstanding = false
		// Another instance, or this one again under a new pin id (after
		// it fenced itself or was unpinned): the server says only that
		// the id this instance held is no longer the pin.
		p.m.lostPin(CauseOtherPinned, "the server no longer honours this instance's pin id (it pinned another instance, or this one anew)")
	case "409":
		p.outstanding = false
		p.retryAt = time.Now().Add(250 * time.Millisecond)
		if strings.Contains(desc, "Leadership Change") {
			// Sent by the consumer's new leader for the requests it
			// inherited: it is there to be asked now. A quarter second
			// more without a word from the server (and the heartbeat after
			// it) reached the fence threshold, and the pinned instance
			// doubted its pin over every leadership change.
			p.retryAt = time.Time{}
		}
		if strings.Contains(desc, "Leadership Change") || strings.Contains(desc, "Server Shutdown") {
			// What the old leader sent last may be lost with it.
			p.lost.expectLoss()
		}
		if strings.Contains(desc, "Consumer Deleted") {
			// Elastic: rebalancing, another instance deleted the member
			// consumer. Either kind: it may have been deleted by hand.
			p.m.kind.lookAgain()
		} else if !strings.Contains(desc, "Leadership Change") {
			p.m.emit(Event{Kind: EventWarning, Reason: "pull refused: " + desc, Err: errors.New(desc)})
		}
	case "503": // no responders: the consumer is gone
		p.outstanding = false
		p.retryAt = time.Now().Add(250 * time.Millisecond)
		p.m.kind.lookAgain()
	default:
		p.outstanding = false
		p.retryAt = time.Now().Add(250 * time.Millisecond)
		p.m.emit(Event{Kind: EventWarning, Reason: fmt.Sprintf("pull status %s %s", code, desc), Err: fmt.Errorf("status %s: %s", code, desc)})
	}
	return true
}

// good records that the server answered the current request.
func (p *puller) good() {
	if p.outstanding && p.sentAt.UnixNano() > p.lastGood.Load() {
		p.lastGood.Store(p.sentAt.UnixNano())
	}
}

// unsure reports whether an instance holding a pin can no longer be sure
// it still does: its pull loop stood still, or nothing came from the
// server, for the fence threshold (liveness.go), or no pull it sent was
// answered for the pinned TTL. By then a standby may have unpinned it, or
// the server pinned another instance, which is handed the same messages.
func (p *puller) unsure() (bool, time.Duration) {
	now := time.Now().UnixNano()
	ttl := int64(p.m.opts.PinnedTTL)
	fence := int64(p.m.fenceAfter())
	if gap := now - p.lastTick.Load(); gap > fence {
		return true, time.Duration(gap)
	}
	if gap := now - p.lastHeard.Load(); gap > fence {
		return true, time.Duration(gap)
	}
	if good := p.lastGood.Load(); good != 0 && now-good > ttl {
		return true, time.Duration(now - good)
	}
	return false, 0
}

// checkFence runs on each turn of the pull loop: it fences the instance
// when it can no longer be sure of its pin.
func (p *puller) checkFence() {
	// The loop is known to run now, not after the check: a freeze during
	// it must still show as a gap.
	ran := time.Now().UnixNano()
	unsure, gap := p.unsure()
	if unsure {
		p.stalledAt.Store(ran)
	}
	if unsure || p.m.doubt() {
		p.m.fence(gap)
	}
	storeMax(&p.lastTick, ran)
}

// storeMaxU sets a to v unless it holds a larger value already.
func storeMaxU(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// lateNews reports whether what the loop reads now may have waited: it
// stood still, or heard nothing, for the fence threshold a moment ago.
func (p *puller) lateNews() bool {
	at := p.stalledAt.Load()
	return at != 0 && time.Duration(time.Now().UnixNano()-at) < p.m.unpinAfter()
}

// storeMax sets a to v unless it holds a later time already.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// drain hands back (naks) every message still arriving, returning whether
// any came with a pin id — the server pinned us while we were leaving.
func (p *puller) drain() (pinned bool) {
	for {
		select {
		case msg := <-p.in:
			if p.status(msg) {
				continue
			}
			if msg.Header.Get("Nats-Pin-Id") != "" {
				pinned = true
			}
			_ = msg.Nak()
		default:
			return pinned
		}
	}
}

// cancel withdraws the outstanding pull request before anything is handed
// back: while it stands, the server answers each nak by delivering the
// message to this very request again, so a stopping instance would hand
// the same messages back to itself, each time counting a delivery, and the
// next instance would get them late and on their third or later delivery.
// A pull request has no cancel of its own, but the server drops one whose
// reply subject has no interest left, so the inbox is unsubscribed in drain
// mode (the server forgets it, the client still takes what is on its way)
// and a round trip waited for: after it every message the server sent to
// the request is in p.in, and nothing more comes. Called once the instance
// stops or lets go of the consumer; later calls do nothing.
func (p *puller) cancel() {
	p.cancelOnce.Do(func() {
		p.cancelled.Store(true)
		if err := p.sub.Drain(); err != nil {
			return
		}
		_ = p.nc.FlushTimeout(2 * time.Second)
	})
}

func (p *puller) close() { _ = p.sub.Unsubscribe() }
