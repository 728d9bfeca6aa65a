package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// ConsumeOptions are the bound arguments and flags of consume.
type ConsumeOptions struct {
	F                     *factory.Factory
	Kind                  cg.Kind
	Stream, Group, Member string
	Sleep                 time.Duration
	AckWait               time.Duration
	PinnedTTL             time.Duration
	Liveness              time.Duration
	Inactive              time.Duration
	MaxAckPending         int
	Count                 int
	Verify                bool
	ReferenceCompatible   bool
	// Concurrency and Order: handler calls at once and what they keep in
	// order (--concurrency, --order).
	Concurrency int
	Order       string
	// Batch, BatchWait, FailEvery: ordered batches (--batch, --batch-wait,
	// --fail-every; consume_batch.go).
	Batch     int
	BatchWait time.Duration
	FailEvery int
	// Poison: the retry policy and the demo handler's failures (poison.go).
	Poison PoisonFlags
	// Listen: the health and metrics endpoint (consume_listen.go).
	Listen ListenFlags
	// Worker: --exec, --worker, --http (consume_worker.go); work is the
	// started worker.
	Worker WorkerFlags
	work   *workerRun
}

// NewCmdConsume builds `cg <kind> consume <stream> <group> <member>`.
func NewCmdConsume(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &ConsumeOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:     "consume <stream> <group> <member>",
		Aliases: []string{"join"},
		Short:   "Run an instance of a member: handle its partitions' messages in order",
		Long: "Run an instance of a member. The server pins one instance per member; any others wait as hot\n" +
			"standbys. Each message is printed with its partition, subject (partition token stripped), stream\n" +
			"sequence, pin, processing time and ack outcome. On Ctrl-C or SIGTERM the message in hand is\n" +
			"finished and acked and the pin released, so a standby takes over at once.",
		Example: fmt.Sprintf("  cg %s consume ORDERS fulfillment m1 --sleep 25ms\n  cg %s join ORDERS fulfillment m1 --json", k, k),
		Args:    Args("stream", "group", "member"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group, opts.Member = args[0], args[1], args[2]
			if err := opts.checkCeilings(); err != nil {
				return err
			}
			if err := opts.checkLanes(cmd.Flags().Changed("max-ack-pending")); err != nil {
				return err
			}
			if err := opts.checkWorker(cmd.Flags()); err != nil {
				return err
			}
			if err := opts.checkBatch(cmd.Flags()); err != nil {
				return err
			}
			if err := opts.Poison.check(cmd.Flags()); err != nil {
				return err
			}
			if err := opts.Listen.check(); err != nil {
				return err
			}
			return consumeRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	cmdutil.DurationVar(fs, &opts.Sleep, "sleep", 20*time.Millisecond, "25ms", "time to simulate processing each message")
	cmdutil.DurationVar(fs, &opts.AckWait, "ack-wait", cg.DefaultAckWait, "5s", "how long the server waits for an ack before redelivering; the pinned TTL follows it")
	cmdutil.DurationVar(fs, &opts.PinnedTTL, "pinned-ttl", 0, "1s", "how long a pinned instance may go without pulling before a standby is pinned (0: max(ack-wait, 1s), the reference's); shorter fails a frozen reference instance (or any, with --liveness-check 0s) over sooner but risks pin flaps on a starved machine. Part of the member consumer's configuration: instances of one member must agree")
	if k == cg.KindStatic {
		cmdutil.DurationVar(fs, &opts.Inactive, "inactive-threshold", cg.DefaultInactiveThreshold, "1h", "delete the member consumer this long after its last instance stops; the member resumes where it left off when it returns (0s: keep it forever, as the reference does; to share a member with reference instances use --reference-compatible)")
	}
	cmdutil.DurationVar(fs, &opts.Liveness, "liveness-check", 250*time.Millisecond, "250ms", "how often a standby checks that the pinned instance is still there, to replace a dead, frozen or cut-off one at once instead of after the pinned TTL; the pinned instance fences itself on a matching threshold, so instances of one member should agree (0s: off)")
	cmdutil.CountVar(fs, &opts.MaxAckPending, "max-ack-pending", cg.DefaultMaxAckPending, 1, "1", "unacknowledged messages allowed at once (1 keeps strict per-key order); at most "+strconv.Itoa(cg.MaxAckPendingMax)+" (each held message takes about 1 KB plus its payload)")
	cmdutil.CountVar(fs, &opts.Concurrency, "concurrency", 1, 1, "8", "handler calls at once; above 1, messages of one key (see --order) are still handled in order, different keys at once, and max ack pending defaults to 4x this; at most "+strconv.Itoa(cg.MaxConcurrency)+" (each slot takes about 2.2 KB)")
	fs.StringVar(&opts.Order, "order", string(cg.OrderKey), "with --concurrency above 1, what stays in order: key (messages of one partitioning key), partition (one lane per partition) or none (key affinity only, no order)")
	cmdutil.CountVar(fs, &opts.Count, "count", 0, 0, "100", "stop after handling this many messages (0: run until interrupted)")
	fs.BoolVar(&opts.ReferenceCompatible, "reference-compatible", false, "create the member consumer exactly as the reference library would (no cg ownership marks; static: kept forever), so reference instances of the same member can share it; needed when one member runs both")
	opts.batchFlags(fs)
	fs.BoolVar(&opts.Verify, "verify", false, "check per-key order live from the Cg-Key/Cg-Key-Seq headers 'cg publish' stamps; exit 1 if order broke")
	opts.Poison.bind(fs)
	opts.Listen.bind(fs)
	opts.Worker.bind(fs)
	return cmd
}

// checkLanes refuses a bad --order, and an explicit --max-ack-pending
// below --concurrency; without one, a concurrent instance lets cg choose
// (JoinOptions.MaxAckPending 0).
func (o *ConsumeOptions) checkLanes(mapSet bool) error {
	if _, err := cg.ParseOrder(o.Order); err != nil {
		return cmdutil.UsageErrorf("invalid argument %q for \"--order\" flag: use key, partition or none", o.Order)
	}
	if o.Concurrency > 1 {
		if mapSet && o.MaxAckPending < o.Concurrency {
			return cmdutil.UsageErrorf("--max-ack-pending %d is below --concurrency %d: raise it to %d or more, or leave it out", o.MaxAckPending, o.Concurrency, o.Concurrency)
		}
		if !mapSet {
			o.MaxAckPending = 0
		}
	}
	return nil
}

// inactive maps the flag (0: keep forever) onto JoinOptions (negative:
// keep forever; 0: the default).
func inactive(d time.Duration) time.Duration {
	if d == 0 {
		return cg.KeepConsumer
	}
	return d
}

// liveness maps the flag (0: off) onto JoinOptions (negative: off).
func liveness(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// MsgLine is one handled message in consume's output.
type MsgLine struct {
	Type      string  `json:"type"` // "msg"
	Member    string  `json:"member"`
	Partition int     `json:"partition"`
	Subject   string  `json:"subject"`
	StreamSeq uint64  `json:"stream_seq"`
	Delivered uint64  `json:"delivered"`
	PinID     string  `json:"pin_id"`
	Millis    float64 `json:"processing_ms"`
	Acked     bool    `json:"acked"`
	AckError  string  `json:"ack_error,omitempty"`
	// Failed: the demo handler failed it on purpose (--fail-subject), or
	// the worker failed it (Error says how).
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
	// With --verify: the key, its per-key sequence and what the check found.
	Key    string `json:"key,omitempty"`
	KeySeq uint64 `json:"key_seq,omitempty"`
	Check  string `json:"check,omitempty"`
	// With --batch: the batch the message was handed in, and the attempt
	// when it is a retry (the batch's own line says whether it was acked).
	Batch   uint64 `json:"batch,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	// Time is when the message's outcome was known (its ack answered, or
	// its failure settled): the output may be written in bursts, so a
	// reader cannot take the time it reads a line for it.
	Time time.Time `json:"time,omitzero"`
}

// EventLine is a member event in consume's output.
type EventLine struct {
	Type       string    `json:"type"` // "event"
	Event      string    `json:"event"`
	Time       time.Time `json:"time"`
	Member     string    `json:"member"`
	Partitions []int     `json:"partitions,omitempty"`
	PinID      string    `json:"pin_id,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	Error      string    `json:"error,omitempty"`
}

// Summary is consume's last line.
type Summary struct {
	Type      string  `json:"type"` // "summary"
	Member    string  `json:"member"`
	Handled   int     `json:"handled"`
	Acked     int     `json:"acked"`
	AckFailed int     `json:"ack_failed"`
	PinsHeld  int     `json:"pins_held"`
	PinsLost  int     `json:"pins_lost"`
	Seconds   float64 `json:"seconds"`
	Reason    string  `json:"reason"`
	// With --verify.
	Verify *traffic.Stats `json:"verify,omitempty"`
	// Poison messages (poison.go): failed on purpose, dead-lettered, parked.
	Failed       int `json:"failed,omitempty"`
	DeadLettered int `json:"dead_lettered,omitempty"`
	Parked       int `json:"parked,omitempty"`
	Released     int `json:"released,omitempty"`
}

func consumeRun(ctx context.Context, o *ConsumeOptions) error {
	if o.PinnedTTL != 0 && o.PinnedTTL < 250*time.Millisecond {
		return cmdutil.UsageErrorf("--pinned-ttl %s is too short: pulls must renew the pin well within it; use 250ms or more, such as 1s", o.PinnedTTL)
	}
	if o.Liveness > 0 && o.Liveness < 50*time.Millisecond {
		return cmdutil.UsageErrorf("--liveness-check %s is too short: the pinned instance's fence threshold derives from it; use 50ms or more (250ms is the default), or 0s to turn the check off", o.Liveness)
	}
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	if o.Worker.on() {
		if o.work, err = o.startWorker(ctx, c); err != nil {
			return wrap(err, o.Kind, o.Stream, o.Group)
		}
		defer o.work.close()
	}
	ios := o.F.IOStreams
	cs := render.NewColorScheme(ios.ColorEnabled())
	out := newLineWriter(ios.Out)
	js := render.NewJSONStream(out)
	var mu sync.Mutex // one writer at a time; events come from other goroutines
	sum := Summary{Type: "summary", Member: o.Member}
	who := cs.Member(o.Member)

	var verifier *traffic.Verifier
	if o.Verify {
		// An instance may take over mid-stream: each key's first
		// key-seq seen is where its counting starts.
		verifier = traffic.NewVerifier(traffic.VerifierOptions{MidStream: true})
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()

	onEvent := func(e cg.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case cg.EventPinned:
			sum.PinsHeld++
		case cg.EventPinLost:
			if e.Cause != cg.CauseReleasedOnStop {
				sum.PinsLost++
			}
		case cg.EventStopped:
			sum.Reason = e.Reason
		case cg.EventPoison:
			o.onPoisonEvent(e, &sum, js, cs, who)
			return
		}
		if o.F.JSON {
			el := EventLine{Type: "event", Event: string(e.Kind), Time: e.Time, Member: e.Member, PinID: e.PinID, Reason: e.Reason}
			// On a partition-layout group a pin (and what befalls it) is
			// one partition consumer's: the line names that partition, as
			// the text line does, so a reader can tell its pins apart.
			if e.Kind == cg.EventJoined || e.Kind == cg.EventRebalanced ||
				(len(e.Partitions) == 1 && e.Consumer == cg.PartitionConsumerName(o.Group, e.Partitions[0])) {
				el.Partitions = e.Partitions
			}
			if e.Err != nil {
				el.Error = hints.Error(e.Err)
			}
			_ = js.Encode(el)
			return
		}
		var line string
		// On a partition-layout group pins come and go per partition.
		onPart := ""
		if len(e.Partitions) == 1 && e.Consumer == cg.PartitionConsumerName(o.Group, e.Partitions[0]) {
			onPart = fmt.Sprintf(" on partition %d", e.Partitions[0])
		}
		switch e.Kind {
		case cg.EventJoined:
			if e.Reason != "" {
				defer fmt.Fprintf(ios.ErrOut, "[%s] %s\n", who, e.Reason)
			}
			line = fmt.Sprintf("joined %s group %s on %s as %s: partitions %s via consumer %s", o.Kind, o.Group, o.Stream, who, Ranges(e.Partitions), e.Consumer)
			if e.Consumer == "" {
				line = fmt.Sprintf("joined %s group %s on %s as %s: partitions %s, one consumer each (%s-p<k>)", o.Kind, o.Group, o.Stream, who, Ranges(e.Partitions), o.Group)
			}
			if o.Kind.HasWorkStream() && e.Consumer == "" {
				line = fmt.Sprintf("joined %s group %s on %s as %s, one consumer per partition (%s-p<k>) on %s", o.Kind, o.Group, o.Stream, who, o.Group, o.Kind.WorkStream(o.Stream, o.Group))
			} else if o.Kind.HasWorkStream() {
				// An elastic instance learns its partitions as it binds: see rebalanced.
				line = fmt.Sprintf("joined %s group %s on %s as %s via consumer %s on %s", o.Kind, o.Group, o.Stream, who, e.Consumer, o.Kind.WorkStream(o.Stream, o.Group))
			}
		case cg.EventRebalanced:
			line = cs.Green("rebalanced") + ": partitions " + Ranges(e.Partitions)
		case cg.EventWaiting:
			line = cs.Yellow("waiting") + ": " + e.Reason
		case cg.EventPinned:
			line = cs.Green("pinned") + ": this instance is active" + onPart + " (pin " + shortPin(e.PinID) + ")"
		case cg.EventPinLost:
			line = cs.Yellow("pin lost") + onPart + " (" + shortPin(e.PinID) + "): " + e.Reason
		case cg.EventWarning:
			line = cs.Yellow("warning") + ": " + e.Reason
		case cg.EventFenced:
			line = cs.Red("fenced") + ": " + e.Reason
		case cg.EventStopped:
			line = "stopped: " + e.Reason
			if e.Err != nil {
				line = cs.Red("stopped") + ": " + hints.Error(e.Err)
			}
		default:
			line = string(e.Kind) + ": " + e.Reason
		}
		fmt.Fprintf(ios.ErrOut, "[%s] %s\n", who, line)
	}

	handler := func(hctx context.Context, m *cg.Msg) {
		mu.Lock()
		over := o.Count > 0 && sum.Handled >= o.Count
		mu.Unlock()
		if over {
			// Delivered while stopping after --count (another lane's):
			// hand it back once the instance has stopped pulling (its
			// context is cancelled then), or the server would deliver it
			// straight back to this instance.
			<-hctx.Done()
			_ = m.Nak()
			return
		}
		start := time.Now()
		if o.Sleep > 0 {
			// Not cut short by a stop: the message in hand is finished.
			time.Sleep(o.Sleep)
		}
		var check traffic.Check
		var key string
		var keySeq uint64
		md, mdErr := m.Metadata()
		if verifier != nil {
			var sseq uint64
			if mdErr == nil {
				sseq = md.Sequence.Stream
			}
			key, keySeq, _ = traffic.KeyOf(m.Headers())
			check = verifier.Observe(key, keySeq, sseq, o.Member)
		}
		if o.work != nil {
			if err := o.work.handle(m, md, mdErr); err != nil {
				o.workerFailed(m, md, mdErr, start, err, &mu, &sum, js, cs, who)
				return
			}
		}
		if o.Poison.fails(m.Subject()) {
			o.failMsg(m, md, mdErr, start, &mu, &sum, js, cs, who)
			return
		}
		// Not past the ack wait: by then the server redelivers anyway.
		actx, cancel := context.WithTimeout(context.Background(), min(o.F.Conn.Timeout, o.AckWait))
		ackErr := m.DoubleAck(actx)
		cancel()
		now := time.Now()
		took := now.Sub(start)
		line := &MsgLine{Type: "msg", Member: o.Member, Partition: m.Partition(), Subject: m.Subject(), PinID: m.PinID(),
			Millis: float64(took.Microseconds()) / 1000, Acked: ackErr == nil, Time: now}
		if mdErr == nil {
			line.StreamSeq, line.Delivered = md.Sequence.Stream, md.NumDelivered
		}
		if verifier != nil {
			line.Key, line.KeySeq, line.Check = key, keySeq, string(check.Outcome)
		}
		if ackErr != nil {
			line.AckError = ackErr.Error()
		}
		// The line is made outside the lock, so concurrent calls encode
		// at once; only the counts are shared.
		var text string
		if !o.F.JSON {
			outcome := cs.Green("acked")
			if ackErr != nil {
				outcome = cs.Red("ack failed: " + ackErr.Error())
			}
			redelivered := ""
			if line.Delivered > 1 {
				redelivered = cs.Yellow(fmt.Sprintf(" (delivery %d)", line.Delivered))
			}
			verdict := ""
			if verifier != nil {
				verdict = fmt.Sprintf(" key=%s#%d", key, keySeq)
				switch check.Outcome {
				case traffic.Duplicate:
					verdict += " " + cs.Yellow("DUPLICATE")
				case traffic.OutOfOrder:
					verdict += " " + cs.Red("OUT OF ORDER")
				case traffic.Unkeyed:
					verdict += " " + cs.Yellow("no Cg-Key headers")
				}
				if check.Gap > 0 {
					verdict += " " + cs.Yellow(fmt.Sprintf("gap +%d", check.Gap))
				}
			}
			text = fmt.Sprintf("[%s] p%-3d %s seq=%d pin=%s %s %s%s%s\n", who, line.Partition, line.Subject, line.StreamSeq,
				shortPin(line.PinID), took.Round(100*time.Microsecond), outcome, redelivered, verdict)
		}
		mu.Lock()
		sum.Handled++
		if ackErr == nil {
			sum.Acked++
		} else {
			sum.AckFailed++
		}
		done := o.Count > 0 && sum.Handled >= o.Count
		mu.Unlock()
		if o.F.JSON {
			_ = writeJSONLine(out, line)
		} else {
			_, _ = io.WriteString(out, text)
		}
		if done {
			stopRun()
		}
	}

	start := time.Now()
	jo := cg.JoinOptions{
		AckWait: o.AckWait, MaxAckPending: o.MaxAckPending, PinnedTTL: o.PinnedTTL, LivenessInterval: liveness(o.Liveness), InactiveThreshold: inactive(o.Inactive), OnEvent: onEvent,
		ReferenceCompatible: o.ReferenceCompatible, Concurrency: o.Concurrency, Order: cg.Order(o.Order),
		Retry: o.Poison.policy(),
	}
	lis, err := o.Listen.start(c, ios.ErrOut, who)
	if err != nil {
		return err
	}
	defer lis.close()
	jo.Observers = append(jo.Observers, lis.observers()...)
	var msgHandler cg.Handler = handler
	if o.Batch > 0 {
		// --batch: consume_batch.go hands over and prints whole batches.
		br := &batchRun{o: o, mu: &mu, sum: &sum, js: js, cs: cs, out: out, who: who, verifier: verifier, stop: stopRun}
		msgHandler, jo.Batch = nil, br.options()
	}
	m, err := c.Join(runCtx, o.Kind, o.Stream, o.Group, o.Member, msgHandler, jo)
	if err != nil {
		if ce := (*cg.CeilingError)(nil); errors.As(err, &ce) {
			return ceilingJoinErr(ce)
		}
		return wrap(poisonJoinErr(err, o.Kind, o.Stream, o.Group), o.Kind, o.Stream, o.Group)
	}
	stopErr := m.Wait()
	lis.stopped(ctx, stopErr)
	mu.Lock()
	defer mu.Unlock()
	sum.Seconds = time.Since(start).Seconds()
	switch {
	case stopErr != nil:
		sum.Reason = hints.Error(stopErr)
	case ctx.Err() != nil:
		sum.Reason = "interrupted"
	case runCtx.Err() != nil:
		sum.Reason = "count reached"
	}
	if verifier != nil {
		st := verifier.Stats()
		sum.Verify = &st
	}
	if o.F.JSON {
		_ = js.Encode(sum)
	} else {
		fmt.Fprintf(ios.ErrOut, "[%s] handled %d messages (%d acked, %d ack failed) in %s; pinned %d time(s), lost the pin %d time(s); %s\n",
			who, sum.Handled, sum.Acked, sum.AckFailed, time.Duration(sum.Seconds*float64(time.Second)).Round(time.Millisecond),
			sum.PinsHeld, sum.PinsLost, sum.Reason)
		if v := sum.Verify; v != nil {
			fmt.Fprintf(ios.ErrOut, "[%s] verify: %d keys, %d distinct key/seq, %d duplicates, %d order violations, %d gaps (%d still missing), %d without headers\n",
				who, v.Keys, v.Processed, v.Duplicates, v.Violations, v.Gaps, v.Missing, v.Unkeyed)
		}
		if line := poisonSummary(sum); line != "" {
			fmt.Fprintf(ios.ErrOut, "[%s] %s\n", who, line)
		}
	}
	if stopErr != nil && !errors.Is(stopErr, context.Canceled) {
		return stopErr
	}
	if v := sum.Verify; v != nil && v.Violations > 0 {
		return fmt.Errorf("per-key order broken %d time(s) (see OUT OF ORDER lines)", v.Violations)
	}
	return nil
}
