package demo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/cmd/group"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
)

// Workers is the walkthrough of a worker outside cg: each member runs
// `cg static consume ... --exec handle.sh`, a shell script started once
// per message with the body on its stdin and the metadata and headers in
// its environment.
const Workers = "workers"

// workersConcurrency: scripts at once per member, one per key at a time.
const workersConcurrency = 4

// workersScript is the demo's worker. It appends what it was told to the
// record (the demo counts from it) and says what it did on its stdout,
// which cg shows on its stderr behind the message's prefix.
const workersScript = `#!/bin/sh
# One order: the body on stdin, the metadata in CG_* variables.
body=$(cat)
echo "$CG_MEMBER $CG_HDR_Cg_2DKey $CG_HDR_Cg_2DKey_2DSeq $CG_STREAM_SEQ $CG_DELIVERED $CG_KEY" >> %s
echo "shipped order $CG_HDR_Cg_2DKey_2DSeq of customer $CG_KEY ($CG_SUBJECT, partition $CG_PARTITION)"
`

// WorkersVerdict is the workers walkthrough's part of the verdict,
// counted from the scripts' own record.
type WorkersVerdict struct {
	// Runs counts the script's runs (one per delivery).
	Runs int `json:"runs"`
	// Redelivered counts runs with CG_DELIVERED above 1.
	Redelivered int `json:"redelivered"`
	// KeyMismatches counts runs whose CG_KEY (read off the subject) is not
	// the Cg-Key header the publisher stamped (CG_HDR_Cg_2DKey).
	KeyMismatches int `json:"key_mismatches"`
	// Failed: the consume runs that ended in an error.
	Failed []string `json:"failed,omitempty"`
}

// workersWalk runs m1 and m2 as `consume --exec`, in process.
type workersWalk struct {
	*demo
	dir, script, record string

	mu       sync.Mutex
	wv       WorkersVerdict
	shown    map[string]int
	read     int64 // bytes of the record counted
	stopTail chan struct{}
	tailDone chan struct{}
}

func (w *workersWalk) setup(ctx context.Context) error {
	d := w.demo
	var err error
	if w.dir, err = os.MkdirTemp("", "cg-demo-workers-"); err != nil {
		return err
	}
	d.stops = append(d.stops, func() { _ = os.RemoveAll(w.dir) })
	w.script, w.record = filepath.Join(w.dir, "handle.sh"), filepath.Join(w.dir, "record")
	if err := os.WriteFile(w.script, []byte(fmt.Sprintf(workersScript, w.record)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(w.record, nil, 0o644); err != nil {
		return err
	}
	w.shown = map[string]int{}
	if err := d.createStream(ctx, subjects, transform); err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created stream %s on %s, stamped by the transform %s", streamName, subjects, transform),
		"Every customer's orders land in one of 10 partitions.")
	if err := d.createPair(ctx); err != nil {
		return err
	}
	d.step("Wrote the worker, a shell script: "+w.script,
		"cg starts it once per message, with no shell of its own: the body on stdin; CG_MEMBER, CG_SUBJECT,",
		"CG_PARTITION, CG_STREAM_SEQ, CG_DELIVERED and CG_KEY (the customer, read off the subject) in its",
		"environment, and each header as CG_HDR_<name> (Cg-Key-Seq is CG_HDR_Cg_2DKey_2DSeq: bytes other",
		"than letters and digits are written _XX). It records what it was told, and exit 0 acks the message.")
	cmdline := fmt.Sprintf("cg static consume ORDERS fulfillment m1 --exec %s --concurrency %d", w.script, workersConcurrency)
	d.step("Starting m1 and m2 as consume --exec, each running up to 4 scripts at once, one per customer at a time",
		"("+cmdline+", and the same for m2)",
		"What a script prints reaches cg's stderr behind its message's [p<partition> seq <seq>] prefix; the",
		"first of them:")
	for _, m := range []string{"m1", "m2"} {
		if err := w.startConsume(ctx, m); err != nil {
			return err
		}
	}
	w.stopTail, w.tailDone = make(chan struct{}), make(chan struct{})
	go w.tail()
	d.stops = append(d.stops, func() { close(w.stopTail); <-w.tailDone })
	return nil
}

// startConsume runs `consume --exec` for member in process, on its own
// connection, as a separate cg would.
func (w *workersWalk) startConsume(ctx context.Context, member string) error {
	d := w.demo
	nc, c, err := d.connect(member)
	if err != nil {
		return err
	}
	ios := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: &shownLines{w: w, member: member}}
	f := factory.New(ios, nil)
	f.Client = func() (*cg.Client, error) { return c, nil }
	cmd := group.NewCmdConsume(f, cg.KindStatic)
	cmd.SetArgs([]string{streamName, groupName, member, "--exec", w.script, "--concurrency", strconv.Itoa(workersConcurrency),
		"--ack-wait", d.o.AckWait.String()})
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := cmd.ExecuteContext(runCtx); err != nil {
			w.mu.Lock()
			w.wv.Failed = append(w.wv.Failed, member+": "+err.Error())
			w.mu.Unlock()
		}
	}()
	d.stops = append(d.stops, func() { cancel(); <-done; nc.Close() })
	return nil
}

