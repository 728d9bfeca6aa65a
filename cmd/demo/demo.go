// Package demo is `cg demo`: the seed article's walkthroughs in one process
// with nothing installed. Both start an embedded server, publish keyed
// traffic to ORDERS and check by counting that no message was lost and
// per-key order held throughout. The static walkthrough partitions the
// stream, runs a static group with a hot standby, steps the pinned
// instance down and then kills it; the elastic one leaves the stream plain,
// runs members before they are added, changes membership live and runs a
// dynamic member that adds itself on its start and drops itself on its stop.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/embedded"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// The walkthroughs' names, as the seed article types them.
const (
	streamName = "ORDERS"
	groupName  = "fulfillment"
	partitions = 10
	subjects   = "orders.*"
	pattern    = "orders.{key}"
)

// The walkthroughs `cg demo` runs.
const (
	Static  = "static"
	Elastic = "elastic"
)

// Bounds that keep the demo well inside a minute.
const (
	maxPhase     = 10 * time.Second
	maxAckWait   = 5 * time.Second
	overallLimit = 55 * time.Second
	drainLimit   = 15 * time.Second
	// stepLimit bounds the wait for one step's effect (a handoff, a
	// rebalance) to show in the handlers.
	stepLimit = 10 * time.Second
)

// Options are the argument and flags of demo.
type Options struct {
	IO *iostreams.IOStreams
	// Walkthrough names one of walkthroughs: Static, Elastic, Batches,
	// Poison or Workers.
	Walkthrough string
	JSON        bool
	Sleep       time.Duration
	Keys        int
	Rate        float64
	Port        int
	Phase       time.Duration
	AckWait     time.Duration
	// Concurrency is the static walkthrough's m2 instance's: handler
	// calls at once, per-key order kept.
	Concurrency int
	// Limit bounds the whole run.
	Limit time.Duration
	// Batch is the batches walkthrough's batch size (0: its default); the
	// poison walkthrough's members consume in batches of it when it is set
	// (0: one message at a time, on lanes).
	Batch int
	// Web serves the dashboard of the demo's group on WebListen while the
	// walkthrough runs, and WebHold more after the verdict.
	Web       bool
	WebListen string
	WebHold   time.Duration
}

// NewCmd returns `cg demo`.
func NewCmd(f *factory.Factory) *cobra.Command { return newCmdDemo(f) }

