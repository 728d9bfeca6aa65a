package group

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/worker"
	"github.com/cg-dev/cg/pkg/cg"
)

// consume --exec, --worker, --http: the handler is a program outside cg
// (internal/worker; docs/workers.md). Its success acks the message as the
// demo handler's does; its failure goes the way of --fail-subject's: the
// attempt's error recorded (Msg.Fail), the message nak'ed, and the retry
// policy, if any, decides.

// WorkerFlags are the worker flags as given.
type WorkerFlags struct {
	Exec    string
	Long    string
	URL     string
	Timeout time.Duration

	argv []string
}

// DefaultExecTimeout is how long one message (or batch) may take in a
// worker when --exec-timeout is not given.
const DefaultExecTimeout = 30 * time.Second

func (w *WorkerFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&w.Exec, "exec", "", "handle each message by running this command (split into words as a shell would; no shell is started): the body on its stdin, the metadata and headers in CG_* variables; exit 0 acks, anything else fails the delivery (docs/workers.md)")
	fs.StringVar(&w.Long, "worker", "", "handle messages with this long-lived command: one JSON line per message on its stdin, one result line per message read back from its stdout, in any order; restarted if it exits (docs/workers.md)")
	fs.StringVar(&w.URL, "http", "", "handle each message by POSTing it to this URL (metadata in Cg-* request headers): 2xx acks; 408, 429, 5xx and no answer fail the delivery; other 4xx make it poison (docs/workers.md)")
	cmdutil.DurationVar(fs, &w.Timeout, "exec-timeout", DefaultExecTimeout, "10s", "with --exec, --worker or --http, how long one message (or --exec batch) may take: then the command's process group is killed (--worker: the worker is restarted) or the request given up, and the delivery fails")
}

// on says whether a worker was asked for.
func (w *WorkerFlags) on() bool { return w.Exec != "" || w.Long != "" || w.URL != "" }

// checkWorker refuses bad worker flags and their combinations, before
// anything is dialled or joined; with a worker, the demo handler's --sleep
// is off.
func (o *ConsumeOptions) checkWorker(fs *pflag.FlagSet) error {
	w := &o.Worker
	var given []string
	for _, f := range []string{"exec", "worker", "http"} {
		if fs.Changed(f) {
			given = append(given, "--"+f)
		}
	}
	if len(given) > 1 {
		return cmdutil.UsageErrorf("%s cannot be combined: a member has one handler; choose one of them", strings.Join(given, " and "))
	}
	if len(given) == 0 {
		if fs.Changed("exec-timeout") {
			return cmdutil.UsageErrorf("--exec-timeout works only with --exec, --worker or --http: add one of them, or leave it out")
		}
		return nil
	}
	flag := given[0]
	switch flag {
	case "--exec", "--worker":
		cmdline := w.Exec
		if flag == "--worker" {
			cmdline = w.Long
		}
		argv, err := worker.Split(cmdline)
		if err != nil {
			return cmdutil.UsageErrorf("invalid argument %q for \"%s\" flag: %v", cmdline, flag, err)
		}
		if _, err := exec.LookPath(argv[0]); err != nil {
			return cmdutil.UsageErrorf("invalid argument %q for \"%s\" flag: command %q not found or not executable: give its path, such as ./handle.sh, or install it", cmdline, flag, argv[0])
		}
		w.argv = argv
	case "--http":
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return cmdutil.UsageErrorf("invalid argument %q for \"--http\" flag: not an http:// or https:// URL with a host; write one such as http://127.0.0.1:8080/orders", w.URL)
		}
	}
	if fs.Changed("exec-timeout") && w.Timeout <= 0 {
		return cmdutil.UsageErrorf("--exec-timeout %s: a worker needs time to work; use a positive duration, such as 10s", w.Timeout)
	}
	for _, f := range []string{"sleep", "fail-subject", "fail-every"} {
		if fs.Changed(f) {
			return cmdutil.UsageErrorf("--%s is for the demo handler, which %s replaces: leave it out (make the worker slow or fail instead)", f, flag)
		}
	}
	if fs.Changed("batch") && flag != "--exec" {
		return cmdutil.UsageErrorf("--batch works with --exec only (one command per batch, the batch as JSON lines on its stdin): use --exec, or leave --batch out and raise --concurrency")
	}
	o.Sleep = 0
	return nil
}

// workerRun is a started worker and what its messages are told.
type workerRun struct {
	o      *ConsumeOptions
	keyOf  func(string) (string, bool)
	exec   *worker.Exec
	long   *worker.Long
	http   *worker.HTTP
	output *worker.Output
}

