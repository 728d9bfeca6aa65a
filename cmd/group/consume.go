package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	// Dynamic: --dynamic, --session-timeout (consume_dynamic.go).
	Dynamic DynamicFlags
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
		Args:    cmdutil.Args("stream", "group", "member"),
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
			if err := opts.Dynamic.check(cmd.Flags(), opts.Group); err != nil {
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
	opts.Dynamic.bind(fs, k)
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
	Peer       string    `json:"peer,omitempty"` // member_added, member_dropped: the member
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
			return hints.Wrap(err, o.Kind, o.Stream, o.Group)
		}
		defer o.work.close()
	}
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	s := newSession(o, stopRun)

	start := time.Now()
	jo := cg.JoinOptions{
		AckWait: o.AckWait, MaxAckPending: o.MaxAckPending, PinnedTTL: o.PinnedTTL, LivenessInterval: liveness(o.Liveness), InactiveThreshold: inactive(o.Inactive), OnEvent: s.printEvent,
		ReferenceCompatible: o.ReferenceCompatible, Concurrency: o.Concurrency, Order: cg.Order(o.Order),
		Retry: o.Poison.policy(),
	}
	lis, err := o.Listen.start(c, o.F.IOStreams.ErrOut, s.who)
	if err != nil {
		return err
	}
	defer lis.close()
	jo.Observers = append(jo.Observers, lis.observers()...)
	o.Dynamic.apply(&jo)
	var msgHandler cg.Handler = s.handleMsg
	if o.Batch > 0 {
		// --batch: consume_batch.go hands over and prints whole batches.
		br := &batchRun{o: o, mu: &s.mu, sum: &s.sum, js: s.js, cs: s.cs, out: s.out, who: s.who, verifier: s.verifier, stop: stopRun}
		msgHandler, jo.Batch = nil, br.options()
	}
	m, err := c.Join(runCtx, o.Kind, o.Stream, o.Group, o.Member, msgHandler, jo)
	if err != nil {
		if ce := (*cg.CeilingError)(nil); errors.As(err, &ce) {
			return ceilingJoinErr(ce)
		}
		if ue := o.Dynamic.joinErr(err); ue != nil {
			return ue
		}
		return hints.Wrap(poisonJoinErr(err, o.Kind, o.Stream, o.Group), o.Kind, o.Stream, o.Group)
	}
	stopErr := m.Wait()
	lis.stopped(ctx, stopErr)
	return s.finish(ctx, runCtx, start, stopErr)
}

// session is what one consume run's printers share: the counts of the
// summary, the output streams and the order check. Events come from the
// member's goroutines and messages from its handler calls at once, so mu
// guards sum and the JSON stream.
type session struct {
	o        *ConsumeOptions
	mu       sync.Mutex
	sum      Summary
	out      io.Writer // standard output, one write per line
	js       *render.JSONStream
	cs       *render.ColorScheme
	who      string // the member's name, colored
	verifier *traffic.Verifier
	stop     func() // ends the run (--count reached)
	// acking: messages whose ack's reply is outstanding, under mu:
	// --count counts them handled.
	acking int
}

func newSession(o *ConsumeOptions, stop func()) *session {
	cs := render.NewColorScheme(o.F.IOStreams.ColorEnabled())
	out := newLineWriter(o.F.IOStreams.Out)
	s := &session{o: o, sum: Summary{Type: "summary", Member: o.Member}, out: out, js: render.NewJSONStream(out),
		cs: cs, who: cs.Member(o.Member), stop: stop}
	if o.Verify {
		// An instance may take over mid-stream: each key's first
		// key-seq seen is where its counting starts.
		s.verifier = traffic.NewVerifier(traffic.VerifierOptions{MidStream: true})
	}
	return s
}

// printEvent is the event printer: it counts pins and the stop reason for
// the summary and prints the event, a JSON line on stdout or a text line
// on stderr.
func (s *session) printEvent(e cg.Event) {
	o := s.o
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Kind {
	case cg.EventPinned:
		s.sum.PinsHeld++
	case cg.EventPinLost:
		if e.Cause != cg.CauseReleasedOnStop {
			s.sum.PinsLost++
		}
	case cg.EventStopped:
		s.sum.Reason = e.Reason
	case cg.EventPoison:
		o.onPoisonEvent(e, &s.sum, s.js, s.cs, s.who)
		return
	}
	if o.F.JSON {
		_ = s.js.Encode(s.eventLine(e))
		return
	}
	errOut := o.F.IOStreams.ErrOut
	fmt.Fprintf(errOut, "[%s] %s\n", s.who, s.eventText(e))
	if e.Kind == cg.EventJoined && e.Reason != "" {
		fmt.Fprintf(errOut, "[%s] %s\n", s.who, e.Reason)
	}
}

