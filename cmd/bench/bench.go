// Package bench is `cg bench`: a matrix of consume scenarios on an
// embedded server, measured (msgs/s, end-to-end latency, per-key order
// violations) and set beside a plain JetStream pull consumer in the same
// run. The reference library's comparison lives in internal/bench's go
// test benchmarks, so the cg binary never links it.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/bench"
	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/embedded"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// Bounds that keep a run finite.
const (
	maxMembers    = 64
	maxPartitions = 256
	maxHandler    = 100 * time.Millisecond
	maxMessages   = 1_000_000
	maxRunLimit   = 30 * time.Minute
)

// Options are the flags of bench.
type Options struct {
	IO            *iostreams.IOStreams
	JSON          bool
	Members       []int
	Partitions    []int
	Handlers      []time.Duration
	MaxAckPending []int
	Concurrency   []int
	Messages      int
	Keys          int
	Port          int
	Preload       bool
	Layouts       []string
	// CLI adds, for each cg run, the same run through the consume command.
	CLI bool
	// Elastic adds, for each static group run, the same backlog drained by
	// an elastic group from its filled work stream, beside a plain
	// consumer draining a work queue of the same backlog.
	Elastic bool
	// Paired runs each group run's plain baseline again right before it
	// and sets the group beside that run.
	Paired bool
	// Run runs a cg command line in process (the root's Run): the --cli
	// runs call it for consume.
	Run RunFunc
	// RunLimit bounds each scenario's run.
	RunLimit time.Duration
}

// RunFunc runs cg with args (without the program name) on a fresh command
// tree and returns the exit status.
type RunFunc func(ctx context.Context, args []string, ios *iostreams.IOStreams, env func(string) string) int

