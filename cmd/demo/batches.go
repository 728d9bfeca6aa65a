package demo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
)

// Batches is the walkthrough of ordered batches: one member, an active and
// a standby instance consuming in batches, the active one killed between
// its sink write and its acks.
const Batches = "batches"

// Defaults of the batches walkthrough, where the shared flags' defaults
// suit the other walkthroughs.
const (
	defaultBatchSize = 10
	// batchRate fills batches: 200/s at 5ms a message keeps one instance
	// busy about a quarter of the time, in batches of 10.
	batchRate = 200
	// killAtBatch is the victim's batch the kill hits.
	killAtBatch = 4
	batchWait   = 50 * time.Millisecond
)

// BatchVerdict is the batches walkthrough's part of the verdict: what the
// sink recorded, batch by batch.
type BatchVerdict struct {
	// Size is the batch size asked for (--batch).
	Size int `json:"size"`
	// Batches counts the batches acked, over both instances.
	Batches int `json:"batches"`
	// Written counts the messages the sink wrote, replays included.
	Written int `json:"written"`
	// Killed is the batch the victim wrote and never acked.
	Killed *KilledBatch `json:"killed,omitempty"`
	// Redelivered is the size of the killed batch as the standby handled
	// it again: the killed batch's messages it wrote first, in order.
	Redelivered int `json:"redelivered"`
	// RedeliveredInOrder: the standby's first writes were exactly the
	// killed batch's messages, in the same order.
	RedeliveredInOrder bool `json:"redelivered_in_order"`
	// BatchOrderViolations counts writes of a message at or below the
	// stream sequence the sink had already reached, other than the replay
	// of the killed batch: the member's order, counted over all its keys.
	BatchOrderViolations int `json:"batch_order_violations"`
	// Oversized counts batches above Size.
	Oversized int `json:"oversized"`
	// Repins counts the times the server pinned an instance anew with no
	// kill behind it (a pull renewed too late on a starved machine): each
	// hands back what was unacked, and the sink gets it again. Those
	// replays are allowed: pinning is affinity and failover, not a lock.
	Repins int `json:"repins,omitempty"`
	// Failover is the kill to the standby's first write.
	Failover *Failover `json:"failover,omitempty"`
}

