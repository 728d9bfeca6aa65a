// Package demo is `cg demo`: the seed article's static walkthrough in one
// process with nothing installed. It starts an embedded server, partitions
// a stream, creates a static group, runs member instances with a hot
// standby, steps the pinned one down and then kills it, and checks by
// counting that no message was lost and per-key order held throughout.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/cmd/internal/exitcode"
	"github.com/cg-dev/cg/cmd/internal/factory"
	"github.com/cg-dev/cg/cmd/internal/flagx"
	"github.com/cg-dev/cg/cmd/internal/iostreams"
	"github.com/cg-dev/cg/cmd/internal/render"
	"github.com/cg-dev/cg/cmd/internal/traffic"
	"github.com/cg-dev/cg/cmd/server"
	"github.com/cg-dev/cg/pkg/cg"
)

// The walkthrough's names, as the seed article types them.
const (
	streamName = "ORDERS"
	groupName  = "fulfillment"
	partitions = 10
	subjects   = "orders.*"
	transform  = "{{partition(10,1)}}.orders.{{wildcard(1)}}"
	pattern    = "orders.{key}"
)

// Bounds that keep the demo well inside a minute.
const (
	maxPhase     = 10 * time.Second
	maxAckWait   = 5 * time.Second
	overallLimit = 55 * time.Second
	drainLimit   = 15 * time.Second
)

// Options are the flags of demo.
type Options struct {
	IO      *iostreams.IOStreams
	JSON    bool
	Sleep   time.Duration
	Keys    int
	Rate    float64
	Port    int
	Phase   time.Duration
	AckWait time.Duration
	// Limit bounds the whole run.
	Limit time.Duration
}

// NewCmd returns `cg demo`.
func NewCmd(f *factory.Factory) *cobra.Command { return newCmdDemo(f, nil) }

