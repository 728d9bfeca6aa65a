package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// batchLine is a JSON line of `consume --batch --json`: a message line
// ("msg", with its batch number) or a batch's closing line ("batch").
type batchLine struct {
	Type      string `json:"type"`
	Event     string `json:"event"`
	PinID     string `json:"pin_id"`
	StreamSeq uint64 `json:"stream_seq"`
	Batch     uint64 `json:"batch"`
	Size      int    `json:"size"`
	Acked     bool   `json:"acked"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
}

// batchInstance is one `cg static consume --batch` process whose lines
// are parsed as they come; kill, when set, is asked after every line
// whether to SIGKILL the process there and then, from the reading
// goroutine, so that nothing the process does after that line can happen
// before the kill.
type batchInstance struct {
	name  string
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []batchLine
	raw   []string
	pins  int
	kill  func(batchLine, []batchLine) bool
	dead  bool
	done  chan error
}

func startBatch(t *testing.T, url, name string, kill func(batchLine, []batchLine) bool, args ...string) *batchInstance {
	t.Helper()
	in := &batchInstance{name: name, kill: kill, done: make(chan error, 1)}
	in.cmd = exec.Command(cgBin, append([]string{"static", "consume", "ORDERS", "g", "m1", "--json"}, args...)...)
	in.cmd.Env = append(os.Environ(), "NATS_URL="+url)
	out, err := in.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in.cmd.Stderr = os.Stderr
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l batchLine
			ok := json.Unmarshal(sc.Bytes(), &l) == nil
			in.mu.Lock()
			in.raw = append(in.raw, sc.Text())
			if ok {
				in.lines = append(in.lines, l)
				if l.Type == "event" && l.Event == "pinned" {
					in.pins++
				}
				if !in.dead && in.kill != nil && in.kill(l, in.lines) {
					_ = in.cmd.Process.Signal(syscall.SIGKILL)
					in.dead = true
				}
			}
			in.mu.Unlock()
		}
		in.done <- in.cmd.Wait()
	}()
	t.Cleanup(func() { _ = in.cmd.Process.Kill() })
	return in
}

func (in *batchInstance) snapshot() []batchLine {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]batchLine(nil), in.lines...)
}

// msgs counts the message lines printed so far.
func (in *batchInstance) msgs() int {
	n := 0
	for _, l := range in.snapshot() {
		if l.Type == "msg" {
			n++
		}
	}
	return n
}

// ackedSeqs is, in order, the stream seqs of the messages in batches the
// instance acked.
func ackedSeqs(lines []batchLine) []uint64 {
	acked := map[uint64]bool{}
	for _, l := range lines {
		if l.Type == "batch" && l.Acked {
			acked[l.Batch] = true
		}
	}
	var seqs []uint64
	for _, l := range lines {
		if l.Type == "msg" && acked[l.Batch] {
			seqs = append(seqs, l.StreamSeq)
		}
	}
	return seqs
}

// A kill -9 of the pinned instance in the middle of a batch, through the
// built binary: its message lines of batch k are printed (the handler has
// the batch) and no batch line for k (it was never acked). The standby
// must then handle that whole batch again, first and in order; nothing is
// lost and nothing but that batch is handled twice.
func TestSIGKILLMidBatchReplaysTheBatch(t *testing.T) {
	const size = 10
	url, js := setup(t)
	// The kill hits a batch from the 6th on (by then the standby's
	// liveness check has heard from the pinned instance) in its middle,
	// as its 5th message line is out: the backlog fills batches to 10, so
	// with 20ms per message the handler is then about 100ms from its acks.
	var once sync.Mutex
	killedOne := false
	kill := func(l batchLine, lines []batchLine) bool {
		if l.Type != "msg" || l.Batch < 6 {
			return false
		}
		inBatch := 0
		for _, p := range lines {
			if p.Type == "msg" && p.Batch == l.Batch {
				inBatch++
			}
		}
		if inBatch != 5 {
			return false
		}
		once.Lock()
		defer once.Unlock()
		if killedOne {
			return false
		}
		killedOne = true
		return true
	}
	args := []string{"--batch", "10", "--batch-wait", "100ms", "--sleep", "20ms"}
	a := startBatch(t, url, "a", kill, args...)
	b := startBatch(t, url, "b", kill, args...)
	natstest.Eventually(t, 20*time.Second, "both instances joined", func() bool {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		return err == nil && ms.Waiting >= 2
	})
	// 400 messages at 2ms: a backlog builds (the handler takes 20ms a
	// message), so batches fill up to 10.
	pub := publish(t, js, 2*time.Millisecond, 400)
	var victim, standby *batchInstance
	natstest.Eventually(t, 30*time.Second, "one instance killed mid-batch", func() bool {
		for _, in := range []*batchInstance{a, b} {
			in.mu.Lock()
			dead := in.dead
			in.mu.Unlock()
			if dead {
				victim = in
			}
		}
		return victim != nil
	})
	standby = a
	if victim == a {
		standby = b
	}
	select {
	case <-victim.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the killed instance did not exit")
	}
	n := pub.finish()
	// The standby handles everything; the member ends with nothing pending.
	if !clitest.Poll(nil, 40*time.Second, func() bool {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		return err == nil && ms.Pending == 0 && ms.AckPending == 0 && len(ackedSeqs(victim.snapshot()))+len(ackedSeqs(standby.snapshot())) >= n
	}) {
		ms, err := cg.New(js).MemberInfo(context.Background(), cg.KindStatic, "ORDERS", "g", "m1")
		standby.mu.Lock()
		tail := standby.raw[max(0, len(standby.raw)-5):]
		standby.mu.Unlock()
		t.Fatalf("not drained: victim acked %d, standby acked %d of %d; member %+v %v; standby's last lines %q",
			len(ackedSeqs(victim.snapshot())), len(ackedSeqs(standby.snapshot())), n, ms, err, tail)
	}

	// The killed batch: the victim's last batch with message lines and no
	// batch line.
	vl := victim.snapshot()
	var k uint64
	closed := map[uint64]bool{}
	for _, l := range vl {
		switch l.Type {
		case "msg":
			k = l.Batch
		case "batch":
			closed[l.Batch] = true
		}
	}
	if k == 0 || closed[k] {
		t.Fatalf("the victim was not killed mid-batch: last batch %d closed %v; lines %d", k, closed[k], len(vl))
	}
	var killed []uint64
	for _, l := range vl {
		if l.Type == "msg" && l.Batch == k {
			killed = append(killed, l.StreamSeq)
		}
	}
	for b := uint64(1); b < k; b++ {
		if !closed[b] {
			t.Errorf("the victim's batch %d has no batch line before the killed batch %d", b, k)
		}
	}
	if len(killed) == 0 || len(killed) > size {
		t.Fatalf("killed batch %d has %d message lines", k, len(killed))
	}

	// The standby's first messages are the killed batch, in order: its
	// first batch starts with them.
	sl := standby.snapshot()
	var first []uint64
	for _, l := range sl {
		if l.Type == "msg" {
			first = append(first, l.StreamSeq)
			if len(first) == len(killed) {
				break
			}
		}
	}
	if !equalSeqs(first, killed) {
		t.Fatalf("the standby began with %v, want the killed batch %d again in order: %v", first, k, killed)
	}
	// Its first batch is the whole killed batch: it starts right after
	// the victim's last acked message and holds at least what the victim
	// had shown of it.
	va := ackedSeqs(vl)
	var sb *batchLine
	for i := range sl {
		if sl[i].Type == "batch" {
			sb = &sl[i]
			break
		}
	}
	if sb == nil || !sb.Acked || sb.FirstSeq != killed[0] || sb.Size < len(killed) || (len(va) > 0 && sb.FirstSeq != va[len(va)-1]+1) {
		t.Fatalf("the standby's first batch %+v is not the whole killed batch (seqs from %d, %d shown; victim acked up to %v)", sb, killed[0], len(killed), va[max(0, len(va)-1):])
	}

	// Counted over both: every published message acked in a batch,
	// the member's stream order kept, duplicates only the killed batch.
	sa := ackedSeqs(sl)
	seen := map[uint64]int{}
	for _, s := range append(append([]uint64{}, va...), sa...) {
		seen[s]++
	}
	pub.mu.Lock()
	var lost []uint64
	for seq := range pub.bySeq {
		if seen[seq] == 0 {
			lost = append(lost, seq)
		}
	}
	pub.mu.Unlock()
	if len(lost) > 0 {
		t.Errorf("%d of %d messages never acked in a batch: %v", len(lost), n, lost)
	}
	dups := 0
	for _, c := range seen {
		dups += c - 1
	}
	// The victim's printed-but-unacked batch is not in va, so a replay
	// shows as the killed batch's seqs in sa only; a duplicate here is a
	// message acked by both.
	if dups > 0 {
		t.Errorf("%d messages acked in batches of both instances", dups)
	}
	replayed := 0
	for _, s := range killed {
		if seen[s] == 1 {
			replayed++
		}
	}
	if replayed != len(killed) {
		t.Errorf("%d of the killed batch's %d messages were acked afterwards", replayed, len(killed))
	}
	order := append(append([]uint64{}, va...), sa...)
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Errorf("stream order broken: seq %d handled after %d (position %d)", order[i], order[i-1], i)
		}
	}
	// Batch lines: sizes within N, first/last seqs matching their lines.
	for _, ls := range [][]batchLine{vl, sl} {
		bySeqs := map[uint64][]uint64{}
		for _, l := range ls {
			if l.Type == "msg" {
				bySeqs[l.Batch] = append(bySeqs[l.Batch], l.StreamSeq)
			}
		}
		for _, l := range ls {
			if l.Type != "batch" || !l.Acked {
				continue
			}
			got := bySeqs[l.Batch]
			if l.Size > size || l.Size != len(got) || l.FirstSeq != got[0] || l.LastSeq != got[len(got)-1] {
				t.Errorf("batch line %+v does not match its message lines %v", l, got)
			}
		}
	}
	t.Logf("SIGKILL mid-batch: %d messages, killed batch %d (%d messages shown, seqs %d-%d) replayed first by the standby as a batch of %d; victim acked %d, standby %d",
		n, k, len(killed), killed[0], killed[len(killed)-1], sb.Size, len(va), len(sa))
}

func equalSeqs(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