// KilledBatch is the batch in hand when the victim died.
type KilledBatch struct {
	Instance string `json:"instance"`
	Number   uint64 `json:"number"`
	Size     int    `json:"size"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
}

// write is one message the sink wrote, and the pin it came under.
type write struct {
	inst  string
	batch uint64
	seq   uint64
	pin   string
	at    time.Time
}

// sink records what the batch handlers wrote, in the order they wrote it:
// the external system of the story.
type sink struct {
	mu      sync.Mutex
	writes  []write
	acked   map[string]int // batches acked per instance
	sizes   []int          // sizes of acked batches
	killed  *KilledBatch
	killAt  time.Time
	killSeq []uint64
}

func newSink() *sink { return &sink{acked: map[string]int{}} }

func (s *sink) write(inst string, b *cg.Batch, now time.Time) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seqs := make([]uint64, 0, len(b.Msgs))
	for _, m := range b.Msgs {
		seq := streamSeq(m)
		seqs = append(seqs, seq)
		s.writes = append(s.writes, write{inst: inst, batch: b.Number, seq: seq, pin: m.PinID(), at: now})
	}
	return seqs
}

func (s *sink) ackedBatch(inst string, size int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked[inst]++
	s.sizes = append(s.sizes, size)
}

func (s *sink) batchesBy(inst string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acked[inst]
}

// firstWriteAfter is the first write by someone other than inst after t.
func (s *sink) firstWriteAfter(inst string, t time.Time) (write, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, w := range s.writes {
		if w.inst != inst && !w.at.Before(t) {
			return w, true
		}
	}
	return write{}, false
}

func streamSeq(m *cg.Msg) uint64 {
	if md, err := m.Metadata(); err == nil {
		return md.Sequence.Stream
	}
	return 0
}

// batchWalk is the walkthrough: one static member m1 over every
// partition, instances m1/a and m1/b consuming in batches, the pinned one
// killed mid-batch.
type batchWalk struct {
	*demo
	sink *sink
	// armed: the pinned instance's next batch ends in its death.
	armed  chan struct{}
	killMu sync.Mutex
	victim *instance
}

func (d *batchWalk) size() int {
	if d.o.Batch > 0 {
		return d.o.Batch
	}
	return defaultBatchSize
}

func (d *batchWalk) setup(ctx context.Context) error {
	o := d.o
	d.sink = newSink()
	d.armed = make(chan struct{})
	if err := d.createStream(ctx, subjects, transform); err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created stream %s on %s, stamped by the transform %s", streamName, subjects, transform),
		"Every customer's orders land in one of 10 partitions.")
	a, err := d.createStatic(ctx, "m1")
	if err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created static group %s with one member, %s, owning partitions %s",
		groupName, d.cs.Member("m1"), render.Ranges(a.MemberPartitions("m1"))),
		"One member is one ordered sequence: the server feeds one pinned instance of it, so a",
		"batch of its messages is the next N in stream order, not a share of them (Fetch(N) alone is not).")
	n := d.size()
	d.step(fmt.Sprintf("Starting m1/a and m1/b, each consuming in batches of up to %d (gathered for at most %v)", n, batchWait),
		"Each batch is written to the sink in one call (the sink records it), and only then acked:",
		fmt.Sprintf("the handler works %v per message. The consumer's max ack pending is at least %d, so a whole", o.Sleep, n),
		"batch can be out unacked. One instance is pinned, the other stands by.",
		fmt.Sprintf("(cg static consume ORDERS fulfillment m1 --batch %d --batch-wait %v --sleep %v, twice)", n, batchWait, o.Sleep))
	for _, name := range []string{"m1/a", "m1/b"} {
		if err := d.startBatchInstance(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

// startBatchInstance runs an instance of m1 in batch mode on its own
// connection, as a separate process would.
func (d *batchWalk) startBatchInstance(ctx context.Context, name string) error {
	return d.startInstance(ctx, "m1", name, func(ctx context.Context, c *cg.Client, inst *instance) (*cg.Member, error) {
		opts := d.joinOptions(inst)
		opts.Batch = &cg.BatchOptions{
			Size: d.size(), Wait: batchWait, Handler: d.batchHandler(inst), DoubleAck: true,
			OnBatch: func(e cg.BatchEvent) {
				if e.Acked && !inst.killed.Load() {
					d.sink.ackedBatch(inst.name, e.Size)
				}
			},
		}
		return c.Join(ctx, cg.KindStatic, streamName, groupName, "m1", nil, opts)
	})
}

// errDead is what a killed instance's handler returns if the engine, still
// running on the closed connection, calls it again: a dead process writes
// nothing.
var errDead = errors.New("instance killed")

// batchHandler writes a batch to the sink, message by message as the
// per-message cost, then returns nil so that cg acks it. Once the walk is
// armed the pinned instance dies right after its write: its connection is
// closed before any ack can leave, as a kill -9 between the write and the
// ack would.
func (d *batchWalk) batchHandler(inst *instance) cg.BatchHandler {
	sleep := d.o.Sleep
	return func(ctx context.Context, b *cg.Batch) error {
		if inst.killed.Load() {
			return errDead
		}
		now := time.Now()
		for _, m := range b.Msgs {
			d.clock.observe(inst.member, inst.name, m.PinID(), now)
			if sleep > 0 {
				time.Sleep(sleep) // the simulated work; never cut short
			}
			key, seq, _ := traffic.KeyOf(m.Headers())
			d.verifier.Observe(key, seq, streamSeq(m), inst.name)
		}
		seqs := d.sink.write(inst.name, b, now)
		select {
		case <-d.armed:
			d.killMu.Lock()
			first := d.victim == nil
			if first {
				d.victim = inst
				inst.killed.Store(true)
				d.sink.mu.Lock()
				d.sink.killed = &KilledBatch{Instance: inst.name, Number: b.Number, Size: len(b.Msgs), FirstSeq: seqs[0], LastSeq: seqs[len(seqs)-1]}
				d.sink.killAt = time.Now()
				d.sink.killSeq = seqs
				d.sink.mu.Unlock()
			}
			d.killMu.Unlock()
			if first {
				inst.nc.Close() // kill -9: no ack, no unpin, no goodbye
				return nil
			}
		default:
		}
		return nil
	}
}

func (d *batchWalk) steps(ctx context.Context, v *Verdict) error {
	o := d.o
	if !poll(ctx, stepLimit, func() bool { _, ok := d.clock.holder("m1"); return ok }) {
		return fmt.Errorf("m1 handled no batch within %v of traffic", stepLimit)
	}
	// Let a few batches go through: long enough, too, for the standby's
	// liveness check to have heard from the pinned instance.
	holder, _ := d.clock.holder("m1")
	if !poll(ctx, stepLimit, func() bool { return d.sink.batchesBy(holder) >= killAtBatch-1 }) {
		return fmt.Errorf("%s acked fewer than %d batches within %v", holder, killAtBatch-1, stepLimit)
	}
	if err := sleepCtx(ctx, o.Phase/2); err != nil {
		return err
	}
	d.status(ctx, "Status while batches flow")

	d.step("Killing m1's pinned instance in the middle of its next batch: after the sink write, before the ack",
		"Its connection is closed right after the handler wrote the batch, so none of the batch's acks",
		"reaches the server: the worst moment of a kill -9. The standby sees the pinned instance gone,",
		"the server pins the standby, and it must get the whole batch again, in the same order, before",
		"anything later (the sink then holds that batch twice: it must be idempotent). The dead instance's",
		"whole window is out unacked: the standby hands it back (naks it in order) as it unpins the dead one,",
		fmt.Sprintf("so the redelivery does not wait for the ack wait (%v).", o.AckWait))
	close(d.armed)
	if !poll(ctx, stepLimit, func() bool {
		d.sink.mu.Lock()
		defer d.sink.mu.Unlock()
		return d.sink.killed != nil
	}) {
		return fmt.Errorf("no batch was handled within %v of arming the kill", stepLimit)
	}
	d.sink.mu.Lock()
	k := *d.sink.killed
	killAt := d.sink.killAt
	d.sink.mu.Unlock()
	d.logf("killed %s after it wrote batch #%d (%d messages, stream seqs %d-%d) and before its acks",
		d.inst(k.Instance), k.Number, k.Size, k.FirstSeq, k.LastSeq)
	ttl := max(o.AckWait, time.Second)
	var w write
	if poll(ctx, 3*ttl+stepLimit, func() (ok bool) { w, ok = d.sink.firstWriteAfter(k.Instance, killAt); return ok }) {
		d.logf("%s wrote its first batch #%d %v after the kill, starting at stream seq %d",
			d.inst(w.inst), w.batch, w.at.Sub(killAt).Round(time.Millisecond), w.seq)
	} else {
		d.logf("no standby wrote anything within %v of the kill", 3*ttl+stepLimit)
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return err
	}
	d.status(ctx, "Status after the failover")
	return nil
}

// judge counts the sink's record, once everything was drained, into the
// verdict, and says what failed.
func (d *batchWalk) judge(_ context.Context, v *Verdict) []string {
	s := d.sink
	s.mu.Lock()
	defer s.mu.Unlock()
	bv := &BatchVerdict{Size: d.size(), Written: len(s.writes), Killed: s.killed}
	for _, n := range s.acked {
		bv.Batches += n
	}
	for _, n := range s.sizes {
		if n > bv.Size {
			bv.Oversized++
		}
	}
	var why []string
	if s.killed == nil {
		why = append(why, "the kill never happened")
	} else {
		// The standby's writes start with the killed batch, in order.
		var after []write
		for _, w := range s.writes {
			if w.inst != s.killed.Instance && !w.at.Before(s.killAt) {
				after = append(after, w)
			}
		}
		if len(after) > 0 {
			bv.Failover = &Failover{Measured: true, From: s.killed.Instance, To: after[0].inst, GapMS: ms(after[0].at.Sub(s.killAt))}
		}
		inOrder := len(after) >= len(s.killSeq)
		for i, seq := range s.killSeq {
			if i >= len(after) || after[i].seq != seq {
				inOrder = false
				break
			}
			bv.Redelivered++
		}
		bv.RedeliveredInOrder = inOrder
		if !inOrder {
			why = append(why, fmt.Sprintf("the standby did not handle the killed batch again first and in order (%d of its %d messages)", bv.Redelivered, len(s.killSeq)))
		}
	}
	// The member's order over all its keys: every write is above the
	// highest stream sequence written before, except the killed batch's
	// replay (the standby rewinds to its first message once) and the
	// replay after a pin the server gave anew (the first write under it
	// may rewind to what the new pin got back).
	var high uint64
	rewound := false
	replayed := 0 // messages a re-pin may have the sink write again
	pin := ""
	for _, w := range s.writes {
		newPin := w.pin != pin
		pin = w.pin
		if w.seq > high {
			high = w.seq
			continue
		}
		if s.killed != nil && !rewound && w.inst != s.killed.Instance && w.seq == s.killed.FirstSeq {
			rewound = true
			high = w.seq
			continue
		}
		if newPin {
			bv.Repins++
			replayed += int(high - w.seq + 1)
			high = w.seq
			continue
		}
		bv.BatchOrderViolations++
	}
	v.Batches = bv
	if bv.BatchOrderViolations > 0 {
		why = append(why, fmt.Sprintf("%d writes out of the member's stream order", bv.BatchOrderViolations))
	}
	if bv.Oversized > 0 {
		why = append(why, fmt.Sprintf("%d batches above %d messages", bv.Oversized, bv.Size))
	}
	if s.killed != nil && v.Duplicates > uint64(s.killed.Size+replayed) {
		why = append(why, fmt.Sprintf("%d duplicates, more than the killed batch's %d", v.Duplicates, s.killed.Size))
		if bv.Repins > 0 {
			why[len(why)-1] += fmt.Sprintf(" and the %d replayed after %d re-pin(s)", replayed, bv.Repins)
		}
	}
	return why
}

// status prints the member as `cg static info` shows it, with the
// batches each instance had acked.
func (d *batchWalk) status(ctx context.Context, title string) {
	d.staticStatus(ctx, title, column{head: "BATCHES", cell: func(ms health.MemberStatus) string {
		var batches []string
		for _, in := range d.instances {
			if in.member == ms.Member {
				batches = append(batches, fmt.Sprintf("%s=%d", d.inst(in.name), d.sink.batchesBy(in.name)))
			}
		}
		return strings.Join(batches, " ")
	}})
}

// batchVerdictLines adds the batches walkthrough's lines to the verdict.
func batchVerdictLines(d *demo, kv *render.KeyValues, bv *BatchVerdict) {
	kv.Addf("  batches", "%d acked (up to %d messages each; %d above that)", bv.Batches, bv.Size, bv.Oversized)
	kv.Addf("  sink writes", "%d messages, the replayed batch included", bv.Written)
	if k := bv.Killed; k != nil {
		kv.Addf("  killed batch", "%s's #%d: %d messages, stream seqs %d-%d, written, never acked", d.inst(k.Instance), k.Number, k.Size, k.FirstSeq, k.LastSeq)
		word := "in the same order, before anything later"
		if !bv.RedeliveredInOrder {
			word = d.cs.Red("NOT whole and in order")
		}
		kv.Addf("  redelivered batch", "%d of %d messages, %s", bv.Redelivered, k.Size, word)
	}
	kv.Addf("  member order", "%d writes out of stream order", bv.BatchOrderViolations)
	if bv.Repins > 0 {
		kv.Addf("  re-pins", "%d without a kill (the server pinned anew; what was unacked was handled again)", bv.Repins)
	}
	if bv.Failover != nil {
		kv.Add("  kill gap", failoverText(d, *bv.Failover)+" (kill to the standby's first write)")
	}
}
