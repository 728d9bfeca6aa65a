package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// Poison is the walkthrough of a poison message: one message whose handler
// always fails, dead-lettered after a bounded number of deliveries while
// the rest of the traffic flows.
const Poison = "poison"

// The poison walkthrough's names: orders.<customer>.<event>, the customer
// hashed; the handler fails every refund (--fail-subject).
const (
	poisonSubjects   = "orders.*.*"
	poisonTransform  = "{{partition(10,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}"
	poisonPattern    = "orders.{key}.created"
	poisonFail       = "orders.*.refund"
	deadLetterStream = "DEAD"
	deadLetterSubj   = "dlq.orders"
	poisonMaxDeliver = 3
	poisonConcurrent = 4
)

// poisonBackoff is the walkthrough's retry schedule: short, to stay inside
// a minute.
var poisonBackoff = []time.Duration{200 * time.Millisecond, 400 * time.Millisecond}

// PoisonVerdict is `cg demo poison`'s result, counted from what the
// handlers saw and what the dead-letter stream holds.
type PoisonVerdict struct {
	OK        bool   `json:"ok"`
	Reason    string `json:"reason,omitempty"`
	Server    string `json:"server"`
	Keys      int    `json:"keys"`
	Published uint64 `json:"published"`
	Processed uint64 `json:"processed"`
	Handled   uint64 `json:"handled"`
	// PoisonKey, PoisonSubject and PoisonSeq name the one poison message.
	PoisonKey     string `json:"poison_key"`
	PoisonSubject string `json:"poison_subject"`
	PoisonSeq     uint64 `json:"poison_seq"`
	// Failures are the handler's failed deliveries of it (MaxDeliver);
	// with batches, the failed calls holding it: MaxDeliver of the whole
	// batch, then one per halving until it failed alone.
	Failures   int   `json:"failures"`
	MaxDeliver int   `json:"max_deliver"`
	Deliveries []int `json:"deliveries"`
	// Batch is the members' batch size (0: one message at a time).
	Batch int `json:"batch,omitempty"`
	// DeadLettered is how many messages the dead-letter stream holds;
	// Headers are the Cg- headers of the first.
	DeadLettered uint64            `json:"dead_lettered"`
	Headers      map[string]string `json:"headers,omitempty"`
	HeadersOK    bool              `json:"headers_ok"`
	// KeyAfter is how many of the poison key's later messages were
	// handled, and EarlyAfter how many of them before the dead letter was
	// in its stream (0: order honest).
	KeyAfter   uint64 `json:"key_after"`
	EarlyAfter uint64 `json:"early_after"`
	// OthersDuringRetries: messages of other keys handled between the
	// poison message's first delivery and its dead letter: the rest flowed.
	OthersDuringRetries uint64            `json:"others_during_retries"`
	Duplicates          uint64            `json:"duplicates"`
	OrderViolations     uint64            `json:"order_violations"`
	Lost                uint64            `json:"lost"`
	ByInstance          map[string]uint64 `json:"by_instance"`
	ElapsedSeconds      float64           `json:"elapsed_seconds"`
}

// poisonWalk is one run of the poison walkthrough.
type poisonWalk struct {
	*demo
	dead      jetstream.Stream
	poisonKey string
	poisonSeq atomic.Uint64
	// dlSeen: the dead letter is in its stream (checked by the handlers
	// of the poison key's later messages until it is).
	dlSeen atomic.Bool
	// pv is the walkthrough's own count, from the poison message's
	// publish on; report adds what every walkthrough counts.
	pv PoisonVerdict

	mu         sync.Mutex
	deliveries []int
	firstFail  time.Time
	keyAfter   uint64
	earlyAfter uint64
	during     uint64
}

// traffic runs on every key, stamped for counting, for --phase; the
// poison message comes a third of the way in (steps), on a key that has
// orders before and after it.
func (w *poisonWalk) traffic(context.Context) trafficPlan {
	o := w.o
	return trafficPlan{
		opts:  traffic.Options{Subject: poisonPattern, Duration: o.Phase},
		timed: true,
		head:  fmt.Sprintf("Publishing to %s over %d keys at %s for %v", poisonPattern, o.Keys, traffic.FormatRate(o.Rate), o.Phase),
		why:   []string{"Each message carries Cg-Key and Cg-Key-Seq, so the handlers' view can be counted."},
	}
}

