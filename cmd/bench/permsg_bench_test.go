package bench_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	cmdbench "github.com/cg-dev/cg/cmd/bench"
	"github.com/cg-dev/cg/internal/bench"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// BenchmarkPerMessage measures cg's per-message path in one run, on one
// server: a plain pull consumer draining a preloaded stream (max ack
// pending 1000, fetches of 500, acks that do not wait for a reply), one
// static member over a single partition (one filter: no key cost on the
// server) draining the same backlog through the engine with a handler
// that only acks, serial and with concurrency 8 and 32, and the same
// through the consume command (`--sleep 0 --json`, in process, output
// discarded, timed over the whole command). Each rate is reported with
// its ratio to the plain consumer's. -short: 4000 messages.
//
//	go test -run '^$' -bench PerMessage -benchtime 1x ./cmd/bench/
var (
	perMessageMsgs = flag.Int("permsg.messages", 20000, "BenchmarkPerMessage: messages in the backlog")
	perMessageKeys = flag.Int("permsg.keys", 1000, "BenchmarkPerMessage: keys the backlog is spread over")
	// With a server of its own (cg server in another process), the CPU
	// this process spends is the client's alone: a figure that the load
	// of a shared machine moves far less than a rate.
	perMessageURL = flag.String("permsg.url", "", "BenchmarkPerMessage: a server to use instead of one in this process")
	// A cg binary runs the consume commands as processes, stdout to
	// /dev/null, as a user would; their CPU is counted as theirs.
	perMessageBinary = flag.String("permsg.binary", "", "BenchmarkPerMessage: run consume through this cg binary instead of in process")
)

// cpuTime is the CPU this process and its waited-for children have used.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// execConsume runs consume as a process of bin, its output to /dev/null.
func execConsume(bin string) bench.Consume {
	return func(ctx context.Context, url string, args []string) error {
		c := exec.CommandContext(ctx, bin, args...)
		c.Env = append(os.Environ(), "NATS_URL="+url)
		var errOut bytes.Buffer
		c.Stderr = &errOut // Stdout nil: the null device
		if err := c.Run(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(errOut.String()))
		}
		return nil
	}
}

func BenchmarkPerMessage(b *testing.B) {
	env := bench.Env{URL: *perMessageURL}
	if env.URL == "" {
		env.URL = natstest.RunServer(b).ClientURL()
	}
	consume := cmdbench.InProcess(cmd.Run)
	if *perMessageBinary != "" {
		consume = execConsume(*perMessageBinary)
	}
	msgs, keys := *perMessageMsgs, *perMessageKeys
	if testing.Short() {
		msgs, keys = 4000, 200
	}
	base := bench.Scenario{Members: 1, Partitions: 1, Messages: msgs, Keys: keys, Preload: true}
	plain := base
	plain.System, plain.Filters, plain.MaxAckPending = bench.SystemPlain, 1, 1000
	var plainRate float64
	var table []string
	// The server's own ceiling for the member's filter, 0.> (a wildcard:
	// the server walks the backlog's subjects to find the next message).
	b.Run("plain-partition-filter", func(b *testing.B) {
		sc := plain
		sc.PartitionFilter = true
		var rate float64
		for range b.N {
			r, err := bench.Run(context.Background(), env, sc, bench.StartPlain)
			if err != nil {
				b.Fatal(err)
			}
			rate += r.MsgsPerSec / float64(b.N)
		}
		b.ReportMetric(rate, "msgs/s")
		table = append(table, fmt.Sprintf("plain on 0.>           %8.0f msgs/s", rate))
	})
	b.Run("plain", func(b *testing.B) {
		plainRate = 0
		for range b.N {
			r, err := bench.Run(context.Background(), env, plain, bench.StartPlain)
			if err != nil {
				b.Fatal(err)
			}
			plainRate += r.MsgsPerSec / float64(b.N)
		}
		b.ReportMetric(plainRate, "msgs/s")
		table = append(table, fmt.Sprintf("plain                  %8.0f msgs/s", plainRate))
	})
	for _, system := range []string{bench.SystemCG, bench.SystemCLI} {
		for _, c := range []int{1, 8, 32} {
			sc := base
			sc.System = system
			if c > 1 {
				sc.Concurrency = c
			}
			name := fmt.Sprintf("%s/concurrency=%d", map[string]string{bench.SystemCG: "engine", bench.SystemCLI: "cli"}[system], c)
			b.Run(name, func(b *testing.B) {
				var rate float64
				var cpu time.Duration
				for range b.N {
					var (
						r   bench.Result
						err error
					)
					var before time.Duration
					env.Drain = func(start bool) {
						if start {
							before = cpuTime()
						} else {
							cpu += cpuTime() - before
						}
					}
					if system == bench.SystemCLI {
						r, err = bench.RunConsume(context.Background(), env, sc, consume)
					} else {
						r, err = bench.Run(context.Background(), env, sc, bench.StartCG)
					}
					if err != nil {
						b.Fatal(err)
					}
					if r.Violations > 0 || r.Handled != msgs {
						b.Fatalf("%s: handled %d of %d, %d order violations", sc.Name(), r.Handled, msgs, r.Violations)
					}
					rate += r.MsgsPerSec / float64(b.N)
				}
				perMsg := float64(cpu.Microseconds()) / float64(b.N*msgs)
				b.ReportMetric(rate, "msgs/s")
				b.ReportMetric(perMsg, "cpu-µs/msg")
				if plainRate > 0 {
					b.ReportMetric(rate/plainRate, "x-plain")
				}
				table = append(table, fmt.Sprintf("%-22s %8.0f msgs/s  %.3f× plain  %5.1f µs CPU/msg", name, rate, rate/plainRate, perMsg))
			})
		}
	}
	b.Logf("%d messages over %d keys, 1 partition:\n%s", msgs, keys, strings.Join(table, "\n"))
}