func newCmdDemo(f *factory.Factory) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Rate: 50, Limit: overallLimit}
	cmd := &cobra.Command{
		Use:   "demo [static|elastic|batches|poison|workers]",
		Short: "Run a walkthrough of the seed article in one process and check it by counting",
		Long: `Run one of the seed article's walkthroughs in this one process, with nothing
installed: static (the default), elastic or batches; or poison, a walkthrough
of a poison message (docs/poison.md).

Both start a NATS server with JetStream on loopback (random port, temporary
store removed at the end), run every member instance on its own connection
and publish keyed traffic to the stream ORDERS on orders.<customer>.

static: ORDERS is partitioned into 10 by customer key with a subject
transform, and the static group fulfillment is balanced over members m1 and
m2. Three instances run: m1 twice (one pinned, one hot standby) and m2 once,
m2 with --concurrency handler calls at once (different customers at once,
each customer's orders still in order).
While traffic flows it steps m1 down, then kills m1's pinned instance
without a goodbye so the server fails over after the pinned TTL.

elastic: ORDERS stays plain. The elastic group fulfillment sources it into
the work-queue stream ORDERS-fulfillment, hashing the customer into 10
partitions. m1, m2 and m3 start before they are members and wait; then,
while traffic flows, m1 and m2 are added, m3 is added, m1 is dropped (the
survivors pick up its partitions) and m1 is added back. Then m4 starts with
--dynamic and adds itself, and is stopped cleanly (as Ctrl-C does) and drops
itself; nobody edits the membership for it. Each change is timed: for an
add, from the configuration update (m4: from its start) to the new member's
first message; for a drop, from the update (m4: from its stop) until every
orphaned partition was served by its new owner.

batches: one static member m1 over all 10 partitions runs two instances that
consume in ordered batches of --batch messages (default 10, at 200/s unless
--rate is given). The pinned one is killed in the middle of a batch, after
its sink write and before its acks; the standby must handle that whole batch
again, in the same order, before anything later. Its verdict adds the
batches acked, the killed and redelivered batch, and fails on more
duplicates than the killed batch (and what a pin the server gave anew,
with no kill, handed back).
poison: ORDERS is partitioned by customer on orders.<customer>.<event>, and
members m1 and m2 of a static group run 4 handler calls at once with a retry
policy (3 deliveries, backoff 200ms then 400ms, dead letters to dlq.orders,
captured by the stream DEAD). One refund among the traffic fails every time
(as consume --fail-subject 'orders.*.refund' does): it is dead-lettered with
its Cg- headers while the rest flows, and its customer's later orders are
handled only after it. The verdict counts the dead letters (1, headers
checked), the poison key's messages handled too early (0), per-key order
violations and lost messages (0); --keys, --rate, --sleep, --phase (the
traffic time) and --ack-wait apply. With --batch N the members consume in
ordered batches of N instead (as consume --batch N): the batch holding the
refund fails its 3 attempts, is split in halves until the refund fails
alone, and only the refund is dead-lettered; the rest of the batch is
handled, in order.

workers: the static group fulfillment over m1 and m2 as in static, each
member run as cg static consume ... --exec handle.sh --concurrency 4: a shell
script started once per message, the body on its stdin, the metadata
(CG_KEY, CG_STREAM_SEQ, ...) and headers (CG_HDR_<name>) in its environment
(docs/workers.md). The scripts record what they were told, and the verdict
counts from that record: their runs, and runs told a CG_KEY other than the
message's Cg-Key header (0). --keys, --rate, --phase (twice the traffic time)
and --ack-wait apply.

Narration, member events and status go to stderr; the verdict goes to stdout
(--json for JSON). It counts what the handlers saw: published, processed,
duplicates, per-key order violations and lost messages, and the failover
gaps or rebalance latencies. It exits 0 when no message was lost and per-key
order held, 1 otherwise, and always within a minute.

--web serves the group's live dashboard (the page of cg dashboard) on a
loopback port while the walkthrough runs and prints its URL: the partitions
as lanes in their owner's colour, the instances and their pins, each message
the handlers take (which instance handled which key) and a timeline of pins,
step-downs, failovers and rebalances. --web-hold keeps the page, the server
and the members running that long after the verdict (traffic stopped), so
that members can be added and dropped from the page; interrupt to end.`,
		Example: `  cg demo
  cg demo elastic
  cg demo static --keys 50 --rate 100/s --sleep 10ms
  cg demo elastic --phase 3s --json > verdict.json
  cg demo batches --batch 20
  cg demo poison
  cg demo poison --batch 10
  cg demo workers
  cg demo elastic --web --web-hold 10m`,
		ValidArgs: []string{Static, Elastic, Batches, Poison, Workers},
		Args: func(_ *cobra.Command, args []string) error {
			switch {
			case len(args) > 1:
				return cmdutil.UsageErrorf("demo takes one walkthrough, got %d arguments: use cg demo static or cg demo elastic", len(args))
			case len(args) == 1 && walkthroughs[args[0]].start == nil:
				return cmdutil.UsageErrorf("unknown walkthrough %q: use cg demo static, cg demo elastic, cg demo batches, cg demo poison or cg demo workers", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.JSON = f.JSON
			opts.Walkthrough = Static
			if len(args) == 1 {
				opts.Walkthrough = args[0]
			}
			if opts.Phase > maxPhase {
				return cmdutil.UsageErrorf("--phase %v is too long: the demo must end within a minute; use at most %v, such as 5s", opts.Phase, maxPhase)
			}
			if opts.AckWait < time.Second || opts.AckWait > maxAckWait {
				return cmdutil.UsageErrorf("--ack-wait %v is out of range: use 1s to %v, such as 2s", opts.AckWait, maxAckWait)
			}
			if opts.Sleep > 500*time.Millisecond {
				return cmdutil.UsageErrorf("--sleep %v is too long for the demo's traffic: use at most 500ms, such as 5ms", opts.Sleep)
			}
			if opts.Concurrency > cg.MaxConcurrency {
				return cmdutil.UsageErrorf("--concurrency %d is above cg's ceiling of %d (%s): use at most %d, such as 4", opts.Concurrency, cg.MaxConcurrency, cg.CostConcurrency, cg.MaxConcurrency)
			}
			if opts.Keys > traffic.MaxKeys {
				return cmdutil.UsageErrorf("--keys %d is above cg's ceiling of %d (each key a run uses takes about 280 B): use at most %d, such as 20", opts.Keys, traffic.MaxKeys, traffic.MaxKeys)
			}
			if opts.Batch > 100 {
				return cmdutil.UsageErrorf("--batch %d is too large for the demo's traffic: use at most 100, such as 10", opts.Batch)
			}
			wt := walkthroughs[opts.Walkthrough]
			if wt.batchIfGiven && !cmd.Flags().Changed("batch") {
				opts.Batch = 0
			}
			if wt.rate > 0 && !cmd.Flags().Changed("rate") {
				opts.Rate = wt.rate
			}
			if opts.Rate == 0 || opts.Rate > 2000 {
				return cmdutil.UsageErrorf("--rate %s is out of range for the demo: use more than 0 and at most 2000/s, such as 50/s", traffic.FormatRate(opts.Rate))
			}
			if !opts.Web && (cmd.Flags().Changed("web-listen") || cmd.Flags().Changed("web-hold")) {
				return cmdutil.UsageErrorf("--web-listen and --web-hold go with --web: add --web to open the dashboard")
			}
			if err := checkWebListen(opts.WebListen); err != nil {
				return cmdutil.UsageErrorf("%v", err)
			}
			if opts.WebHold < 0 || opts.WebHold > maxWebHold {
				return cmdutil.UsageErrorf("--web-hold %v is out of range: use 0 to %v, such as 5m", opts.WebHold, maxWebHold)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	cmdutil.DurationVar(fs, &opts.Sleep, "sleep", 5*time.Millisecond, "5ms", "time each handler spends on a message")
	cmdutil.CountVar(fs, &opts.Keys, "keys", 20, 1, "20", "number of customer keys in the traffic")
	fs.Var(traffic.RateValue{P: &opts.Rate}, "rate", "messages per second, with a unit: 50/s")
	fs.IntVarP(&opts.Port, "port", "p", 0, "port of the embedded server (0 picks a free one)")
	cmdutil.DurationVar(fs, &opts.Phase, "phase", 6*time.Second, "6s", "traffic time between the steps (at most 10s)")
	cmdutil.CountVar(fs, &opts.Concurrency, "concurrency", 4, 1, "4", "handler calls at once in m2's instance (static walkthrough); per-key order is kept")
	cmdutil.CountVar(fs, &opts.Batch, "batch", defaultBatchSize, 1, "10", "batch size of the batches walkthrough's instances, and, given with poison, of its members (at most 100)")
	fs.BoolVar(&opts.Web, "web", false, "serve the group's live dashboard on loopback while the walkthrough runs (prints its URL)")
	fs.StringVar(&opts.WebListen, "web-listen", defaultWebListen, "address of the --web dashboard, a loopback host:port (port 0 picks a free one)")
	fs.DurationVar(&opts.WebHold, "web-hold", 0, "with --web, keep the dashboard and the group running this long after the verdict, such as 5m")
	cmdutil.DurationVar(fs, &opts.AckWait, "ack-wait", cg.DefaultAckWait, "2s", "members' ack wait, and their pinned TTL; the static kill's failover time follows it (1s to 5s)")
	return cmd
}

// Failover is one measured handoff of m1's work (static walkthrough).
type Failover struct {
	Measured bool    `json:"measured"`
	From     string  `json:"from,omitempty"`
	To       string  `json:"to,omitempty"`
	GapMS    float64 `json:"gap_ms"`
}

// Rebalance is one membership change of the elastic walkthrough, timed
// from the moment the configuration update returned.
type Rebalance struct {
	// Change is the change as `cg elastic` types it: "add m1 m2".
	Change string `json:"change"`
	// Moves are the partitions that changed owner ("" for none).
	Moves []partition.Move `json:"moves"`
	// Measured: every latency below that could be seen was seen.
	Measured bool `json:"measured"`
	// LatencyMS is the change's total: the slowest of Members (an add) or
	// of Partitions (a drop).
	LatencyMS float64 `json:"latency_ms"`
	// Members, for an add: until each added member handled its first message.
	Members []MemberLatency `json:"members,omitempty"`
	// Partitions, for a drop: until each orphaned partition was served
	// by its new owner.
	Partitions []PartitionLatency `json:"partitions,omitempty"`
	// Dynamic: the member changed the membership itself (JoinOptions.
	// Dynamic), adding itself on its start or dropping itself on its clean
	// stop; the latencies are timed from the start, or from when the stop
	// began, instead of from a configuration update.
	Dynamic bool `json:"dynamic,omitempty"`
	// ChangeMS, for a dynamic change: how long after the start (or the
	// stop) the member's own compare-and-set had changed the membership.
	ChangeMS float64 `json:"change_ms,omitempty"`
}

// MemberLatency is how long an added member took to handle its first message.
type MemberLatency struct {
	Member   string `json:"member"`
	Measured bool   `json:"measured"`
	// Idle: no key of the traffic hashes to the member's partitions, so
	// there was nothing to wait for.
	Idle      bool    `json:"idle,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// PartitionLatency is how long an orphaned partition went unserved.
type PartitionLatency struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Measured  bool   `json:"measured"`
	// Idle: no key of the traffic hashes to the partition.
	Idle      bool    `json:"idle,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// Verdict is the demo's result, counted from what the handlers saw.
type Verdict struct {
	OK          bool   `json:"ok"`
	Reason      string `json:"reason,omitempty"`
	Walkthrough string `json:"walkthrough"`
	Server      string `json:"server"`
	Keys        int    `json:"keys"`
	// M2Concurrency is the static walkthrough's m2 instance's concurrency.
	M2Concurrency   int               `json:"m2_concurrency,omitempty"`
	Published       uint64            `json:"published"`
	Processed       uint64            `json:"processed"`
	Handled         uint64            `json:"handled"`
	Duplicates      uint64            `json:"duplicates"`
	OrderViolations uint64            `json:"order_violations"`
	Gaps            uint64            `json:"gaps"`
	Lost            uint64            `json:"lost"`
	ByInstance      map[string]uint64 `json:"by_instance"`
	// StepDown and Kill are the static walkthrough's failovers.
	StepDown *Failover `json:"step_down,omitempty"`
	Kill     *Failover `json:"kill,omitempty"`
	// Rebalances are the elastic walkthrough's membership changes.
	Rebalances     []Rebalance `json:"rebalances,omitempty"`
	ElapsedSeconds float64     `json:"elapsed_seconds"`

	// Batches is the batches walkthrough's count.
	Batches *BatchVerdict `json:"batches,omitempty"`
	// Workers is the workers walkthrough's count.
	Workers *WorkersVerdict `json:"workers,omitempty"`
}

// walkthrough is what differs between the stories: the streams, the
// group and the instances, the traffic, the steps taken while it flows,
// what the drain waits for, the walkthrough's own count and its verdict.
// run drives every walkthrough through these alone; *demo, which each
// walkthrough embeds, gives the defaults the seed article's stories share.
type walkthrough interface {
	// setup makes the streams and the group and starts the instances.
	setup(ctx context.Context) error
	// traffic is what is published while the steps run, and its narration.
	traffic(ctx context.Context) trafficPlan
	// steps run while the traffic flows.
	steps(ctx context.Context, v *Verdict) error
	// drain is what the drain waits for besides every message handled.
	drain(ctx context.Context) drainWait
	// judge counts what the walkthrough counts itself into v, once all
	// is drained, and gives its reasons to fail.
	judge(ctx context.Context, v *Verdict) []string
	// report prints the verdict, as JSON with --json.
	report(v Verdict) error
}

// walkthroughs are cg demo's stories by name: start makes one over the
// run's shared state; rate is its traffic when --rate is not given (0:
// the flag's default); batchIfGiven: it runs batches only when --batch is
// given (else Options.Batch is 0).
var walkthroughs = map[string]struct {
	start        func(*demo) walkthrough
	rate         float64
	batchIfGiven bool
}{
	Static:  {start: func(d *demo) walkthrough { return &staticWalk{demo: d} }},
	Elastic: {start: func(d *demo) walkthrough { return &elasticWalk{demo: d} }},
	Batches: {start: func(d *demo) walkthrough { return &batchWalk{demo: d} }, rate: batchRate},
	Poison:  {start: func(d *demo) walkthrough { return &poisonWalk{demo: d, poisonKey: d.keys[len(d.keys)/2]} }, batchIfGiven: true},
	Workers: {start: func(d *demo) walkthrough { return &workersWalk{demo: d} }},
}

// trafficPlan is a walkthrough's traffic: the publisher's subject and
// duration (run fills in the keys and the rate), whether the steps end it
// (timed: it runs its duration out), and the step that announces it.
type trafficPlan struct {
	opts  traffic.Options
	timed bool
	head  string
	why   []string
}

// traffic is the seed article's: orders.<key> until the drain's time,
// ended by the steps.
func (d *demo) traffic(ctx context.Context) trafficPlan {
	return trafficPlan{
		opts: traffic.Options{Subject: pattern, Duration: max(time.Until(deadlineOf(ctx))-drainLimit, time.Second)},
		head: fmt.Sprintf("Publishing to %s over %d keys at %s", pattern, d.o.Keys, traffic.FormatRate(d.o.Rate)),
		why: []string{"Each message carries Cg-Key and Cg-Key-Seq (its number within its key), so the handlers'",
			"view can be counted: duplicates, per-key order violations, and messages never handled."},
	}
}

// drainWait is what a drain waits for besides every message handled:
// its words in the narration, the condition, and how it stands once the
// condition held or the drain gave up (said after the count of handled
// messages). The zero value waits for nothing more.
type drainWait struct {
	words string
	done  func() bool
	state func(held bool) string
}

// drain waits for every message handled and nothing more.
func (d *demo) drain(context.Context) drainWait { return drainWait{} }

// judge adds nothing of its own.
func (d *demo) judge(context.Context, *Verdict) []string { return nil }

// demo is one run's state, shared by both walkthroughs.
type demo struct {
	o     *Options
	out   io.Writer
	cs    *render.ColorScheme
	start time.Time

	mu    sync.Mutex // serialises stderr lines
	quiet bool       // no member events once teardown begins

	url       string
	admin     *cg.Client
	keys      []string
	instances []*instance
	verifier  *traffic.Verifier
	clock     *clock
	served    *served

	// web is the --web dashboard; outer is the demo's context without its
	// time limit, for --web-hold; reported: the verdict is printed.
	web      *web
	outer    context.Context
	reported bool

	// stops are run at teardown, after the instances stop (what a
	// walkthrough runs besides them).
	stops []func()
}

func (d *demo) logf(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "[%5.1fs] %s\n", time.Since(d.start).Seconds(), fmt.Sprintf(format, args...))
}

// step narrates a step: a headline and a few lines of why.
func (d *demo) step(head string, why ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, "\n[%5.1fs] %s\n", time.Since(d.start).Seconds(), d.cs.Bold("==> "+head))
	for _, w := range why {
		fmt.Fprintf(d.out, "         %s\n", w)
	}
}

// block prints a titled block of preformatted lines, such as a table.
func (d *demo) block(title, text string, why ...string) {
	d.step(title, why...)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line == "" {
			fmt.Fprintln(d.out)
			continue
		}
		fmt.Fprintf(d.out, "         %s\n", line)
	}
}

func (d *demo) inst(name string) string {
	member, _, _ := strings.Cut(name, "/")
	return d.cs.MemberColor(member)(name)
}

func (d *demo) onEvent(inst *instance) func(cg.Event) {
	return func(e cg.Event) {
		if e.Kind == cg.EventWaiting {
			inst.waited.Store(true)
		}
		d.mu.Lock()
		quiet := d.quiet
		d.mu.Unlock()
		if quiet || inst.killed.Load() {
			return
		}
		var what string
		switch e.Kind {
		case cg.EventJoined:
			if len(e.Partitions) == 0 {
				what = fmt.Sprintf("joined: consumer %s, no partitions yet", e.Consumer)
			} else {
				what = fmt.Sprintf("joined: consumer %s, partitions %s", e.Consumer, render.Ranges(e.Partitions))
			}
		case cg.EventRebalanced:
			what = d.cs.Green(fmt.Sprintf("rebalanced: consumer %s now pulls partitions %s", e.Consumer, render.Ranges(e.Partitions)))
		case cg.EventWaiting:
			what = "waiting: " + e.Reason
		case cg.EventPinned:
			what = d.cs.Green(fmt.Sprintf("pinned (pin %s)", short(e.PinID)))
		case cg.EventPinLost:
			what = d.cs.Yellow(fmt.Sprintf("pin lost (pin %s): %s", short(e.PinID), e.Reason))
		case cg.EventWarning:
			what = d.cs.Yellow("warning: " + e.Reason)
		case cg.EventStopped:
			what = "stopped: " + e.Reason
		case cg.EventMemberAdded:
			what = d.cs.Green(e.Reason)
		case cg.EventMemberDropped:
			what = d.cs.Yellow(e.Reason)
		default:
			what = string(e.Kind)
		}
		d.logf("  event  %s %s", d.inst(inst.name), what)
	}
}

// short keeps the end of a pin id: pin ids are NUIDs, whose beginnings
// are shared by every id one server hands out.
func short(id string) string {
	if len(id) > 6 {
		return "…" + id[len(id)-6:]
	}
	return id
}

// sleepCtx waits for d or the end of ctx; it paces the story, it does not
// synchronise anything.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// poll checks cond every 20ms until it holds, limit passes or ctx ends.
func poll(ctx context.Context, limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return cond()
		case <-t.C:
		}
	}
}