// steps publish the poison message.
func (w *poisonWalk) steps(ctx context.Context, _ *Verdict) error {
	d := w.demo
	if err := sleepCtx(ctx, w.o.Phase/3); err != nil {
		return err
	}
	w.pv.PoisonSubject = "orders." + w.poisonKey + ".refund"
	ack, err := d.admin.JetStream().Publish(ctx, w.pv.PoisonSubject, []byte(`{"refund":"poison"}`))
	if err != nil {
		return fmt.Errorf("publish the poison message: %w", err)
	}
	w.poisonSeq.Store(ack.Sequence)
	w.pv.PoisonSeq = ack.Sequence
	if w.o.Batch > 0 {
		d.step(fmt.Sprintf("Published one poison message: %s (stream seq %d)", w.pv.PoisonSubject, ack.Sequence),
			"Every batch holding it fails. After "+strconv.Itoa(poisonMaxDeliver)+" attempts of its batch, the halves find it and it is dead-lettered to "+deadLetterSubj+";",
			"until then its member's later messages wait behind it (a batch member keeps its stream order), and the other member goes on.")
	} else {
		d.step(fmt.Sprintf("Published one poison message: %s (stream seq %d)", w.pv.PoisonSubject, ack.Sequence),
			"Its handler fails every delivery. After "+strconv.Itoa(poisonMaxDeliver)+" deliveries it is dead-lettered to "+deadLetterSubj+";",
			"until then its key's later orders wait behind it, and every other key goes on.")
	}
	return nil
}

// deadCount is how many messages the dead-letter stream holds.
func (w *poisonWalk) deadCount(ctx context.Context) uint64 {
	si, err := w.dead.Info(ctx)
	if err != nil {
		return 0
	}
	return si.State.Msgs
}

// drain waits for the dead letter as well.
func (w *poisonWalk) drain(ctx context.Context) drainWait {
	return drainWait{
		words: " and the dead letter to land",
		done:  func() bool { return w.deadCount(ctx) >= 1 },
		state: func(held bool) string {
			if held {
				return ", dead letter in " + deadLetterStream
			}
			return fmt.Sprintf(", %d dead letters", w.deadCount(ctx))
		},
	}
}

// judge counts the dead letters and what happened around the poison
// message, and says what failed.
func (w *poisonWalk) judge(ctx context.Context, _ *Verdict) []string {
	v := &w.pv
	v.DeadLettered = w.deadCount(ctx)
	if v.DeadLettered > 0 {
		raw, err := w.dead.GetMsg(ctx, 1)
		if err == nil {
			v.Headers = map[string]string{}
			for k := range raw.Header {
				if strings.HasPrefix(k, "Cg-") || k == "Nats-Msg-Id" {
					v.Headers[k] = raw.Header.Get(k)
				}
			}
			h := raw.Header
			// A batch's attempts are calls of the handler, not deliveries
			// by the server: there the reason says the attempts ran out.
			deliveriesOK := h.Get(cg.HeaderDLDeliveries) == strconv.Itoa(poisonMaxDeliver)
			if w.o.Batch > 0 {
				deliveriesOK = h.Get(cg.HeaderDLReason) == cg.DLReasonMaxDeliver
			}
			v.HeadersOK = h.Get(cg.HeaderDLStream) == streamName && h.Get(cg.HeaderDLSequence) == strconv.FormatUint(v.PoisonSeq, 10) &&
				h.Get(cg.HeaderDLSubject) == v.PoisonSubject && h.Get(cg.HeaderDLGroup) == groupName &&
				deliveriesOK && h.Get(cg.HeaderDLMember) != ""
		}
	}
	w.mu.Lock()
	v.Failures = len(w.deliveries)
	v.Deliveries = append([]int(nil), w.deliveries...)
	v.KeyAfter, v.EarlyAfter, v.OthersDuringRetries = w.keyAfter, w.earlyAfter, w.during
	w.mu.Unlock()

	var why []string
	if v.DeadLettered != 1 {
		why = append(why, fmt.Sprintf("%d dead letters, want 1", v.DeadLettered))
	} else if !v.HeadersOK {
		why = append(why, fmt.Sprintf("the dead letter's headers do not name the poison message: %v", v.Headers))
	}
	if lo, hi := poisonMaxDeliver, poisonMaxDeliver+halvings(w.o.Batch); v.Failures < lo || v.Failures > hi {
		want := strconv.Itoa(lo)
		if hi > lo {
			want = fmt.Sprintf("%d to %d", lo, hi)
		}
		why = append(why, fmt.Sprintf("the poison message was handed over %d times, want %s", v.Failures, want))
	}
	if v.KeyAfter == 0 {
		why = append(why, "none of the poison key's later messages was handled: order after the poison message went unchecked")
	}
	if v.OthersDuringRetries == 0 {
		why = append(why, "no other key was handled while the poison message was retried")
	}
	if v.EarlyAfter > 0 {
		why = append(why, fmt.Sprintf("%d of the poison key's later messages handled before it was dead-lettered", v.EarlyAfter))
	}
	return why
}

