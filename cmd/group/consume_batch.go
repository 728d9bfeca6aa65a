package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// consume --batch: ordered batches (pkg/cg/batch.go). Message lines are
// printed as each message of a batch is handed to the handler (then
// --sleep is spent on it); a batch line follows every attempt.

// BatchLine ends each batch attempt in consume --json output.
type BatchLine struct {
	Type     string `json:"type"` // "batch"
	Member   string `json:"member"`
	Batch    uint64 `json:"batch"`
	Size     int    `json:"size"`
	Acked    bool   `json:"acked"`
	FirstSeq uint64 `json:"first_seq"`
	LastSeq  uint64 `json:"last_seq"`
	Attempt  int    `json:"attempt"`
	Final    bool   `json:"final"`
	Error    string `json:"error,omitempty"`
}

// batchFlags binds --batch, --batch-wait and --fail-every.
func (o *ConsumeOptions) batchFlags(fs *pflag.FlagSet) {
	fs.IntVar(&o.Batch, "batch", 0, "hand messages to the handler in ordered batches of up to N (all under one pin, acked together after the batch succeeded, a failed batch retried whole and in order); 0: one at a time. Max ack pending defaults to 4×N; at most "+strconv.Itoa(cg.MaxBatchSize)+" (a batch holds its messages, four batches' worth pulled ahead)")
	cmdutil.DurationVar(fs, &o.BatchWait, "batch-wait", 0, "100ms", "with --batch, how long to gather after a batch's first message before handing over fewer than N (0: 100ms)")
	fs.IntVar(&o.FailEvery, "fail-every", 0, "with --batch, fail the first attempt of every K-th batch, to watch it retried in order (a failing sink, for demos); 0: never")
}

// checkBatch refuses --batch values and combinations that cannot work,
// before anything is joined. mapSet: --max-ack-pending was given.
func (o *ConsumeOptions) checkBatch(fs *pflag.FlagSet) error {
	batchSet := fs.Changed("batch")
	if o.FailEvery < 0 {
		return cmdutil.UsageErrorf("--fail-every %d is negative: use 0 (never) or K >= 1 to fail the first attempt of every K-th batch", o.FailEvery)
	}
	if !batchSet {
		for _, f := range []string{"batch-wait", "fail-every"} {
			if fs.Changed(f) {
				return cmdutil.UsageErrorf("--%s works only with --batch N: add --batch, such as --batch 50", f)
			}
		}
		return nil
	}
	if o.Batch <= 0 {
		return cmdutil.UsageErrorf("--batch %d: use 1 or more messages per batch, such as --batch 50 (leave it out to handle messages one at a time)", o.Batch)
	}
	if fs.Changed("concurrency") && o.Concurrency > 1 {
		return cmdutil.UsageErrorf("--batch and --concurrency %d cannot be combined: a batch is the member's next messages in order under one pin; use one of them (more members scale batches)", o.Concurrency)
	}
	for _, f := range []string{"max-deliver", "backoff", "on-poison", "dead-letter", "fail-subject"} {
		if fs.Changed(f) {
			return cmdutil.UsageErrorf("--batch and --%s cannot be combined yet: a batch is retried whole (a failing batch stops the member after its attempts); leave one of them out", f)
		}
	}
	if fs.Changed("order") {
		return cmdutil.UsageErrorf("--order works only with --concurrency, which --batch does not combine with: leave --order out (a batch keeps the member's stream order)")
	}
	if fs.Changed("max-ack-pending") {
		if o.MaxAckPending < o.Batch {
			return cmdutil.UsageErrorf("--max-ack-pending %d is below --batch %d: batches could never fill; raise it to %d or more, or leave it out (it then defaults to %d)", o.MaxAckPending, o.Batch, o.Batch, 4*o.Batch)
		}
	} else {
		o.MaxAckPending = 0 // cg picks 4 × the batch size
	}
	return nil
}

// batchRun is what the batch handler shares with consumeRun.
type batchRun struct {
	o        *ConsumeOptions
	mu       *sync.Mutex
	sum      *Summary
	js       *render.JSONStream
	cs       *render.ColorScheme
	out      io.Writer
	who      string
	verifier *traffic.Verifier
	stop     func()
}

// options are the engine's batch options for consume.
func (r *batchRun) options() *cg.BatchOptions {
	return &cg.BatchOptions{Size: r.o.Batch, Wait: r.o.BatchWait, DoubleAck: true, Handler: r.handle, OnBatch: r.report}
}