// shownLines passes the first few lines of a member's scripts to the
// narration and drops the rest of consume's stderr.
type shownLines struct {
	w      *workersWalk
	member string
	buf    []byte
}

func (s *shownLines) Write(p []byte) (int, error) {
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(s.buf[:i])
		s.buf = s.buf[i+1:]
		if !strings.Contains(line, "shipped order") {
			continue
		}
		s.w.mu.Lock()
		show := s.w.shown[s.member] < 2
		s.w.shown[s.member]++
		s.w.mu.Unlock()
		if show {
			s.w.logf("  %s's script: %s", s.w.inst(s.member), line)
		}
	}
}

// tail counts the record as the scripts write it: each run is checked
// against the traffic's headers.
func (w *workersWalk) tail() {
	defer close(w.tailDone)
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		w.count()
		select {
		case <-w.stopTail:
			w.count()
			return
		case <-t.C:
		}
	}
}

func (w *workersWalk) count() {
	f, err := os.Open(w.record)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(w.read, io.SeekStart); err != nil {
		return
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // a part line is read again next time
		}
		w.read += int64(len(line))
		fs := strings.Fields(line)
		if len(fs) != 6 {
			continue
		}
		keySeq, _ := strconv.ParseUint(fs[2], 10, 64)
		streamSeq, _ := strconv.ParseUint(fs[3], 10, 64)
		delivered, _ := strconv.ParseUint(fs[4], 10, 64)
		w.verifier.Observe(fs[1], keySeq, streamSeq, fs[0])
		w.mu.Lock()
		w.wv.Runs++
		if delivered > 1 {
			w.wv.Redelivered++
		}
		if fs[5] != fs[1] {
			w.wv.KeyMismatches++
		}
		w.mu.Unlock()
	}
}

func (w *workersWalk) steps(ctx context.Context, v *Verdict) error {
	if !poll(ctx, stepLimit, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.shown["m1"] > 0 && w.shown["m2"] > 0
	}) {
		return fmt.Errorf("the workers of m1 and m2 handled nothing within %v of traffic", stepLimit)
	}
	return sleepCtx(ctx, w.o.Phase/2)
}

func (w *workersWalk) judge(_ context.Context, v *Verdict) []string {
	w.count()
	w.mu.Lock()
	defer w.mu.Unlock()
	wv := w.wv
	wv.Failed = append([]string(nil), w.wv.Failed...)
	v.Workers = &wv
	var why []string
	if wv.Runs == 0 {
		why = append(why, "the worker never ran")
	}
	if wv.KeyMismatches > 0 {
		why = append(why, fmt.Sprintf("%d runs were told a CG_KEY other than the message's key", wv.KeyMismatches))
	}
	if len(wv.Failed) > 0 {
		why = append(why, "consume failed: "+strings.Join(wv.Failed, "; "))
	}
	return why
}