// stepBudget is how long a step may wait for its effect: at most limit,
// and never into the time kept for draining.
func stepBudget(ctx context.Context, limit time.Duration) time.Duration {
	return max(min(limit, time.Until(deadlineOf(ctx))-drainLimit), time.Second)
}

// demoRun runs the demo and prints its verdict. The error is nil only when the
// verdict holds: nothing lost, no per-key order violation.
func demoRun(ctx context.Context, o *Options) error {
	limit := o.Limit
	if limit <= 0 {
		limit = overallLimit
	}
	outer := ctx
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	d := &demo{
		o: o, outer: outer, out: o.IO.ErrOut, cs: render.NewColorScheme(o.IO.ColorEnabled()), start: time.Now(),
		keys:     traffic.Keys("k", o.Keys),
		verifier: traffic.NewVerifier(traffic.VerifierOptions{}), clock: newClock(), served: newServed(),
	}
	w := walkthroughs[o.Walkthrough].start(d)
	v, err := d.run(ctx, w)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("demo did not finish within %v: %w", limit, err)
		case ctx.Err() != nil:
			return errors.New("demo interrupted before its verdict")
		}
		return err
	}
	if !d.reported {
		if err := w.report(v); err != nil {
			return err
		}
	}
	if !v.OK {
		return fmt.Errorf("verdict: %s", v.Reason)
	}
	return nil
}