// NewCmd returns `cg bench`; run is the root's Run, for the --cli runs.
func NewCmd(f *factory.Factory, run RunFunc) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Run: run}
	var members, partitions, handlers, maps, concurrency, layouts string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure static groups against a plain pull consumer on an embedded server",
		Long: `Measure consume throughput on a NATS server with JetStream started in this
process (loopback, random port, temporary store removed at the end).

Every combination of --members, --partitions, --handler and
--max-ack-pending is one run: the stream BENCH is made afresh, partitioned
by key, a static group of that many members (m1, m2, ...; each instance on
its own connection) joins it, and --messages messages over --keys keys are
published as fast as the server takes them. A run ends when every message
was handled once; its rate counts from the first publish to the last
message handled. Latency is from publish to handled, so it includes the
time a message waits in the stream behind the ones published before it,
and a run cannot handle faster than the publisher (PUBLISH/S) goes.
--preload publishes every message before the consumers start and clocks
from the first message handled to the last: the consume rate alone, as
the go test benchmarks measure it (no latency then).

The same run measures a plain pull consumer (one filter over the whole
stream, and one filter per partition) for each partitions, handler and
max ack pending, and shows each group's rate as a ratio of the plain
single-filter one (VS PLAIN).

Each message carries its key's sequence number; a message handled out of
per-key order is a violation. It exits 1 when any run saw one or did not
finish within --run-limit, 2 on bad flags.

--cli adds, for each group run, the same backlog drained through the
consume command as a user runs it ('cg static consume BENCH bench m1
--sleep 0 --json --count N', one per member, in this process, output
discarded): its rate is the messages over the wall time of the commands,
joining and stopping included. It implies --preload.

--layout lists the group layouts to run (member, the reference's format,
is the default; partition: one consumer per partition).

--elastic adds, for each group run, the same backlog drained by an
elastic group (and with --cli through 'cg elastic consume'): its members
start once the group's work stream holds the whole backlog, and its VS
PLAIN is against a plain consumer draining a work-queue stream of the
same backlog (same partition-stamped subjects), shown with FILTERS "1(wq)".
It implies --preload.

--paired runs each group run's plain baseline again right before it and
sets the group beside that run (PLAIN/S, and plain_msgs_per_sec in
--json) rather than beside the plain run at the start of the matrix: on a
shared machine whose load moves the rates by 2x within a minute, the ratio
of two runs seconds apart is the one to read.

The comparison with the reference library (pcgroups) is the go test
benchmark in internal/bench: make bench-compare.`,
		Example: `  cg bench
  cg bench --members 1,8 --handler 0,1ms --messages 5000
  cg bench --max-ack-pending 1,1000 --json > bench.json
  cg bench --members 1 --partitions 1 --concurrency 1,8,32 --cli`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.JSON = f.JSON
			var err error
			if opts.Members, err = parseInts("members", members, 1, maxMembers); err != nil {
				return err
			}
			if opts.Partitions, err = parseInts("partitions", partitions, 1, maxPartitions); err != nil {
				return err
			}
			if opts.MaxAckPending, err = parseInts("max-ack-pending", maps, 1, cg.MaxAckPendingMax); err != nil {
				return err
			}
			if opts.Concurrency, err = parseInts("concurrency", concurrency, 1, cg.MaxConcurrency); err != nil {
				return err
			}
			if opts.Handlers, err = parseDurations("handler", handlers); err != nil {
				return err
			}
			if opts.Layouts, err = parseLayouts(layouts); err != nil {
				return err
			}
			if opts.CLI || opts.Elastic {
				opts.Preload = true
			}
			if opts.Keys > traffic.MaxKeys {
				return cmdutil.UsageErrorf("--keys %d is above cg's ceiling of %d (each key a run uses takes about 280 B): use at most %d, such as 1000", opts.Keys, traffic.MaxKeys, traffic.MaxKeys)
			}
			if opts.Messages > maxMessages {
				return cmdutil.UsageErrorf("--messages %d is too many: use at most %d, such as 20000", opts.Messages, maxMessages)
			}
			if opts.RunLimit < time.Second || opts.RunLimit > maxRunLimit {
				return cmdutil.UsageErrorf("--run-limit %v is out of range: use 1s to %v, such as 2m", opts.RunLimit, maxRunLimit)
			}
			if len(opts.matrix().Groups(bench.SystemCG)) == 0 {
				return cmdutil.UsageErrorf("no run has at most as many members as partitions: use --members at most %d", slicesMax(opts.Partitions))
			}
			return benchRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&members, "members", "1,2,8", "member counts, comma separated")
	fs.StringVar(&partitions, "partitions", "8", "partition counts, comma separated")
	fs.StringVar(&handlers, "handler", "0", "time each handler spends on a message, comma separated: 0,1ms")
	fs.StringVar(&maps, "max-ack-pending", "1", "max ack pending of the member and plain consumers, comma separated (a concurrent member below its concurrency gets 4 × the concurrency)")
	fs.StringVar(&concurrency, "concurrency", "1", "handler calls at once in each cg member (per-key order kept), comma separated: 1,32")
	cmdutil.CountVar(fs, &opts.Messages, "messages", 20000, 1, "20000", "messages published in each run")
	cmdutil.CountVar(fs, &opts.Keys, "keys", 1000, 1, "1000", "keys the messages are spread over")
	fs.IntVarP(&opts.Port, "port", "p", 0, "port of the embedded server (0 picks a free one)")
	fs.BoolVar(&opts.Preload, "preload", false, "publish every message before the consumers start (rate only, no latency)")
	fs.StringVar(&layouts, "layout", bench.LayoutMember, "group layouts, comma separated: member,partition")
	fs.BoolVar(&opts.CLI, "cli", false, "also drain each group run's backlog through 'cg static consume --sleep 0 --json' (in process, output discarded), timed over the whole command; implies --preload")
	fs.BoolVar(&opts.Paired, "paired", false, "run each group run's plain baseline again right before it and set the group beside that run")
	fs.BoolVar(&opts.Elastic, "elastic", false, "also drain each group run's backlog with an elastic group from its filled work stream (and, with --cli, through 'cg elastic consume'), beside a plain consumer on a work queue of the same backlog; implies --preload")
	cmdutil.DurationVar(fs, &opts.RunLimit, "run-limit", 2*time.Minute, "2m", "longest one run may take before it counts as failed")
	return cmd
}

func slicesMax(s []int) int {
	m := 0
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

func parseInts(flag, s string, lo, hi int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || v < lo || v > hi {
			return nil, cmdutil.UsageErrorf("--%s %q: each value must be a whole number from %d to %d, comma separated, such as %d,%d", flag, s, lo, hi, lo, min(hi, 8))
		}
		out = append(out, v)
	}
	return out, nil
}

func parseLayouts(s string) ([]string, error) {
	var out []string
	for _, part := range strings.Split(s, ",") {
		l := strings.TrimSpace(part)
		if l != bench.LayoutMember && l != bench.LayoutPartition {
			return nil, cmdutil.UsageErrorf("--layout %q: each value must be member or partition, comma separated, such as member,partition", s)
		}
		if err := bench.CheckLayout(l); err != nil {
			return nil, cmdutil.UsageErrorf("--layout: %v", err)
		}
		out = append(out, l)
	}
	return out, nil
}