// onPartition tells whether e befalls one partition consumer's pin (a
// partition-layout group), which the lines then name.
func (s *session) onPartition(e cg.Event) bool {
	return len(e.Partitions) == 1 && e.Consumer == cg.PartitionConsumerName(s.o.Group, e.Partitions[0])
}

// eventLine is e in --json.
func (s *session) eventLine(e cg.Event) EventLine {
	el := EventLine{Type: "event", Event: string(e.Kind), Time: e.Time, Member: e.Member, PinID: e.PinID, Peer: e.Peer, Reason: e.Reason}
	// On a partition-layout group a pin (and what befalls it) is one
	// partition consumer's: the line names that partition, as the text
	// line does, so a reader can tell its pins apart.
	if e.Kind == cg.EventJoined || e.Kind == cg.EventRebalanced || s.onPartition(e) {
		el.Partitions = e.Partitions
	}
	if e.Err != nil {
		el.Error = hints.Error(e.Err)
	}
	return el
}

// eventText is e's text line, without the member prefix.
func (s *session) eventText(e cg.Event) string {
	o, cs := s.o, s.cs
	// On a partition-layout group pins come and go per partition.
	onPart := ""
	if s.onPartition(e) {
		onPart = fmt.Sprintf(" on partition %d", e.Partitions[0])
	}
	switch e.Kind {
	case cg.EventJoined:
		switch {
		case o.Kind.HasWorkStream() && e.Consumer == "":
			return fmt.Sprintf("joined %s group %s on %s as %s, one consumer per partition (%s-p<k>) on %s", o.Kind, o.Group, o.Stream, s.who, o.Group, o.Kind.WorkStream(o.Stream, o.Group))
		case o.Kind.HasWorkStream():
			// An elastic instance learns its partitions as it binds: see rebalanced.
			return fmt.Sprintf("joined %s group %s on %s as %s via consumer %s on %s", o.Kind, o.Group, o.Stream, s.who, e.Consumer, o.Kind.WorkStream(o.Stream, o.Group))
		case e.Consumer == "":
			return fmt.Sprintf("joined %s group %s on %s as %s: partitions %s, one consumer each (%s-p<k>)", o.Kind, o.Group, o.Stream, s.who, render.Ranges(e.Partitions), o.Group)
		}
		return fmt.Sprintf("joined %s group %s on %s as %s: partitions %s via consumer %s", o.Kind, o.Group, o.Stream, s.who, render.Ranges(e.Partitions), e.Consumer)
	case cg.EventRebalanced:
		return cs.Green("rebalanced") + ": partitions " + render.Ranges(e.Partitions)
	case cg.EventWaiting:
		return cs.Yellow("waiting") + ": " + e.Reason
	case cg.EventPinned:
		return cs.Green("pinned") + ": this instance is active" + onPart + " (pin " + shortPin(e.PinID) + ")"
	case cg.EventPinLost:
		return cs.Yellow("pin lost") + onPart + " (" + shortPin(e.PinID) + "): " + e.Reason
	case cg.EventWarning:
		return cs.Yellow("warning") + ": " + e.Reason
	case cg.EventFenced:
		return cs.Red("fenced") + ": " + e.Reason
	case cg.EventStopped:
		if e.Err != nil {
			return cs.Red("stopped") + ": " + hints.Error(e.Err)
		}
		return "stopped: " + e.Reason
	}
	return string(e.Kind) + ": " + e.Reason
}

// handled is what the message printer needs of one message the handler
// took: its metadata, when handling began, and the order check's finding.
type handled struct {
	m      *cg.Msg
	md     *jetstream.MsgMetadata
	mdErr  error
	start  time.Time
	key    string
	keySeq uint64
	check  traffic.Check
}

// handleMsg is consume's handler of one message: it spends --sleep, checks
// the order, runs the worker or the demo failure, double-acks the message
// and has the message printer print it.
func (s *session) handleMsg(hctx context.Context, m *cg.Msg) {
	o := s.o
	s.mu.Lock()
	over := o.Count > 0 && s.sum.Handled+s.acking >= o.Count
	s.mu.Unlock()
	if over {
		// Delivered while stopping after --count (another lane's):
		// hand it back once the instance has stopped pulling (its
		// context is cancelled then), or the server would deliver it
		// straight back to this instance.
		<-hctx.Done()
		_ = m.Nak()
		return
	}
	h := handled{m: m, start: time.Now()}
	if o.Sleep > 0 {
		// Not cut short by a stop: the message in hand is finished.
		time.Sleep(o.Sleep)
	}
	h.md, h.mdErr = m.Metadata()
	if s.verifier != nil {
		var sseq uint64
		if h.mdErr == nil {
			sseq = h.md.Sequence.Stream
		}
		h.key, h.keySeq, _ = traffic.KeyOf(m.Headers())
		h.check = s.verifier.Observe(h.key, h.keySeq, sseq, o.Member)
	}
	if o.work != nil {
		if err := o.work.handle(m, h.md, h.mdErr); err != nil {
			o.workerFailed(m, h.md, h.mdErr, h.start, err, &s.mu, &s.sum, s.js, s.cs, s.who)
			return
		}
	}
	if o.Poison.fails(m.Subject()) {
		o.failMsg(m, h.md, h.mdErr, h.start, &s.mu, &s.sum, s.js, s.cs, s.who)
		return
	}
	// The handler returns at once and its lane takes other keys while
	// the reply is outstanding: the engine holds this key until the
	// reply is in and this line is out (bounded by the ack wait), so
	// "acked" is what the server said.
	s.mu.Lock()
	s.acking++
	s.mu.Unlock()
	m.DoubleAckAsync(func(ackErr error) { s.printMsg(h, ackErr) })
}