// startServer starts the walkthrough's server, as `cg server` runs it,
// and the admin client on it (d.url, d.admin); stop closes both.
func (d *demo) startServer() (stop func(), err error) {
	srv, err := embedded.Start(embedded.Options{Host: "127.0.0.1", Port: d.o.Port})
	if err != nil {
		return nil, err
	}
	d.url = srv.ClientURL()
	d.step("Started a NATS server with JetStream at "+d.url,
		"In process, loopback only, with a temporary store that is removed at the end.")
	adminNC, err := nats.Connect(d.url, nats.Name("cg-demo-admin"))
	if err != nil {
		srv.Shutdown()
		return nil, fmt.Errorf("connect to the demo server: %w", err)
	}
	if d.admin, err = cg.NewFromConn(adminNC, ""); err != nil {
		adminNC.Close()
		srv.Shutdown()
		return nil, err
	}
	return func() { adminNC.Close(); srv.Shutdown() }, nil
}

// run is what every walkthrough goes through: a server, the walkthrough's
// setup, keyed traffic through its steps, then a drain and the count.
func (d *demo) run(ctx context.Context, w walkthrough) (Verdict, error) {
	v := Verdict{Walkthrough: d.o.Walkthrough}
	o := d.o

	stop, err := d.startServer()
	if err != nil {
		return v, err
	}
	defer stop()
	v.Server = d.url

	if o.Web {
		if err := d.startWeb(ctx); err != nil {
			return v, err
		}
		defer d.stopWeb()
	}

	defer d.teardown()
	if err := w.setup(ctx); err != nil {
		return v, err
	}

	// Traffic, stamped so that every handled message can be checked.
	tp := w.traffic(ctx)
	tp.opts.Keys, tp.opts.Rate = d.keys, o.Rate
	pub, err := traffic.NewPublisher(d.admin.JetStream(), tp.opts)
	if err != nil {
		return v, err
	}
	pubCtx, stopPub := context.WithCancel(ctx)
	defer stopPub()
	type pubDone struct {
		res traffic.Result
		err error
	}
	pubCh := make(chan pubDone, 1)
	go func() {
		r, err := pub.Run(pubCtx)
		pubCh <- pubDone{r, err}
	}()
	d.step(tp.head, tp.why...)

	if err := w.steps(ctx, &v); err != nil {
		return v, err
	}

	// Stop traffic, drain, count.
	if !tp.timed {
		stopPub()
	}
	pr := <-pubCh
	if pr.err != nil {
		return v, fmt.Errorf("publishing: %w", pr.err)
	}
	lost := func() uint64 { return d.verifier.Lost(pr.res.PerKey) }
	dw := w.drain(ctx)
	more, state := func() bool { return true }, func(bool) string { return "" }
	if dw.done != nil {
		more, state = dw.done, dw.state
	}
	d.step(fmt.Sprintf("Stopped traffic after %d messages; waiting for every one to be handled%s (at most %v)", pr.res.Published, dw.words, drainLimit))
	drainAt := time.Now()
	if poll(ctx, min(drainLimit, time.Until(deadlineOf(ctx))), func() bool { return lost() == 0 && more() }) {
		d.logf("all %d handled%s (%v after the last publish)", pr.res.Published, state(true), time.Since(drainAt).Round(time.Millisecond))
	} else {
		d.logf("%s", d.cs.Red(fmt.Sprintf("%d messages still unhandled%s after %v", lost(), state(false), time.Since(drainAt).Round(time.Millisecond))))
	}

	st := d.verifier.Stats()
	v.Keys = o.Keys
	v.Published = pr.res.Published
	v.Processed = st.Processed
	v.Handled = st.Handled
	v.Duplicates = st.Duplicates
	v.OrderViolations = st.Violations
	v.Gaps = st.Gaps
	v.Lost = lost()
	v.ByInstance = st.ByWho
	v.ElapsedSeconds = time.Since(d.start).Seconds()
	var why []string
	if v.OrderViolations > 0 {
		why = append(why, fmt.Sprintf("%d per-key order violations", v.OrderViolations))
	}
	if v.Lost > 0 {
		why = append(why, fmt.Sprintf("%d of %d published messages never handled", v.Lost, v.Published))
	}
	why = append(why, w.judge(ctx, &v)...)
	v.OK = len(why) == 0
	v.Reason = strings.Join(why, ", ")
	if d.web != nil && o.WebHold > 0 {
		// The verdict first, then the page stays up with the group.
		if err := w.report(v); err != nil {
			return v, err
		}
		d.hold(d.outer)
	}
	return v, nil
}