func parseDurations(flag, s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, part := range strings.Split(s, ",") {
		v, err := cmdutil.ParseDuration(part, "1ms")
		if err != nil {
			return nil, cmdutil.UsageErrorf("--%s: %v", flag, err)
		}
		if v > maxHandler {
			return nil, cmdutil.UsageErrorf("--%s %v is too long for a benchmark: use at most %v, such as 1ms", flag, v, maxHandler)
		}
		out = append(out, v)
	}
	return out, nil
}

func (o *Options) matrix() bench.Matrix {
	return bench.Matrix{Members: o.Members, Partitions: o.Partitions, Handlers: o.Handlers, MaxAckPending: o.MaxAckPending, Concurrency: o.Concurrency, Messages: o.Messages, Keys: o.Keys, Preload: o.Preload, Layouts: o.Layouts,
		ElasticDrain: o.Elastic}
}

// Row is one run in --json output.
type Row struct {
	System         string  `json:"system"`
	Members        int     `json:"members"`
	Partitions     int     `json:"partitions"`
	Filters        int     `json:"filters,omitempty"`
	WorkQueue      bool    `json:"work_queue,omitempty"`
	Handler        string  `json:"handler"`
	MaxAckPending  int     `json:"max_ack_pending"`
	Concurrency    int     `json:"concurrency"`
	Messages       int     `json:"messages"`
	Keys           int     `json:"keys"`
	Layout         string  `json:"layout,omitempty"`
	Preload        bool    `json:"preload"`
	Handled        int     `json:"handled"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	MsgsPerSec     float64 `json:"msgs_per_sec"`
	PublishPerSec  float64 `json:"publish_per_sec"`
	// P50MS and P99MS are publish-to-handled latencies (0 with preload).
	P50MS      float64 `json:"p50_ms"`
	P99MS      float64 `json:"p99_ms"`
	Violations int     `json:"violations"`
	Duplicates int     `json:"duplicates"`
	// VsPlain is a group's rate over the plain single-filter consumer's
	// in the same setting (0 for the plain rows).
	VsPlain float64 `json:"vs_plain,omitempty"`
	// PlainMsgsPerSec is that plain consumer's rate: with --paired its run
	// right before this one.
	PlainMsgsPerSec float64 `json:"plain_msgs_per_sec,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// Report is the --json output.
type Report struct {
	OK      bool   `json:"ok"`
	Server  string `json:"server"`
	Results []Row  `json:"results"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func benchRun(ctx context.Context, o *Options) error {
	srv, err := embedded.Start(embedded.Options{Host: "127.0.0.1", Port: o.Port})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	env := bench.Env{URL: srv.ClientURL(), Limit: o.RunLimit}
	m := o.matrix()
	scenarios := append(m.Plain(), m.Groups(bench.SystemCG)...)
	if o.Elastic {
		scenarios = append(scenarios, m.Groups(bench.SystemElastic)...)
	}
	if o.CLI {
		scenarios = append(scenarios, m.Groups(bench.SystemCLI)...)
		if o.Elastic {
			scenarios = append(scenarios, m.Groups(bench.SystemCLIElastic)...)
		}
	}
	rep := Report{OK: true, Server: srv.ClientURL()}
	var results []bench.Result
	for i, sc := range scenarios {
		fmt.Fprintf(o.IO.ErrOut, "[%d/%d] %s\n", i+1, len(scenarios), sc.Name())
		var (
			r   bench.Result
			err error
		)
		base, hasBase := bench.Baseline(results, sc)
		if o.Paired && hasBase && sc.System != bench.SystemPlain {
			fresh, perr := bench.Run(ctx, env, base.Scenario, bench.StartPlain)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if perr == nil {
				base = fresh
			}
		}
		if sc.System == bench.SystemCLI || sc.System == bench.SystemCLIElastic {
			r, err = bench.RunConsume(ctx, env, sc, InProcess(o.Run))
		} else {
			r, err = bench.Run(ctx, env, sc, bench.Starters[sc.System])
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		layout := sc.Layout
		if sc.System == bench.SystemPlain {
			layout = ""
		}
		row := Row{System: sc.System, Members: sc.Members, Partitions: sc.Partitions, Filters: sc.Filters, WorkQueue: sc.WorkQueue, Handler: sc.Handler.String(),
			MaxAckPending: effectiveMAP(sc), Concurrency: max(sc.Concurrency, 1), Messages: sc.Messages, Keys: sc.Keys, Layout: layout, Preload: sc.Preload, Handled: r.Handled,
			ElapsedSeconds: r.Elapsed.Seconds(), MsgsPerSec: r.MsgsPerSec, PublishPerSec: r.PublishPerSec, P50MS: ms(r.P50), P99MS: ms(r.P99),
			Violations: r.Violations, Duplicates: r.Duplicates}
		if err != nil {
			row.Error = err.Error()
			rep.OK = false
		}
		if r.Violations > 0 {
			rep.OK = false
		}
		if sc.System != bench.SystemPlain && hasBase && base.MsgsPerSec > 0 {
			row.VsPlain = r.MsgsPerSec / base.MsgsPerSec
			row.PlainMsgsPerSec = base.MsgsPerSec
		}
		results = append(results, r)
		rep.Results = append(rep.Results, row)
	}
	if o.JSON {
		if err := render.JSON(o.IO.Out, rep); err != nil {
			return err
		}
	} else if err := printTable(o.IO.Out, rep); err != nil {
		return err
	}
	if !rep.OK {
		return errors.New("a run broke per-key order or did not finish; see the table")
	}
	return nil
}

func printTable(w io.Writer, rep Report) error {
	t := render.NewTable(w, "SYSTEM", "LAYOUT", "MEMBERS", "PARTITIONS", "FILTERS", "KEYS", "HANDLER", "MAX ACK PENDING", "CONCURRENCY", "MSGS/S", "PUBLISH/S", "P50", "P99", "VIOLATIONS", "VS PLAIN")
	for _, r := range rep.Results {
		filters, vs, layout := "-", "-", r.Layout
		if layout == "" {
			layout = "-"
		}
		if r.System == bench.SystemPlain {
			filters = strconv.Itoa(r.Filters)
			if r.WorkQueue {
				filters += "(wq)"
			}
		} else if r.VsPlain > 0 {
			vs = fmt.Sprintf("%.2f", r.VsPlain)
		}
		rate := fmt.Sprintf("%.0f", r.MsgsPerSec)
		if r.Error != "" {
			rate = "failed"
		}
		p50, p99 := fmt.Sprintf("%.1fms", r.P50MS), fmt.Sprintf("%.1fms", r.P99MS)
		if r.Preload {
			p50, p99 = "-", "-"
		}
		violations := strconv.Itoa(r.Violations)
		if r.System == bench.SystemCLI || r.System == bench.SystemCLIElastic {
			violations = "-" // not observed through the command; the cg rows check order
		}
		t.AddRow(r.System, layout, strconv.Itoa(r.Members), strconv.Itoa(r.Partitions), filters, strconv.Itoa(r.Keys), r.Handler, strconv.Itoa(r.MaxAckPending), strconv.Itoa(r.Concurrency),
			rate, fmt.Sprintf("%.0f", r.PublishPerSec), p50, p99, violations, vs)
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Error != "" {
			fmt.Fprintf(w, "\n%s\n", r.Error)
		}
	}
	return nil
}

// effectiveMAP is the max ack pending a run's consumers had: cg picks 4 ×
// the concurrency for a concurrent member given less than its concurrency.
func effectiveMAP(sc bench.Scenario) int {
	if sc.Concurrency > 1 && sc.MaxAckPending < sc.Concurrency {
		return 4 * sc.Concurrency
	}
	return max(sc.MaxAckPending, 1)
}

// InProcess is a bench.Consume that runs the command line with run in this
// process, its output discarded and NATS_URL pointing at the server; a
// failing command's error output is the error.
func InProcess(run RunFunc) bench.Consume {
	return func(ctx context.Context, url string, args []string) error {
		var errOut lockedBuffer
		ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &errOut}
		env := func(k string) string {
			if k == "NATS_URL" {
				return url
			}
			return ""
		}
		if code := run(ctx, args, ios, env); code != 0 {
			return fmt.Errorf("cg %s: exit %d: %s", strings.Join(args, " "), code, strings.TrimSpace(errOut.String()))
		}
		return nil
	}
}

// lockedBuffer is a buffer written from several goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 64<<10 {
		return len(p), nil // enough to say what went wrong
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