func (r *batchRun) handle(ctx context.Context, b *cg.Batch) error {
	o := r.o
	r.mu.Lock()
	over := o.Count > 0 && r.sum.Acked >= o.Count
	r.mu.Unlock()
	if over {
		// Gathered while stopping after --count: handed back unacked.
		return errCountReached
	}
	for _, m := range b.Msgs {
		start := time.Now()
		var check traffic.Check
		var key string
		var keySeq uint64
		md, mdErr := m.Metadata()
		if r.verifier != nil && b.Attempt == 1 {
			var sseq uint64
			if mdErr == nil {
				sseq = md.Sequence.Stream
			}
			key, keySeq, _ = traffic.KeyOf(m.Headers())
			check = r.verifier.Observe(key, keySeq, sseq, o.Member)
		}
		line := MsgLine{Type: "msg", Member: o.Member, Partition: m.Partition(), Subject: m.Subject(), PinID: m.PinID(), Batch: b.Number, Time: time.Now()}
		if b.Attempt > 1 {
			line.Attempt = b.Attempt
		}
		if mdErr == nil {
			line.StreamSeq, line.Delivered = md.Sequence.Stream, md.NumDelivered
		}
		if r.verifier != nil {
			line.Key, line.KeySeq, line.Check = key, keySeq, string(check.Outcome)
		}
		r.mu.Lock()
		if o.F.JSON {
			_ = r.js.Encode(line)
		} else {
			extra := ""
			if b.Attempt > 1 {
				extra = r.cs.Yellow(fmt.Sprintf(" (attempt %d)", b.Attempt))
			} else if line.Delivered > 1 {
				extra = r.cs.Yellow(fmt.Sprintf(" (delivery %d)", line.Delivered))
			}
			if r.verifier != nil {
				extra += fmt.Sprintf(" key=%s#%d", key, keySeq)
				switch check.Outcome {
				case traffic.Duplicate:
					extra += " " + r.cs.Yellow("DUPLICATE")
				case traffic.OutOfOrder:
					extra += " " + r.cs.Red("OUT OF ORDER")
				}
			}
			fmt.Fprintf(r.out, "[%s] p%-3d %s seq=%d pin=%s batch=%d%s\n", r.who, line.Partition, line.Subject, line.StreamSeq, shortPin(line.PinID), b.Number, extra)
		}
		r.mu.Unlock()
		if o.Sleep > 0 {
			// Per message, and not cut short by a stop: the batch in
			// hand is finished and acked.
			time.Sleep(max(0, o.Sleep-time.Since(start)))
		}
	}
	if o.work != nil {
		return o.work.handleBatch(b)
	}
	if o.FailEvery > 0 && b.Number%uint64(o.FailEvery) == 0 && b.Attempt == 1 {
		return fmt.Errorf("simulated sink failure (--fail-every %d)", o.FailEvery)
	}
	return nil
}

// errCountReached: a batch gathered after --count was reached; it is
// handed back unacked and not reported.
var errCountReached = errors.New("count reached")

func (r *batchRun) report(e cg.BatchEvent) {
	o := r.o
	if errors.Is(e.Err, errCountReached) {
		return
	}
	line := BatchLine{Type: "batch", Member: o.Member, Batch: e.Number, Size: e.Size, Acked: e.Acked, FirstSeq: e.FirstSeq, LastSeq: e.LastSeq, Attempt: e.Attempt, Final: e.Final}
	if e.Err != nil {
		line.Error = hints.Error(e.Err)
	}
	r.mu.Lock()
	switch {
	case e.Acked:
		r.sum.Handled += e.Size
		r.sum.Acked += e.Size
	case e.Final && e.Err != nil:
		r.sum.Handled += e.Size
		r.sum.AckFailed += e.Size
	}
	done := o.Count > 0 && r.sum.Acked >= o.Count
	if o.F.JSON {
		_ = r.js.Encode(line)
	} else {
		outcome := r.cs.Green("acked")
		switch {
		case e.Acked:
		case !e.Final:
			outcome = r.cs.Yellow("failed, retrying: " + line.Error)
		default:
			outcome = r.cs.Red("not acked: " + line.Error)
		}
		attempt := ""
		if e.Attempt > 1 {
			attempt = fmt.Sprintf(" attempt %d", e.Attempt)
		}
		fmt.Fprintf(r.out, "[%s] batch %d: %d message(s) seq %d-%d%s %s\n", r.who, e.Number, e.Size, e.FirstSeq, e.LastSeq, attempt, outcome)
	}
	r.mu.Unlock()
	if done {
		r.stop()
	}
}