// connect opens a connection of its own for name, as a separate process
// would have, and a client on it.
func (d *demo) connect(name string) (*nats.Conn, *cg.Client, error) {
	nc, err := nats.Connect(d.url, nats.Name("cg-demo-"+name))
	if err != nil {
		return nil, nil, fmt.Errorf("connect %s: %w", name, err)
	}
	c, err := cg.NewFromConn(nc, "")
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return nc, c, nil
}

// startInstance runs an instance of member on its own connection; join
// joins it with the connection's client (ctx outlives the demo's limit, so
// that teardown stops the instance, not the deadline).
func (d *demo) startInstance(ctx context.Context, member, name string, join func(ctx context.Context, c *cg.Client, inst *instance) (*cg.Member, error)) error {
	nc, c, err := d.connect(name)
	if err != nil {
		return err
	}
	inst := &instance{name: name, member: member, nc: nc}
	d.instances = append(d.instances, inst)
	if inst.m, err = join(context.WithoutCancel(ctx), c, inst); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// joinOptions are an instance's join options as the walkthroughs share
// them: the demo's ack wait, and its events narrated.
func (d *demo) joinOptions(inst *instance) cg.JoinOptions {
	return cg.JoinOptions{AckWait: d.o.AckWait, OnEvent: d.onEvent(inst)}
}

// startMember runs an instance of member of the walkthrough's group of
// kind k with the demo's counting handler; concurrency above 1 has it
// handle that many messages at once.
func (d *demo) startMember(ctx context.Context, k cg.Kind, member, name string, concurrency int) error {
	return d.startInstance(ctx, member, name, func(ctx context.Context, c *cg.Client, inst *instance) (*cg.Member, error) {
		opts := d.joinOptions(inst)
		if concurrency > 1 {
			opts.Concurrency = concurrency
		}
		return c.Join(ctx, k, streamName, groupName, member, d.handler(inst), opts)
	})
}

// createStream makes ORDERS on subjs, stamped with the partition by the
// transform dest.
func (d *demo) createStream(ctx context.Context, subjs, dest string) error {
	if _, err := d.admin.JetStream().CreateStream(ctx, jetstream.StreamConfig{
		Name: streamName, Subjects: []string{subjs},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: subjs, Destination: dest},
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", streamName, err)
	}
	return nil
}

// createStatic makes the static group over members, balanced, as `cg
// static create balanced` does, and returns who owns what.
func (d *demo) createStatic(ctx context.Context, members ...string) (partition.Assignment, error) {
	res, err := d.admin.CreateStatic(ctx, streamName, groupName, cg.StaticConfig{
		MaxMembers: partitions, Filters: []string{">"}, Members: members,
	})
	if err != nil {
		return partition.Assignment{}, fmt.Errorf("create group: %w", err)
	}
	return res.Config.Assignment(), nil
}

// createPair makes the static group over m1 and m2 and says who owns what.
func (d *demo) createPair(ctx context.Context) error {
	a, err := d.createStatic(ctx, "m1", "m2")
	if err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created static group %s: %s owns %s, %s owns %s", groupName,
		d.cs.Member("m1"), render.Ranges(a.MemberPartitions("m1")), d.cs.Member("m2"), render.Ranges(a.MemberPartitions("m2"))),
		"(cg static create balanced ORDERS fulfillment 10 m1 m2 --filter '>')")
	return nil
}