// report prints the poison walkthrough's own verdict, PoisonVerdict.
func (w *poisonWalk) report(v Verdict) error {
	w.reported = true
	pv := w.pv
	pv.OK, pv.Reason, pv.Server, pv.Keys = v.OK, v.Reason, v.Server, v.Keys
	pv.PoisonKey, pv.MaxDeliver, pv.Batch = w.poisonKey, poisonMaxDeliver, w.o.Batch
	pv.Published, pv.Processed, pv.Handled = v.Published, v.Processed, v.Handled
	pv.Duplicates, pv.OrderViolations, pv.Lost = v.Duplicates, v.OrderViolations, v.Lost
	pv.ByInstance, pv.ElapsedSeconds = v.ByInstance, v.ElapsedSeconds
	if w.o.JSON {
		return render.JSON(w.o.IO.Out, pv)
	}
	return w.printVerdict(pv)
}

// halvings is how many calls a batch of n takes, once its attempts are
// used up, to find one failing message by halving: ceil(log2 n).
func halvings(n int) int {
	h := 0
	for k := 1; k < n; k *= 2 {
		h++
	}
	return h
}

func (w *poisonWalk) setup(ctx context.Context) error {
	d := w.demo
	js := d.admin.JetStream()
	if err := d.createStream(ctx, poisonSubjects, poisonTransform); err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created stream %s on %s, stamped by the transform %s", streamName, poisonSubjects, poisonTransform),
		"The customer (token 1) picks the partition: a customer's created orders and refunds share one.")
	var err error
	if w.dead, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: deadLetterStream, Subjects: []string{deadLetterSubj}}); err != nil {
		return fmt.Errorf("create stream %s: %w", deadLetterStream, err)
	}
	d.step(fmt.Sprintf("Created stream %s capturing %s: where dead letters go", deadLetterStream, deadLetterSubj),
		"(nats stream add "+deadLetterStream+" --subjects "+deadLetterSubj+")")
	if err := d.createPair(ctx); err != nil {
		return err
	}
	backoff := make([]string, len(poisonBackoff))
	for i, b := range poisonBackoff {
		backoff[i] = b.String()
	}
	if n := d.o.Batch; n > 0 {
		d.step("Starting m1 and m2, each failing every batch that holds a refund",
			fmt.Sprintf("Each hands its messages over in ordered batches of %d, under a retry policy: a failing batch is called again,", n),
			fmt.Sprintf("%s apart, at most %d times; then cg splits it in halves, handling the good part in order, until the refund", strings.Join(backoff, " then "), poisonMaxDeliver),
			fmt.Sprintf("fails alone, and only the refund is published to %s with Cg- headers and acked.", deadLetterSubj),
			fmt.Sprintf("(cg static consume ORDERS fulfillment m1 --batch %d --fail-subject '%s' --max-deliver %d --backoff %s --dead-letter %s)",
				n, poisonFail, poisonMaxDeliver, strings.Join(backoff, ","), deadLetterSubj))
	} else {
		d.step("Starting m1 and m2, each failing every refund",
			fmt.Sprintf("Each runs %d handler calls at once (one per customer at a time) and a retry policy: at most %d", poisonConcurrent, poisonMaxDeliver),
			fmt.Sprintf("deliveries, %s apart, then the message is published to %s with Cg- headers and acked.", strings.Join(backoff, " then "), deadLetterSubj),
			fmt.Sprintf("(cg static consume ORDERS fulfillment m1 --concurrency %d --fail-subject '%s' --max-deliver %d --backoff %s --dead-letter %s)",
				poisonConcurrent, poisonFail, poisonMaxDeliver, strings.Join(backoff, ","), deadLetterSubj))
	}
	for _, m := range []string{"m1", "m2"} {
		if err := w.startInstance(ctx, m, m+"/a"); err != nil {
			return err
		}
	}
	return nil
}

