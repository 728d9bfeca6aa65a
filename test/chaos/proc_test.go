package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// line is one NDJSON line of `cg <kind> consume --json`, as received.
type line struct {
	Type string `json:"type"` // msg, event, summary

	// "msg" lines.
	Member    string  `json:"member"`
	Partition int     `json:"partition"`
	Subject   string  `json:"subject"`
	StreamSeq uint64  `json:"stream_seq"`
	Delivered uint64  `json:"delivered"`
	PinID     string  `json:"pin_id"`
	Millis    float64 `json:"processing_ms"`
	Acked     bool    `json:"acked"`
	AckError  string  `json:"ack_error"`
	Key       string  `json:"key"`
	KeySeq    uint64  `json:"key_seq"`
	Check     string  `json:"check"`

	// "event" lines (and the summary's reason).
	Event      string    `json:"event"`
	Time       time.Time `json:"time"`
	Partitions []int     `json:"partitions"`
	Reason     string    `json:"reason"`
	Error      string    `json:"error"`

	raw  string
	at   time.Time // when the test read it; a msg line: the time it carries
	proc *proc
	idx  int
}

func (l *line) isMsg() bool { return l.Type == "msg" }

// started is when the handler took the message: the line is printed once
// it is done, ack included, which may be much later (an ack that waits out
// its timeout when its server goes away).
func (l *line) started() time.Time {
	return l.at.Add(-time.Duration(l.Millis * float64(time.Millisecond)))
}

// ackMayHaveLeft reports whether l's ack could have left its process
// before stopped, the moment the signal that froze or cut it off had
// been sent: only when the handler's own work (work, the members'
// --sleep) was over by then. A handler still at work when the process
// stopped can only have acked after it resumed, where fencing must
// refuse the ack. (The test's own clock before the signal is no bound:
// on a loaded machine a handler may start between it and the signal.)
func (l *line) ackMayHaveLeft(stopped time.Time, work time.Duration) bool {
	return l.started().Add(work).Before(stopped)
}

func (l *line) isEvent(kind string) bool { return l.Type == "event" && l.Event == kind }

// proc is one member instance: a `cg <kind> consume` process whose output
// is parsed as it comes.
type proc struct {
	name   string // m1#2: member and instance number
	member string
	cmd    *exec.Cmd
	stderr *tailBuffer

	mu    sync.Mutex
	lines []*line

	done    chan struct{} // closed once the output is read to EOF and the process reaped
	exitErr error
}

func startProc(name, member, url, cfgDir string, args []string) (*proc, error) {
	p := &proc{name: name, member: member, stderr: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(cgBin, args...)
	p.cmd.Env = hermeticEnv(url, cfgDir)
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			l := &line{raw: sc.Text(), at: time.Now(), proc: p}
			var head struct{ Type string }
			switch {
			case json.Unmarshal(sc.Bytes(), &head) != nil:
				l.Type = "text"
			case head.Type == "summary": // its fields are not a line's (acked is a count)
				l.Type = head.Type
			case json.Unmarshal(sc.Bytes(), l) != nil:
				l.Type = "text"
			}
			if l.Type == "msg" && !l.Time.IsZero() {
				// consume writes its lines in bursts: when the outcome
				// was known, not when the line came through the pipe.
				l.at = l.Time
			}
			p.mu.Lock()
			l.idx = len(p.lines)
			p.lines = append(p.lines, l)
			p.mu.Unlock()
		}
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// hermeticEnv is the environment of every cg process: the test's server,
// no color, and a config home of its own so no nats CLI context of the
// machine running the tests is picked up.
func hermeticEnv(url, cfgDir string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "NATS_") || strings.HasPrefix(kv, "XDG_CONFIG_HOME=") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NATS_URL="+url, "NO_COLOR=1", "HOME="+cfgDir, "XDG_CONFIG_HOME="+cfgDir)
}

func (p *proc) snapshot() []*line {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*line(nil), p.lines...)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("%s has exited", p.name)
	}
	return p.cmd.Process.Signal(sig)
}

// wait waits for the process to exit and its output to be read, and
// returns whether it did, and how it exited.
func (p *proc) wait(timeout time.Duration) (exited bool, err error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.exitErr
	case <-time.After(timeout):
		return false, nil
	}
}

// tail is the last n raw lines, for diagnostics.
func (p *proc) tail(n int) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines[max(0, len(p.lines)-n):] {
		out = append(out, l.at.Format("15:04:05.000")+" "+l.raw)
	}
	return out
}

// pins are the pin ids this instance was pinned under, in order.
func (p *proc) pins() []string {
	var pins []string
	for _, l := range p.snapshot() {
		if l.isEvent("pinned") && l.PinID != "" {
			pins = append(pins, l.PinID)
		}
	}
	return pins
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