// column is an extra column of a status table: its header and a member's cell.
type column struct {
	head string
	cell func(health.MemberStatus) string
}

// staticStatus prints the static group as `cg static info` shows it, with
// the instances' names, what each handled, and the extra columns.
func (d *demo) staticStatus(ctx context.Context, title string, extra ...column) {
	gi, err := d.admin.Info(ctx, cg.KindStatic, streamName, groupName)
	if err != nil {
		d.logf("%s: %v", title, err)
		return
	}
	by := d.verifier.Stats().ByWho
	var b strings.Builder
	heads := []string{"MEMBER", "PARTITIONS", "PINNED", "STANDBYS", "PENDING", "ACK PENDING", "HANDLED"}
	for _, c := range extra {
		heads = append(heads, c.head)
	}
	t := render.NewTable(&b, heads...)
	for _, ms := range gi.Members {
		row := []string{d.cs.Member(ms.Member), render.Ranges(ms.Partitions), d.pinnedCell(ms), fmt.Sprint(ms.Standbys),
			fmt.Sprint(ms.Pending), fmt.Sprint(ms.AckPending), d.handledCell(ms.Member, by)}
		for _, c := range extra {
			row = append(row, c.cell(ms))
		}
		t.AddRow(row...)
	}
	_ = t.Render()
	d.block(title, b.String())
}