// startInstance joins member with the walkthrough's retry policy.
func (w *poisonWalk) startInstance(ctx context.Context, member, name string) error {
	d := w.demo
	return d.startInstance(ctx, member, name, func(ctx context.Context, c *cg.Client, inst *instance) (*cg.Member, error) {
		opts := d.joinOptions(inst)
		onEvent := opts.OnEvent
		opts.Concurrency = poisonConcurrent
		opts.OnEvent = func(e cg.Event) {
			if e.Kind == cg.EventPoison {
				w.onPoisonEvent(inst, e)
				return
			}
			onEvent(e)
		}
		opts.Retry = &cg.RetryPolicy{
			MaxDeliver: poisonMaxDeliver, Backoff: poisonBackoff,
			OnPoison: cg.PoisonDeadLetter, DeadLetter: deadLetterSubj,
		}
		h := w.handler(inst)
		if n := d.o.Batch; n > 0 {
			opts.Concurrency, h = 0, nil
			opts.Batch = &cg.BatchOptions{Size: n, Wait: 50 * time.Millisecond, DoubleAck: true, Handler: w.batchHandler(inst)}
		}
		return c.Join(ctx, cg.KindStatic, streamName, groupName, member, h, opts)
	})
}

// handler fails every refund and handles the rest as the other
// walkthroughs do, counting what happens around the poison message.
func (w *poisonWalk) handler(inst *instance) cg.Handler {
	d := w.demo
	sleep := d.o.Sleep
	return func(ctx context.Context, m *cg.Msg) {
		md, mdErr := m.Metadata()
		if server.SubjectMatchesFilter(m.Subject(), poisonFail) {
			w.mu.Lock()
			if w.firstFail.IsZero() {
				w.firstFail = time.Now()
			}
			n := 0
			if mdErr == nil {
				n = int(md.NumDelivered)
			}
			w.deliveries = append(w.deliveries, n)
			w.mu.Unlock()
			d.logf("  fail   %s %s: delivery %d failed (matches %s)", d.inst(inst.name), m.Subject(), n, poisonFail)
			m.Fail(errors.New("refunds are not implemented"))
			_ = m.Nak()
			return
		}
		if sleep > 0 {
			time.Sleep(sleep)
		}
		key, seq, _ := traffic.KeyOf(m.Headers())
		var streamSeq uint64
		if mdErr == nil {
			streamSeq = md.Sequence.Stream
		}
		w.observe(key, streamSeq)
		d.verifier.Observe(key, seq, streamSeq, inst.name)
		actx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = m.DoubleAck(actx)
	}
}