func newCmdDemo(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Rate: 50, Limit: overallLimit}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the static-group walkthrough in one process and check it by counting",
		Long: `Run the seed article's static walkthrough in this one process, with nothing installed.

It starts a NATS server with JetStream on loopback (random port, temporary
store removed at the end), creates the stream ORDERS partitioned into 10 by
customer key, creates the static group fulfillment balanced over members m1 and
m2, and runs three instances, each on its own connection: m1 twice (one pinned,
one hot standby) and m2 once. While keyed traffic flows it steps m1 down, then
kills m1's pinned instance without a goodbye so the server fails over after the
pinned TTL.

Narration, member events and status go to stderr; the verdict goes to stdout
(--json for JSON). It counts what the handlers saw: published, processed,
duplicates, per-key order violations and lost messages, and the failover gaps.
It exits 0 when no message was lost and per-key order held, 1 otherwise, and
always within a minute.`,
		Example: `  cg demo
  cg demo --keys 50 --rate 100/s --sleep 10ms
  cg demo --json > verdict.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.JSON = f.JSON
			if opts.Phase > maxPhase {
				return exitcode.UsageErrorf("--phase %v is too long: the demo must end within a minute; use at most %v, such as 5s", opts.Phase, maxPhase)
			}
			if opts.AckWait < time.Second || opts.AckWait > maxAckWait {
				return exitcode.UsageErrorf("--ack-wait %v is out of range: use 1s to %v, such as 2s", opts.AckWait, maxAckWait)
			}
			if opts.Sleep > 500*time.Millisecond {
				return exitcode.UsageErrorf("--sleep %v is too long for the demo's traffic: use at most 500ms, such as 5ms", opts.Sleep)
			}
			if opts.Rate == 0 || opts.Rate > 2000 {
				return exitcode.UsageErrorf("--rate %s is out of range for the demo: use more than 0 and at most 2000/s, such as 50/s", traffic.FormatRate(opts.Rate))
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return demoRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	flagx.DurationVar(fs, &opts.Sleep, "sleep", 5*time.Millisecond, "5ms", "time each handler spends on a message")
	flagx.CountVar(fs, &opts.Keys, "keys", 20, 1, "20", "number of customer keys in the traffic")
	fs.Var(traffic.RateValue{P: &opts.Rate}, "rate", "messages per second, with a unit: 50/s")
	fs.IntVarP(&opts.Port, "port", "p", 0, "port of the embedded server (0 picks a free one)")
	flagx.DurationVar(fs, &opts.Phase, "phase", 6*time.Second, "6s", "traffic time between the steps (at most 10s)")
	flagx.DurationVar(fs, &opts.AckWait, "ack-wait", cg.DefaultAckWait, "2s", "members' ack wait; the pinned TTL, and so the kill's failover time, follows it (1s to 5s)")
	return cmd
}

// Failover is one measured handoff of m1's work.
type Failover struct {
	Measured bool    `json:"measured"`
	From     string  `json:"from,omitempty"`
	To       string  `json:"to,omitempty"`
	GapMS    float64 `json:"gap_ms"`
}

// Verdict is the demo's result, counted from what the handlers saw.
type Verdict struct {
	OK              bool              `json:"ok"`
	Reason          string            `json:"reason,omitempty"`
	Server          string            `json:"server"`
	Keys            int               `json:"keys"`
	Published       uint64            `json:"published"`
	Processed       uint64            `json:"processed"`
	Handled         uint64            `json:"handled"`
	Duplicates      uint64            `json:"duplicates"`
	OrderViolations uint64            `json:"order_violations"`
	Gaps            uint64            `json:"gaps"`
	Lost            uint64            `json:"lost"`
	ByInstance      map[string]uint64 `json:"by_instance"`
	StepDown        Failover          `json:"step_down"`
	Kill            Failover          `json:"kill"`
	ElapsedSeconds  float64           `json:"elapsed_seconds"`
}

// demo is one run's state.
type demo struct {
	o     *Options
	out   io.Writer
	cs    *render.ColorScheme
	start time.Time

	mu    sync.Mutex // serialises stderr lines
	quiet bool       // no member events once teardown begins

	admin     *cg.Client
	instances []*instance
	verifier  *traffic.Verifier
	clock     *clock
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

func (d *demo) inst(name string) string {
	member, _, _ := strings.Cut(name, "/")
	return d.cs.MemberColor(member)(name)
}

func (d *demo) onEvent(inst *instance) func(cg.Event) {
	return func(e cg.Event) {
		d.mu.Lock()
		quiet := d.quiet
		d.mu.Unlock()
		if quiet || inst.killed.Load() {
			return
		}
		var what string
		switch e.Kind {
		case cg.EventJoined:
			what = fmt.Sprintf("joined: consumer %s, partitions %s", e.Consumer, group.Ranges(e.Partitions))
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

// demoRun runs the demo and prints its verdict. The error is nil only when the
// verdict holds: nothing lost, no per-key order violation.
func demoRun(ctx context.Context, o *Options) error {
	limit := o.Limit
	if limit <= 0 {
		limit = overallLimit
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	d := &demo{
		o: o, out: o.IO.ErrOut, cs: render.NewColorScheme(o.IO.ColorEnabled()), start: time.Now(),
		verifier: traffic.NewVerifier(traffic.VerifierOptions{}), clock: newClock(),
	}
	v, err := d.run(ctx)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fmt.Errorf("demo did not finish within %v: %w", limit, err)
		case ctx.Err() != nil:
			return errors.New("demo interrupted before its verdict")
		}
		return err
	}
	if o.JSON {
		if err := render.JSON(o.IO.Out, v); err != nil {
			return err
		}
	} else if err := d.printVerdict(v); err != nil {
		return err
	}
	if !v.OK {
		return fmt.Errorf("verdict: %s", v.Reason)
	}
	return nil
}

func (d *demo) run(ctx context.Context) (Verdict, error) {
	var v Verdict
	o := d.o

	// 1. A server, as `cg server` runs it.
	srv, err := server.StartEmbedded(server.Options{Host: "127.0.0.1", Port: o.Port})
	if err != nil {
		return v, err
	}
	defer srv.Shutdown()
	url := srv.ClientURL()
	v.Server = url
	d.step("Started a NATS server with JetStream at "+url,
		"In process, loopback only, with a temporary store that is removed at the end.")

	adminNC, err := nats.Connect(url, nats.Name("cg-demo-admin"))
	if err != nil {
		return v, fmt.Errorf("connect to the demo server: %w", err)
	}
	defer adminNC.Close()
	d.admin, err = cg.NewFromConn(adminNC, "")
	if err != nil {
		return v, err
	}
	js := d.admin.JetStream()

	// 2. The partitioned stream.
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:             streamName,
		Subjects:         []string{subjects},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: subjects, Destination: transform},
	})
	if err != nil {
		return v, fmt.Errorf("create stream %s: %w", streamName, err)
	}
	keys := traffic.Keys("k", o.Keys)
	d.step(fmt.Sprintf("Created stream %s on %s, stamped by the transform %s", streamName, subjects, transform),
		"Every subject gets its partition prepended, an FNV-1a hash of the customer token mod 10,",
		fmt.Sprintf("so all of one customer's orders land in one partition: orders.%s -> %d.orders.%s.", keys[0], cg.PartitionOfKey(keys[0], partitions), keys[0]),
		"(nats stream add ORDERS --subjects 'orders.*' --transform-source 'orders.*' --transform-destination '"+transform+"')")

	// 3. The static group, through the engine as `cg static create` does.
	res, err := d.admin.CreateStatic(ctx, streamName, groupName, cg.StaticConfig{
		MaxMembers: partitions, Filters: []string{">"}, Members: []string{"m1", "m2"},
	})
	if err != nil {
		return v, fmt.Errorf("create group: %w", err)
	}
	a := res.Config.Assignment()
	d.step(fmt.Sprintf("Created static group %s over %d partitions, balanced: %s owns %s, %s owns %s",
		groupName, partitions, d.cs.Member("m1"), group.Ranges(a.MemberPartitions("m1")), d.cs.Member("m2"), group.Ranges(a.MemberPartitions("m2"))),
		"Each member gets one durable consumer, fulfillment-<member>, filtered to its partitions and",
		"pinned: whatever the number of instances of a member, the server feeds one of them.",
		"(cg static create balanced ORDERS fulfillment 10 m1 m2 --filter '>')")

	// 4. Three instances, each on its own connection as separate processes.
	d.step("Starting three instances, each on its own NATS connection",
		"m1/a and m1/b are two instances of member m1: one is pinned, the other waits as a hot standby.",
		fmt.Sprintf("m2/a runs member m2. Each handler works %v on a message, then double-acks it.", o.Sleep),
		"(cg static consume ORDERS fulfillment m1 --sleep "+o.Sleep.String()+", twice, and once for m2)")
	defer d.teardown()
	for _, spec := range [][2]string{{"m1", "m1/a"}, {"m1", "m1/b"}, {"m2", "m2/a"}} {
		if err := d.startInstance(ctx, url, spec[0], spec[1]); err != nil {
			return v, err
		}
	}

	// 5. Traffic, stamped so that every handled message can be checked.
	pub, err := traffic.NewPublisher(js, traffic.Options{
		Subject: pattern, Keys: keys, Rate: o.Rate,
		Duration: max(time.Until(deadlineOf(ctx))-drainLimit, time.Second),
	})
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
	d.step(fmt.Sprintf("Publishing to %s over %d keys at %s", pattern, o.Keys, traffic.FormatRate(o.Rate)),
		"Each message carries Cg-Key and Cg-Key-Seq (its number within its key), so the handlers'",
		"view can be counted: duplicates, per-key order violations, and messages never handled.")
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return v, err
	}
	if !poll(ctx, 10*time.Second, func() bool { _, ok := d.clock.holder("m1"); return ok }) {
		return v, errors.New("m1 handled no message within 10s of traffic")
	}
	d.status(ctx, "Status after warming up")

	// 6. Step-down while traffic flows.
	d.step("Stepping m1 down: unpinning its active instance while traffic flows",
		"The server clears the pin of consumer fulfillment-m1 and pins whichever instance pulls next;",
		"the message in hand is finished and acked first (max_ack_pending 1), so order holds.",
		"(cg static step-down ORDERS fulfillment m1)")
	stepAt := time.Now()
	sd, err := d.admin.StaticStepDown(ctx, streamName, groupName, "m1")
	if err != nil {
		d.logf("step-down failed: %v", err)
	} else {
		d.logf("unpinned pin %s of %s", short(sd.PrevPinID), sd.Consumer)
		var h handoff
		if poll(ctx, 10*time.Second, func() (ok bool) { h, ok = d.clock.handoffAfter("m1", stepAt); return ok }) {
			v.StepDown = Failover{Measured: true, From: h.From, To: h.To, GapMS: ms(h.Gap)}
			d.logf("m1's work moved %s -> %s: %v between the last message under the old pin and the first under the new",
				d.inst(h.From), d.inst(h.To), h.Gap.Round(time.Millisecond))
			if h.From == h.To {
				d.logf("(the server re-pinned the same instance: it was the first to pull again)")
			}
		} else {
			d.logf("no handoff seen within 10s of the step-down")
		}
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return v, err
	}
	d.status(ctx, "Status after the step-down")

	// 7. Kill the pinned instance: no stop, no unpin.
	victim := d.pinned(ctx, "m1")
	if victim == nil {
		return v, errors.New("m1 has no pinned instance to kill")
	}
	ttl := max(o.AckWait, time.Second)
	d.step(fmt.Sprintf("Killing %s, m1's pinned instance: closing its connection without a goodbye", d.inst(victim.name)),
		"No stop and no unpin, as when a process crashes: the server keeps the pin until the pinned TTL",
		fmt.Sprintf("(%v) passes without a pull, then pins the standby; a message the victim held unacked", ttl),
		fmt.Sprintf("is redelivered after the ack wait (%v) and may be handled twice.", o.AckWait))
	killAt := time.Now()
	victim.killed.Store(true)
	victim.nc.Close()
	var h handoff
	if poll(ctx, 3*ttl+10*time.Second, func() (ok bool) { h, ok = d.clock.handoffAfter("m1", killAt); return ok }) {
		v.Kill = Failover{Measured: true, From: h.From, To: h.To, GapMS: ms(h.Gap)}
		d.logf("m1's work moved %s -> %s: %v between the victim's last message and the standby's first",
			d.inst(h.From), d.inst(h.To), h.Gap.Round(time.Millisecond))
	} else {
		d.logf("no standby took over m1 within %v of the kill", 3*ttl+10*time.Second)
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return v, err
	}
	d.status(ctx, "Status after the failover")

	// 8. Stop traffic, drain, count.
	stopPub()
	pr := <-pubCh
	if pr.err != nil {
		return v, fmt.Errorf("publishing: %w", pr.err)
	}
	lost := func() uint64 { return d.verifier.Lost(pr.res.PerKey) }
	d.step(fmt.Sprintf("Stopped traffic after %d messages; waiting for every one to be handled (at most %v)", pr.res.Published, drainLimit))
	drainAt := time.Now()
	if poll(ctx, min(drainLimit, time.Until(deadlineOf(ctx))), func() bool { return lost() == 0 }) {
		d.logf("all %d handled (%v after the last publish)", pr.res.Published, time.Since(drainAt).Round(time.Millisecond))
	} else {
		d.logf("%s", d.cs.Red(fmt.Sprintf("%d messages still unhandled after %v", lost(), time.Since(drainAt).Round(time.Millisecond))))
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
	v.OK = len(why) == 0
	v.Reason = strings.Join(why, ", ")
	return v, nil
}

func (d *demo) startInstance(ctx context.Context, url, member, name string) error {
	nc, err := nats.Connect(url, nats.Name("cg-demo-"+name))
	if err != nil {
		return fmt.Errorf("connect %s: %w", name, err)
	}
	c, err := cg.NewFromConn(nc, "")
	if err != nil {
		nc.Close()
		return err
	}
	inst := &instance{name: name, member: member, nc: nc}
	d.instances = append(d.instances, inst)
	inst.m, err = c.JoinStatic(context.WithoutCancel(ctx), streamName, groupName, member,
		handler(inst, d.o.Sleep, d.verifier, d.clock),
		cg.JoinOptions{AckWait: d.o.AckWait, OnEvent: d.onEvent(inst)})
	if err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	return nil
}

// pinned finds the instance of member holding the server's pin, or else
// the one that handled its latest message.
func (d *demo) pinned(ctx context.Context, member string) *instance {
	if ms, err := d.admin.StaticMemberInfo(ctx, streamName, groupName, member); err == nil && ms.PinID != "" {
		for _, in := range d.instances {
			if in.member == member && in.m != nil && in.m.PinID() == ms.PinID {
				return in
			}
		}
	}
	if name, ok := d.clock.holder(member); ok {
		for _, in := range d.instances {
			if in.name == name {
				return in
			}
		}
	}
	return nil
}

// teardown stops every instance (the killed one too, to release its
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
}

// status prints the group as `cg static info` shows it, with the
// instances' names and what each handled.
func (d *demo) status(ctx context.Context, title string) {
	gi, err := d.admin.StaticInfo(ctx, streamName, groupName)
	if err != nil {
		d.logf("%s: %v", title, err)
		return
	}
	by := d.verifier.Stats().ByWho
	var b strings.Builder
	t := render.NewTable(&b, "MEMBER", "PARTITIONS", "PINNED", "STANDBYS", "PENDING", "ACK PENDING", "HANDLED")
	for _, ms := range gi.Members {
		pinned := "-"
		if ms.Pinned {
			pinned = "pin " + short(ms.PinID)
			for _, in := range d.instances {
				if in.member == ms.Member && in.m != nil && in.m.PinID() == ms.PinID {
					pinned = d.inst(in.name)
					if in.killed.Load() {
						pinned += " (dead)"
					}
				}
			}
		}
		var handled []string
		for _, in := range d.instances {
			if in.member == ms.Member {
				handled = append(handled, fmt.Sprintf("%s=%d", d.inst(in.name), by[in.name]))
			}
		}
		t.AddRow(d.cs.Member(ms.Member), group.Ranges(ms.Partitions), pinned, fmt.Sprint(ms.Standbys),
			fmt.Sprint(ms.Pending), fmt.Sprint(ms.AckPending), strings.Join(handled, " "))
	}
	_ = t.Render()
	d.step(title)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, line := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		fmt.Fprintf(d.out, "         %s\n", line)
	}
}

func (d *demo) printVerdict(v Verdict) error {
	w := d.o.IO.Out
	head := d.cs.Green("VERDICT: PASS")
	if !v.OK {
		head = d.cs.Red("VERDICT: FAIL: " + v.Reason)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, d.cs.Bold(head))
	kv := render.NewKeyValues(w)
	kv.Addf("  published", "%d (over %d keys)", v.Published, v.Keys)
	kv.Addf("  processed", "%d distinct key/seq", v.Processed)
	kv.Addf("  duplicates", "%d (redelivered around a failover; handlers must be idempotent)", v.Duplicates)
	kv.Addf("  order violations", "%d", v.OrderViolations)
	kv.Addf("  lost", "%d", v.Lost)
	kv.Add("  step-down gap", failoverText(d, v.StepDown))
	kv.Add("  kill gap", failoverText(d, v.Kill))
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
	return fmt.Sprintf("%s -> %s in %v", d.inst(f.From), d.inst(f.To), time.Duration(f.GapMS*float64(time.Millisecond)).Round(time.Millisecond))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(overallLimit)
}