// teardown stops every instance (a killed one too, to release its
// goroutines), each bounded by the member's own stop timeouts.
func (d *demo) teardown() {
	d.mu.Lock()
	d.quiet = true
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, in := range d.instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if in.m != nil {
				in.m.Stop()
			}
			in.nc.Close()
		}()
	}
	wg.Wait()
	for i := len(d.stops) - 1; i >= 0; i-- {
		d.stops[i]()
	}
}

// pinnedCell names the instance holding a member's pin, as status shows it.
func (d *demo) pinnedCell(ms health.MemberStatus) string {
	if !ms.Pinned {
		return "-"
	}
	for _, in := range d.instances {
		if in.member == ms.Member && in.m != nil && in.m.PinID() == ms.PinID {
			if in.killed.Load() {
				return d.inst(in.name) + " (dead)"
			}
			return d.inst(in.name)
		}
	}
	return "pin " + short(ms.PinID)
}

// handledCell says how many messages each instance of member handled.
func (d *demo) handledCell(member string, by map[string]uint64) string {
	var handled []string
	for _, in := range d.instances {
		if in.member == member {
			handled = append(handled, fmt.Sprintf("%s=%d", d.inst(in.name), by[in.name]))
		}
	}
	return strings.Join(handled, " ")
}

// report prints the verdict, as JSON with --json.
func (d *demo) report(v Verdict) error {
	d.reported = true
	if d.o.JSON {
		return render.JSON(d.o.IO.Out, v)
	}
	return d.printVerdict(v)
}