// printMsg is the message printer: it prints a handled message with its
// ack outcome, counts it for the summary, and ends the run once --count
// messages are handled.
func (s *session) printMsg(h handled, ackErr error) {
	o, cs, m := s.o, s.cs, h.m
	now := time.Now()
	took := now.Sub(h.start)
	line := MsgLine{Type: "msg", Member: o.Member, Partition: m.Partition(), Subject: m.Subject(), PinID: m.PinID(),
		Millis: float64(took.Microseconds()) / 1000, Acked: ackErr == nil, Time: now}
	if h.mdErr == nil {
		line.StreamSeq, line.Delivered = h.md.Sequence.Stream, h.md.NumDelivered
	}
	if s.verifier != nil {
		line.Key, line.KeySeq, line.Check = h.key, h.keySeq, string(h.check.Outcome)
	}
	if ackErr != nil {
		line.AckError = ackErr.Error()
	}
	// The line is made outside the lock, so concurrent calls encode at
	// once; only the counts are shared.
	var text msgText
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
		if s.verifier != nil {
			verdict = fmt.Sprintf(" key=%s#%d", h.key, h.keySeq)
			switch h.check.Outcome {
			case traffic.Duplicate:
				verdict += " " + cs.Yellow("DUPLICATE")
			case traffic.OutOfOrder:
				verdict += " " + cs.Red("OUT OF ORDER")
			case traffic.Unkeyed:
				verdict += " " + cs.Yellow("no Cg-Key headers")
			}
			if h.check.Gap > 0 {
				verdict += " " + cs.Yellow(fmt.Sprintf("gap +%d", h.check.Gap))
			}
		}
		text = msgText{who: s.who, line: &line, took: took, outcome: outcome, redelivered: redelivered, verdict: verdict}
	}
	s.mu.Lock()
	s.acking--
	s.sum.Handled++
	if ackErr == nil {
		s.sum.Acked++
	} else {
		s.sum.AckFailed++
	}
	done := o.Count > 0 && s.sum.Handled >= o.Count
	s.mu.Unlock()
	if o.F.JSON {
		_ = writeMsgLine(s.out, &line)
	} else {
		_ = writeMsgText(s.out, &text)
	}
	if done {
		s.stop()
	}
}

// finish prints the summary once the member has stopped and returns the
// run's error: the member's, or a broken per-key order found by --verify.
func (s *session) finish(ctx, runCtx context.Context, start time.Time, stopErr error) error {
	o, errOut := s.o, s.o.F.IOStreams.ErrOut
	s.mu.Lock()
	defer s.mu.Unlock()
	sum := &s.sum
	sum.Seconds = time.Since(start).Seconds()
	switch {
	case stopErr != nil:
		sum.Reason = hints.Error(stopErr)
	case ctx.Err() != nil:
		sum.Reason = "interrupted"
	case runCtx.Err() != nil:
		sum.Reason = "count reached"
	}
	if s.verifier != nil {
		st := s.verifier.Stats()
		sum.Verify = &st
	}
	if o.F.JSON {
		_ = s.js.Encode(*sum)
	} else {
		fmt.Fprintf(errOut, "[%s] handled %d messages (%d acked, %d ack failed) in %s; pinned %d time(s), lost the pin %d time(s); %s\n",
			s.who, sum.Handled, sum.Acked, sum.AckFailed, time.Duration(sum.Seconds*float64(time.Second)).Round(time.Millisecond),
			sum.PinsHeld, sum.PinsLost, sum.Reason)
		if v := sum.Verify; v != nil {
			fmt.Fprintf(errOut, "[%s] verify: %d keys, %d distinct key/seq, %d duplicates, %d order violations, %d gaps (%d still missing), %d without headers\n",
				s.who, v.Keys, v.Processed, v.Duplicates, v.Violations, v.Gaps, v.Missing, v.Unkeyed)
		}
		if line := poisonSummary(*sum); line != "" {
			fmt.Fprintf(errOut, "[%s] %s\n", s.who, line)
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
