// Package publish is `cg publish`: keyed test traffic for a partitioned
// stream, every message stamped with its key and per-key sequence so a
// consumer can check order and completeness.
package publish

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
)

// Options are the bound argument and flags of publish.
type Options struct {
	IO     *iostreams.IOStreams
	Client func() (jetstream.JetStream, error)
	JSON   bool

	Pattern   string
	Keys      int
	KeyPrefix string
	Count     int
	Rate      float64
	Duration  time.Duration
	Size      int
	Random    bool
	// Progress is how often progress goes to stderr.
	Progress time.Duration
	// Trace stamps a W3C trace context on every message (--trace):
	// Traceparent from the environment's TRACEPARENT, or a fresh one.
	Trace       bool
	Traceparent string
	Tracestate  string
}

// NewCmd returns `cg publish`.
func NewCmd(f *factory.Factory) *cobra.Command { return newCmdPublish(f) }

func newCmdPublish(f *factory.Factory) *cobra.Command {
	opts := &Options{
		IO: f.IOStreams,
		Client: func() (jetstream.JetStream, error) {
			c, err := f.Client()
			if err != nil {
				return nil, err
			}
			return c.JetStream(), nil
		},
		Progress: time.Second,
	}
	cmd := &cobra.Command{
		Use:   "publish <subject-pattern>",
		Short: "Publish keyed test traffic: per-key sequences a consumer can verify",
		Long: `Publish test messages over a set of keys, in turn (or at random with --random).

The subject pattern marks the key's place with {key} (orders.{key}) or with a
single '*' token (orders.*). Every message carries the headers Cg-Key (its key)
and Cg-Key-Seq (its sequence within the key, from 1), so whoever handles it can
tell duplicates, gaps and per-key order violations apart.

Progress goes to stderr, the summary to stdout. It stops after --count messages
or --duration, or on Ctrl-C, still printing the summary and exiting 0.`,
		Example: `  cg publish 'orders.{key}'
  cg publish 'orders.*' --keys 20 --count 1000 --rate 100/s
  cg publish 'orders.{key}' --count 0 --rate 0        # as fast as possible, until Ctrl-C
  cg publish 'orders.{key}' --key-prefix cust- --random --json`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageErrorf("%s takes one <subject-pattern>, such as 'orders.{key}' or 'orders.*' (got %d arguments)", cmd.CommandPath(), len(args))
			}
			if _, err := traffic.ParsePattern(args[0]); err != nil {
				return cmdutil.NewUsageError(err)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Pattern = args[0]
			opts.JSON = f.JSON
			if opts.Keys > traffic.MaxKeys {
				return cmdutil.UsageErrorf("--keys %d is above cg's ceiling of %d (each key a run uses takes about 280 B): use at most %d, such as --keys 20", opts.Keys, traffic.MaxKeys, traffic.MaxKeys)
			}
			if opts.Size > traffic.MaxSize {
				return cmdutil.UsageErrorf("--size %d is above cg's ceiling of %d bytes (the server's default largest message, 1 MiB): use at most %d, such as --size 256", opts.Size, traffic.MaxSize, traffic.MaxSize)
			}
			if err := traffic.ValidateKey(opts.KeyPrefix + "1"); err != nil {
				return cmdutil.UsageErrorf("--key-prefix %q: keys must not contain '.', '*', '>' or white space; use one such as cust-", opts.KeyPrefix)
			}
			if opts.Trace {
				opts.Traceparent, opts.Tracestate = f.Env("TRACEPARENT"), f.Env("TRACESTATE")
				if opts.Traceparent != "" {
					if _, err := traffic.ParseTraceparent(opts.Traceparent); err != nil {
						return cmdutil.UsageErrorf("--trace: the environment's TRACEPARENT: %v; fix or unset it (without it --trace starts a new trace)", err)
					}
				}
			}
			return publishRun(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	cmdutil.CountVar(fs, &opts.Keys, "keys", 10, 1, "20", "number of distinct keys (at most 100000; each takes about 280 B)")
	fs.StringVar(&opts.KeyPrefix, "key-prefix", "k", "key names are this prefix and a number: k0001, k0002, …")
	cmdutil.CountVar(fs, &opts.Count, "count", 100, 0, "1000", "messages to publish (0: until interrupted or --duration)")
	opts.Rate = 10
	fs.Var(traffic.RateValue{P: &opts.Rate}, "rate", "messages per second, written with a unit: 10/s, 600/m (0: as fast as possible)")
	cmdutil.DurationVar(fs, &opts.Duration, "duration", 0, "30s", "stop after this long (0: no limit)")
	cmdutil.CountVar(fs, &opts.Size, "size", 0, 0, "256", "payload size in bytes (0: a short JSON document; at most 1048576, the server's default largest message)")
	fs.BoolVar(&opts.Random, "random", false, "pick each message's key at random instead of in turn")
	fs.BoolVar(&opts.Trace, "trace", false, "stamp every message with a W3C traceparent header: the environment's TRACEPARENT (and TRACESTATE) when set, else a new trace; its trace id goes to stderr, so a member's spans (pkg/cg/plugin/cgotel) can be found")
	return cmd
}

// Summary is the --json document.
type Summary struct {
	Subject       string            `json:"subject"`
	Published     uint64            `json:"published"`
	Failed        uint64            `json:"failed"`
	Keys          int               `json:"keys"`
	ElapsedSecs   float64           `json:"elapsed_seconds"`
	Rate          float64           `json:"rate_per_second"`
	LastStreamSeq uint64            `json:"last_stream_seq"`
	PerKey        map[string]uint64 `json:"per_key"`
	Interrupted   bool              `json:"interrupted"`
	// TraceID is the trace the messages carry (--trace).
	TraceID string `json:"trace_id,omitempty"`
}

func publishRun(ctx context.Context, o *Options) error {
	js, err := o.Client()
	if err != nil {
		return err
	}
	var hdr nats.Header
	traceID := ""
	if o.Trace {
		tp := o.Traceparent
		if tp == "" {
			tp, traceID = traffic.NewTraceparent()
		} else {
			traceID, _ = traffic.ParseTraceparent(tp)
		}
		hdr = nats.Header{traffic.TraceparentHeader: []string{tp}}
		if o.Tracestate != "" {
			hdr.Set(traffic.TracestateHeader, o.Tracestate)
		}
		fmt.Fprintf(o.IO.ErrOut, "trace: %s (traceparent %s)\n", traceID, tp)
	}
	p, err := traffic.NewPublisher(js, traffic.Options{
		Header:   hdr,
		Subject:  o.Pattern,
		Keys:     traffic.Keys(o.KeyPrefix, o.Keys),
		Count:    o.Count,
		Duration: o.Duration,
		Rate:     o.Rate,
		Random:   o.Random,
		Size:     o.Size,
	})
	if err != nil {
		return cmdutil.NewUsageError(err)
	}
	fmt.Fprintf(o.IO.ErrOut, "publishing to %s over %d keys: %s at %s; Ctrl-C stops\n",
		o.Pattern, o.Keys, countText(o.Count, o.Duration), rateText(o.Rate))

	done := make(chan struct{})
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress(o.IO.ErrOut, p, o.Count, o.Progress, done)
	}()
	res, runErr := p.Run(ctx)
	close(done)
	<-progressDone

	sum := Summary{
		Subject:       o.Pattern,
		Published:     res.Published,
		Failed:        res.Failed,
		Keys:          res.Keys,
		ElapsedSecs:   res.Elapsed.Seconds(),
		Rate:          res.Rate(),
		LastStreamSeq: res.LastStreamSeq,
		PerKey:        res.PerKey,
		Interrupted:   ctx.Err() != nil,
		TraceID:       traceID,
	}
	if err := printSummary(o, sum); err != nil {
		return err
	}
	if runErr != nil {
		return explain(runErr, o.Pattern)
	}
	return nil
}

func progress(w io.Writer, p *traffic.Publisher, count int, every time.Duration, done <-chan struct{}) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			n := p.Published()
			of := ""
			if count > 0 {
				of = fmt.Sprintf("/%d", count)
			}
			fmt.Fprintf(w, "published %d%s (%.1f/s)\n", n, of, float64(n)/time.Since(start).Seconds())
		}
	}
}

