package worker

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// Long is a long-lived worker: one child started once, fed one Line per
// message on its stdin, answering one Result per message on its stdout,
// in any order. It is restarted when it exits (after a backoff when it
// keeps exiting); the messages it had not answered fail.
type Long struct {
	Argv []string
	// Timeout: how long a message may wait for its result. A worker that
	// misses it is taken for hung: it is killed (its process group) and
	// restarted, and every message it had not answered fails.
	Timeout time.Duration
	Out     *Output

	mu      sync.Mutex
	cur     *child
	next    uint64
	crashes int       // exits in a row without a result in between
	notPast time.Time // no restart before this
	runs    int       // children started, for their output's prefix
	closed  bool
}

// child is one run of the worker's command.
type child struct {
	cmd     *exec.Cmd
	wmu     sync.Mutex // one line written at a time
	stdin   *os.File   // ours, for its write deadline
	w       *bufio.Writer
	pending map[uint64]chan error
	gone    bool
	exited  chan struct{}
}

// Restart backoff after the worker exits: doubling, capped.
const (
	restartFirst = 100 * time.Millisecond
	restartMax   = 5 * time.Second
)

// Start starts the worker (Do starts it too, if it is not running).
func (l *Long) Start() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.running()
	return err
}

// running returns the running child, starting one if none is (l.mu held).
func (l *Long) running() (*child, error) {
	if l.closed {
		return nil, errors.New("worker stopped")
	}
	if l.cur != nil && !l.cur.gone {
		return l.cur, nil
	}
	if wait := time.Until(l.notPast); wait > 0 {
		// Held under l.mu: the messages waiting behind see the restart.
		time.Sleep(wait)
	}
	l.runs++
	prefix := "[worker #" + strconv.Itoa(l.runs) + "] "
	cmd := exec.Command(l.Argv[0], l.Argv[1:]...)
	cmd.Env = baseEnv()
	ownGroup(cmd)
	stderr := l.Out.Prefixed(prefix)
	cmd.Stderr = stderr
	// What it leaves running in its group after an exit must not keep
	// the restart waiting.
	cmd.WaitDelay = time.Second
	// A pipe of our own rather than StdinPipe: a worker that stops
	// reading must not hold a write past the timeout.
	pr, stdin, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdin = pr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		pr.Close()
		stdin.Close()
		return nil, err
	}
	err = cmd.Start()
	pr.Close()
	if err != nil {
		stdin.Close()
		l.backoff()
		return nil, fmt.Errorf("starting the worker: %w", err)
	}
	c := &child{cmd: cmd, stdin: stdin, w: bufio.NewWriter(stdin), pending: map[uint64]chan error{}, exited: make(chan struct{})}
	l.cur = c
	go l.read(c, stdout, stderr, prefix)
	return c, nil
}

// backoff schedules the next start after one more failure (l.mu held).
func (l *Long) backoff() {
	l.crashes++
	d := restartFirst << min(l.crashes-1, 10)
	l.notPast = time.Now().Add(min(d, restartMax))
}

// read takes the child's results until its stdout closes, then reaps it
// and fails whatever it had not answered.
func (l *Long) read(c *child, stdout io.Reader, stderr *LineWriter, prefix string) {
	junk := l.Out.Prefixed(prefix + "stdout: ")
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == 0 {
			// Not a result: shown, not fatal (a stray print).
			_, _ = junk.Write(append(append([]byte{}, sc.Bytes()...), '\n'))
			continue
		}
		var err error
		switch {
		case r.OK && r.Error == "":
		case r.Error != "" && r.Poison:
			err = &PoisonError{Err: errors.New(r.Error)}
		case r.Error != "":
			err = errors.New(r.Error)
		default:
			err = errors.New(`result without "ok":true or "error"`)
		}
		l.mu.Lock()
		ch, ok := c.pending[r.ID]
		delete(c.pending, r.ID)
		if ok && err == nil {
			l.crashes = 0
		}
		l.mu.Unlock()
		if !ok {
			_, _ = junk.Write([]byte(fmt.Sprintf("result for unknown or answered id %d ignored\n", r.ID)))
			continue
		}
		ch <- err
	}
	waitErr := c.cmd.Wait()
	_ = killGroup(c.cmd)
	c.wmu.Lock()
	_ = c.stdin.Close()
	c.wmu.Unlock()
	_ = junk.Close()
	_ = stderr.Close()
	why := "exit status 0"
	if err := exitError(waitErr, false, 0); err != nil {
		why = err.Error()
	}
	l.mu.Lock()
	if !c.gone {
		l.gone(c)
	}
	pend := c.pending
	c.pending = nil
	l.mu.Unlock()
	close(c.exited)
	for _, ch := range pend {
		ch <- fmt.Errorf("the worker ended (%s) before answering", why)
	}
}

// Do hands the worker one message and waits for its result: nil (ok), a
// failure, or a PoisonError.
func (l *Long) Do(m Meta, data []byte) error {
	l.mu.Lock()
	c, err := l.running()
	if err != nil {
		l.mu.Unlock()
		return err
	}
	l.next++
	id := l.next
	ch := make(chan error, 1)
	c.pending[id] = ch
	l.mu.Unlock()

	line, err := encodeLine(NewLine(id, m, data))
	if err == nil {
		c.wmu.Lock()
		_ = c.stdin.SetWriteDeadline(time.Now().Add(l.Timeout))
		_, err = c.w.Write(line)
		if err == nil {
			err = c.w.Flush()
		}
		c.wmu.Unlock()
	}
	if err != nil {
		l.forget(c, id)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// Not reading its stdin: hung, as below.
			l.kill(c)
			return fmt.Errorf("the worker read no message within %s (--exec-timeout): it was killed and is restarted", l.Timeout)
		}
		return fmt.Errorf("writing to the worker: %w", err)
	}
	t := time.NewTimer(l.Timeout)
	defer t.Stop()
	select {
	case err := <-ch:
		return err
	case <-t.C:
		l.forget(c, id)
		// Taken for hung: the messages it holds fail with it.
		l.kill(c)
		return fmt.Errorf("no result within %s (--exec-timeout): the worker was killed and is restarted", l.Timeout)
	}
}

// kill kills a hung child; the next message starts another at once
// (after the backoff), not waiting for this one's reaping.
func (l *Long) kill(c *child) {
	l.mu.Lock()
	if !c.gone {
		l.gone(c)
	}
	l.mu.Unlock()
	_ = killGroup(c.cmd)
}

// gone marks c as no longer taking messages (l.mu held).
func (l *Long) gone(c *child) {
	c.gone = true
	if !l.closed {
		l.backoff()
	}
}

func (l *Long) forget(c *child, id uint64) {
	l.mu.Lock()
	delete(c.pending, id)
	l.mu.Unlock()
}

// Close stops the worker: its stdin is closed (its cue to finish and
// exit) and it is given grace to exit before its process group is killed.
func (l *Long) Close(grace time.Duration) {
	l.mu.Lock()
	l.closed = true
	c := l.cur
	l.mu.Unlock()
	if c == nil {
		return
	}
	c.wmu.Lock()
	_ = c.stdin.Close()
	c.wmu.Unlock()
	select {
	case <-c.exited:
	case <-time.After(grace):
	}
	_ = killGroup(c.cmd)
	<-c.exited
}