// startWorker prepares the worker (the long-lived one is started).
func (o *ConsumeOptions) startWorker(ctx context.Context, c *cg.Client) (*workerRun, error) {
	keyOf, err := c.KeyReader(ctx, o.Kind, o.Stream, o.Group)
	if err != nil {
		return nil, err
	}
	w := &workerRun{o: o, keyOf: keyOf, output: worker.NewOutput(o.F.IOStreams.ErrOut)}
	t := o.Worker.Timeout
	switch {
	case o.Worker.Exec != "":
		w.exec = &worker.Exec{Argv: o.Worker.argv, Timeout: t, Out: w.output}
	case o.Worker.Long != "":
		w.long = &worker.Long{Argv: o.Worker.argv, Timeout: t, Out: w.output}
		if err := w.long.Start(); err != nil {
			return nil, err
		}
	default:
		w.http = worker.NewHTTP(o.Worker.URL, t, o.Concurrency)
	}
	return w, nil
}

// close stops a long-lived worker, giving it a moment to exit.
func (w *workerRun) close() {
	if w.long != nil {
		w.long.Close(5 * time.Second)
	}
}

func (w *workerRun) meta(m *cg.Msg, md *jetstream.MsgMetadata, mdErr error) worker.Meta {
	o := w.o
	wm := worker.Meta{Stream: o.Stream, Group: o.Group, Member: o.Member, Subject: m.Subject(), Partition: m.Partition(), Headers: m.Headers()}
	if mdErr == nil {
		wm.Seq, wm.Delivered = md.Sequence.Stream, md.NumDelivered
	}
	wm.Key, wm.HasKey = w.keyOf(m.Subject())
	return wm
}

// handle runs m through the worker: nil when it succeeded. While the
// worker works the message is kept alive (in-progress acks), so a handler
// slower than the ack wait is not redelivered behind its back.
func (w *workerRun) handle(m *cg.Msg, md *jetstream.MsgMetadata, mdErr error) error {
	wm := w.meta(m, md, mdErr)
	stop := keepAlive(m, w.o.AckWait)
	defer stop()
	switch {
	case w.exec != nil:
		return w.exec.Run(m.Data(), worker.MessageEnv(wm), fmt.Sprintf("[p%d seq %d] ", wm.Partition, wm.Seq))
	case w.long != nil:
		return w.long.Do(wm, m.Data())
	default:
		return w.http.Post(wm, m.Data())
	}
}

// keepAlive sends in-progress acks for m every third of the ack wait until
// stopped.
func keepAlive(m *cg.Msg, ackWait time.Duration) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(max(ackWait/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				_ = m.InProgress()
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

// handleBatch runs one command for batch b, the batch as JSON lines on its
// stdin (the batch stage keeps its messages alive meanwhile).
func (w *workerRun) handleBatch(b *cg.Batch) error {
	lines := make([]worker.Line, 0, len(b.Msgs))
	for _, m := range b.Msgs {
		md, mdErr := m.Metadata()
		lines = append(lines, worker.NewLine(0, w.meta(m, md, mdErr), m.Data()))
	}
	in, err := worker.BatchInput(lines)
	if err != nil {
		return err
	}
	o := w.o
	return w.exec.Run(in, worker.BatchEnv(o.Stream, o.Group, o.Member, b.Number, len(b.Msgs), b.Attempt), fmt.Sprintf("[batch %d] ", b.Number))
}

// workerFailed settles a message the worker failed: a poison error makes
// it poison (Msg.Poison: the retry policy's action, or Term without one);
// any other error is recorded and the message nak'ed, for the retry policy
// (or, without one, the server) to redeliver. Then it prints the failure.
func (o *ConsumeOptions) workerFailed(m *cg.Msg, md *jetstream.MsgMetadata, mdErr error, start time.Time, werr error,
	mu *sync.Mutex, sum *Summary, js *render.JSONStream, cs *render.ColorScheme, who string) {
	var settleErr error
	settled := "nak'd"
	if worker.IsPoison(werr) {
		settleErr, settled = m.Poison(werr), "poison"
	} else {
		m.Fail(werr)
		settleErr = m.Nak()
	}
	line := MsgLine{Type: "msg", Member: o.Member, Partition: m.Partition(), Subject: m.Subject(), PinID: m.PinID(),
		Millis: float64(time.Since(start).Microseconds()) / 1000, Failed: true, Error: werr.Error(), Time: time.Now()}
	if mdErr == nil {
		line.StreamSeq, line.Delivered = md.Sequence.Stream, md.NumDelivered
	}
	if settleErr != nil && !errors.Is(settleErr, cg.ErrBatchAck) {
		line.AckError = settleErr.Error()
	}
	mu.Lock()
	defer mu.Unlock()
	sum.Failed++
	if o.F.JSON {
		_ = js.Encode(line)
		return
	}
	outcome := cs.Red("failed") + " (" + werr.Error() + "), " + settled
	if line.AckError != "" {
		outcome = cs.Red("failed") + " (" + werr.Error() + "), " + settled + " failed: " + line.AckError
	}
	fmt.Fprintf(o.F.IOStreams.Out, "[%s] p%-3d %s seq=%d pin=%s %s delivery %d\n", who, line.Partition, line.Subject, line.StreamSeq,
		shortPin(line.PinID), outcome, line.Delivered)
}