func printSummary(o *Options, s Summary) error {
	if o.JSON {
		return render.JSON(o.IO.Out, s)
	}
	kv := render.NewKeyValues(o.IO.Out)
	kv.Add("Subject", s.Subject)
	kv.Addf("Published", "%d", s.Published)
	if s.Failed > 0 {
		kv.Addf("Failed", "%d", s.Failed)
	}
	kv.Addf("Keys", "%d", s.Keys)
	kv.Add("Elapsed", (time.Duration(s.ElapsedSecs * float64(time.Second))).Round(time.Millisecond).String())
	kv.Addf("Rate", "%.1f/s", s.Rate)
	if s.LastStreamSeq > 0 {
		kv.Addf("Last stream seq", "%d", s.LastStreamSeq)
	}
	if len(s.PerKey) > 0 && len(s.PerKey) <= 10 {
		keys := make([]string, 0, len(s.PerKey))
		for k := range s.PerKey {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		line := ""
		for i, k := range keys {
			if i > 0 {
				line += " "
			}
			line += fmt.Sprintf("%s=%d", k, s.PerKey[k])
		}
		kv.Add("Per key", line)
	}
	return kv.Render()
}

// explain adds the likely fix to a publish failure.
func explain(err error, pattern string) error {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
		return fmt.Errorf("%w: no stream stores %s; create one first, e.g. scripts/static_stream_setup.sh", err, pattern)
	}
	return err
}

func countText(count int, d time.Duration) string {
	switch {
	case count > 0 && d > 0:
		return fmt.Sprintf("%d messages (at most %v)", count, d)
	case count > 0:
		return fmt.Sprintf("%d messages", count)
	case d > 0:
		return fmt.Sprintf("for %v", d)
	}
	return "until interrupted"
}

func rateText(r float64) string {
	if r == 0 {
		return "full speed"
	}
	return traffic.FormatRate(r)
}