// verdictHead prints the verdict's headline, PASS or FAIL with the
// reason, and returns the key-value block its counts go in.
func (d *demo) verdictHead(ok bool, reason string) *render.KeyValues {
	w := d.o.IO.Out
	head := d.cs.Green("VERDICT: PASS")
	if !ok {
		head = d.cs.Red("VERDICT: FAIL: " + reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, d.cs.Bold(head))
	return render.NewKeyValues(w)
}

func (d *demo) printVerdict(v Verdict) error {
	kv := d.verdictHead(v.OK, v.Reason)
	kv.Addf("  published", "%d (over %d keys)", v.Published, v.Keys)
	kv.Addf("  processed", "%d distinct key/seq", v.Processed)
	kv.Addf("  duplicates", "%d (redelivered around a handoff; handlers must be idempotent)", v.Duplicates)
	if v.M2Concurrency > 1 {
		kv.Addf("  order violations", "%d (m2 handled %d at once)", v.OrderViolations, v.M2Concurrency)
	} else {
		kv.Addf("  order violations", "%d", v.OrderViolations)
	}
	kv.Addf("  lost", "%d", v.Lost)
	if v.StepDown != nil {
		kv.Add("  step-down gap", failoverText(d, *v.StepDown))
	}
	if v.Kill != nil {
		kv.Add("  kill gap", failoverText(d, *v.Kill))
	}
	if len(v.Rebalances) > 0 {
		timed := "timed from the configuration update's return"
		if slices.ContainsFunc(v.Rebalances, func(r Rebalance) bool { return r.Dynamic }) {
			timed += "; a dynamic member's from its start or its stop"
		}
		kv.Add("  rebalances", timed)
	}
	for _, r := range v.Rebalances {
		kv.Add("    "+r.Change, rebalanceText(d, r))
	}
	if v.Batches != nil {
		batchVerdictLines(d, kv, v.Batches)
	}
	if wv := v.Workers; wv != nil {
		kv.Addf("  worker runs", "%d (%d redeliveries), one process each", wv.Runs, wv.Redelivered)
		kv.Addf("  CG_KEY", "%d runs told another key than the message's", wv.KeyMismatches)
	}
	names := make([]string, 0, len(v.ByInstance))
	for n := range v.ByInstance {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", d.inst(n), v.ByInstance[n]))
	}
	kv.Add("  handled by", strings.Join(parts, " "))
	kv.Addf("  elapsed", "%.1fs", v.ElapsedSeconds)
	return kv.Render()
}

func failoverText(d *demo, f Failover) string {
	if !f.Measured {
		return "not measured"
	}
	return fmt.Sprintf("%s -> %s in %v", d.inst(f.From), d.inst(f.To), dur(f.GapMS))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// dur turns milliseconds back into a duration for display.
func dur(ms float64) time.Duration {
	return time.Duration(ms * float64(time.Millisecond)).Round(time.Millisecond)
}

func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(overallLimit)
}