// batchHandler fails every batch holding a refund and handles the others
// as handler does, counting each call that held the refund as a failure.
func (w *poisonWalk) batchHandler(inst *instance) cg.BatchHandler {
	d := w.demo
	sleep := d.o.Sleep
	return func(ctx context.Context, b *cg.Batch) error {
		for _, m := range b.Msgs {
			if !server.SubjectMatchesFilter(m.Subject(), poisonFail) {
				continue
			}
			w.mu.Lock()
			if w.firstFail.IsZero() {
				w.firstFail = time.Now()
			}
			w.deliveries = append(w.deliveries, b.Attempt)
			w.mu.Unlock()
			d.logf("  fail   %s batch %d attempt %d of %d message(s): %s failed (matches %s)", d.inst(inst.name), b.Number, b.Attempt, len(b.Msgs), m.Subject(), poisonFail)
			m.Fail(errors.New("refunds are not implemented"))
			return fmt.Errorf("%s: refunds are not implemented", m.Subject())
		}
		for _, m := range b.Msgs {
			if sleep > 0 {
				time.Sleep(sleep)
			}
			key, seq, _ := traffic.KeyOf(m.Headers())
			var streamSeq uint64
			if md, err := m.Metadata(); err == nil {
				streamSeq = md.Sequence.Stream
			}
			w.observe(key, streamSeq)
			d.verifier.Observe(key, seq, streamSeq, inst.name)
		}
		return nil
	}
}

// observe counts a handled message against the poison message: a later
// message of its key handled before the dead letter is in its stream
// breaks order; other keys handled meanwhile show the traffic flowing.
func (w *poisonWalk) observe(key string, streamSeq uint64) {
	pseq := w.poisonSeq.Load()
	w.mu.Lock()
	retrying := !w.firstFail.IsZero()
	w.mu.Unlock()
	if key != w.poisonKey {
		if retrying && !w.dlSeen.Load() {
			w.mu.Lock()
			w.during++
			w.mu.Unlock()
		}
		return
	}
	if pseq == 0 || streamSeq < pseq {
		return
	}
	if !w.dlSeen.Load() {
		// Look, not trust: the dead letter must be in its stream by now.
		if si, err := w.dead.Info(context.Background()); err == nil && si.State.Msgs > 0 {
			w.dlSeen.Store(true)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keyAfter++
	if !w.dlSeen.Load() {
		w.earlyAfter++
	}
}

// onPoisonEvent narrates the engine's poison events. It does not mark the
// dead letter seen: observe looks in the stream itself.
func (w *poisonWalk) onPoisonEvent(inst *instance, e cg.Event) {
	if e.Kind != cg.EventPoison {
		return
	}
	w.logf("  poison %s %s", w.inst(inst.name), w.cs.Yellow(e.Reason))
}

func (w *poisonWalk) printVerdict(v PoisonVerdict) error {
	kv := w.verdictHead(v.OK, v.Reason)
	kv.Addf("  published", "%d (over %d keys), plus the poison message", v.Published, v.Keys)
	kv.Addf("  processed", "%d distinct key/seq (%d handler calls)", v.Processed, v.Handled)
	kv.Addf("  poison message", "%s, stream seq %d, key %s", v.PoisonSubject, v.PoisonSeq, v.PoisonKey)
	if v.Batch > 0 {
		kv.Addf("  failed calls", "%d holding it (%d of the batch of %d, then halves)", v.Failures, v.MaxDeliver, v.Batch)
	} else {
		kv.Addf("  failed deliveries", "%d of at most %d", v.Failures, v.MaxDeliver)
	}
	kv.Addf("  dead-lettered", "%d (headers %s)", v.DeadLettered, headerText(v))
	kv.Addf("  key after poison", "%d handled, %d before the dead letter", v.KeyAfter, v.EarlyAfter)
	kv.Addf("  other keys meanwhile", "%d handled during the retries", v.OthersDuringRetries)
	kv.Addf("  duplicates", "%d", v.Duplicates)
	kv.Addf("  order violations", "%d", v.OrderViolations)
	kv.Addf("  lost", "%d", v.Lost)
	kv.Addf("  elapsed", "%.1fs", v.ElapsedSeconds)
	return kv.Render()
}

func headerText(v PoisonVerdict) string {
	if len(v.Headers) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(v.Headers))
	for k := range v.Headers {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + v.Headers[k]
	}
	ok := "ok"
	if !v.HeadersOK {
		ok = "WRONG"
	}
	return ok + ": " + strings.Join(parts, " ")
}
