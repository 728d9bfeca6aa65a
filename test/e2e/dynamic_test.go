package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// dynProc is one `cg elastic consume … --dynamic` process.
type dynProc struct {
	name    string
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	handled []dynMsg
	done    chan error
}

type dynMsg struct {
	Type      string `json:"type"`
	Partition int    `json:"partition"`
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	at        time.Time
}

func startDynamic(t *testing.T, url, member string, args ...string) *dynProc {
	t.Helper()
	p := &dynProc{name: member, done: make(chan error, 1)}
	p.cmd = exec.Command(cgBin, append([]string{"elastic", "consume", "ORDERS", "g", member, "--json", "--sleep", "1ms", "--dynamic", "--session-timeout", "2s"}, args...)...)
	p.cmd.Env = append(os.Environ(), "NATS_URL="+url)
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = os.Stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l dynMsg
			if json.Unmarshal(sc.Bytes(), &l) != nil || l.Type != "msg" {
				continue
			}
			l.at = time.Now()
			p.mu.Lock()
			p.handled = append(p.handled, l)
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	return p
}

func (p *dynProc) msgs() []dynMsg {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.handled)
}

func (p *dynProc) signal(t *testing.T, sig syscall.Signal) time.Time {
	t.Helper()
	at := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit after %v", p.name, sig)
	}
	return at
}

// servedAfter reports when every partition of parts was first handled by
// one of procs after t (zero while some is not).
func servedAfter(parts []int, t time.Time, procs ...*dynProc) time.Time {
	first := map[int]time.Time{}
	for _, p := range procs {
		for _, m := range p.msgs() {
			if m.at.After(t) && slices.Contains(parts, m.Partition) {
				if f, ok := first[m.Partition]; !ok || m.at.Before(f) {
					first[m.Partition] = m.at
				}
			}
		}
	}
	var last time.Time
	for _, p := range parts {
		f, ok := first[p]
		if !ok {
			return time.Time{}
		}
		if f.After(last) {
			last = f
		}
	}
	return last
}

// Members that come and go as processes: started, each adds itself; a
// SIGTERM of its only process drops it at once, its partitions served by
// the others; a SIGKILL drops it after its session timeout. Nothing
// published is left unhandled. The figures docs/dynamic.md gives come
// from this test's log.
func TestDynamicMembersFollowProcesses(t *testing.T) {
	for _, layout := range []cg.Layout{cg.LayoutMember, cg.LayoutPartition} {
		t.Run(string(layout), func(t *testing.T) {
			s, js, _ := clitest.Server(t)
			url := s.ClientURL()
			ctx := context.Background()
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
				t.Fatal(err)
			}
			c := cg.New(js)
			if _, err := c.CreateElastic(ctx, "ORDERS", "g", cg.ElasticConfig{MaxMembers: 12, Layout: layout,
				PartitioningFilters: []cg.PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}); err != nil {
				t.Fatal(err)
			}
			members := func() []string {
				cfg, err := c.ElasticConfig(ctx, "ORDERS", "g")
				if err != nil {
					t.Fatal(err)
				}
				names := cfg.MemberNames()
				slices.Sort(names)
				return names
			}
			owned := func(m string) []int {
				cfg, err := c.ElasticConfig(ctx, "ORDERS", "g")
				if err != nil {
					t.Fatal(err)
				}
				return cfg.Assignment().MemberPartitions(m)
			}
			// When each membership was first stored, from a watch of the
			// group's entry: polling would add its own delay.
			var cmu sync.Mutex
			changed := map[string]time.Time{}
			kv, err := js.KeyValue(ctx, cg.KindElastic.LayoutBucket(layout))
			if err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			w, err := kv.Watch(wctx, "ORDERS.g")
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				prev := ""
				for e := range w.Updates() {
					if e == nil || e.Operation() != jetstream.KeyValuePut {
						continue
					}
					var cfg cg.ElasticConfig
					if json.Unmarshal(e.Value(), &cfg) != nil {
						continue
					}
					names := cfg.MemberNames()
					slices.Sort(names)
					cmu.Lock()
					if k := fmt.Sprint(names); k != prev {
						changed[k], prev = time.Now(), k // the latest change to it
					}
					cmu.Unlock()
				}
			}()
			// waitMembers waits until the watch saw the membership become
			// want after since: the same set seen earlier (a alone, at the
			// start) must not stand in for a change the watch has not yet
			// delivered, though a direct read already shows it.
			waitMembers := func(what string, since time.Time, want ...string) time.Time {
				var at time.Time
				clitest.Eventually(t, 30*time.Second, fmt.Sprintf("%s: members %v", what, want), func() bool {
					cmu.Lock()
					defer cmu.Unlock()
					var ok bool
					at, ok = changed[fmt.Sprint(want)]
					return ok && !at.Before(since) && slices.Equal(members(), want)
				})
				return at
			}
			stopPub := make(chan struct{})
			pubDone := make(chan struct{})
			go func() {
				defer close(pubDone)
				for i := 0; ; i++ {
					select {
					case <-stopPub:
						return
					case <-time.After(2 * time.Millisecond):
					}
					if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%02d", i%36), nil); err != nil {
						t.Errorf("publish: %v", err)
						return
					}
				}
			}()

			a := startDynamic(t, url, "a")
			waitMembers("a added itself", a.started, "a")
			clitest.Eventually(t, 30*time.Second, "a handles", func() bool { return len(a.msgs()) > 0 })
			startToFirst := a.msgs()[0].at.Sub(a.started)
			// info tells a is dynamic and when it was last seen.
			out, err := exec.Command(cgBin, "elastic", "info", "ORDERS", "g", "--json", "--server", url).Output()
			if err != nil {
				t.Fatal(err)
			}
			var gi struct {
				Members []struct {
					Member   string    `json:"member"`
					Dynamic  bool      `json:"dynamic"`
					LastSeen time.Time `json:"last_seen"`
				} `json:"members"`
			}
			if err := json.Unmarshal(out, &gi); err != nil || len(gi.Members) != 1 || !gi.Members[0].Dynamic || gi.Members[0].LastSeen.IsZero() {
				t.Fatalf("info --json of a dynamic member: %v\n%s", err, out)
			}
			text, err := exec.Command(cgBin, "elastic", "info", "ORDERS", "g", "--server", url).Output()
			if err != nil || !strings.Contains(string(text), "Dynamic:") || !strings.Contains(string(text), "a seen ") {
				t.Fatalf("info of a dynamic member lacks its Dynamic line: %v\n%s", err, text)
			}
			b := startDynamic(t, url, "b")
			cc := startDynamic(t, url, "c")
			waitMembers("b and c added themselves", b.started, "a", "b", "c")
			clitest.Eventually(t, 30*time.Second, "b and c handle", func() bool { return len(b.msgs()) > 0 && len(cc.msgs()) > 0 })

			bParts := owned("b")
			stopAt := b.signal(t, syscall.SIGTERM)
			droppedB := waitMembers("SIGTERM dropped b", stopAt, "a", "c")
			var servedB time.Time
			clitest.Eventually(t, 30*time.Second, "b's partitions served by a and c", func() bool {
				servedB = servedAfter(bParts, stopAt, a, cc)
				return !servedB.IsZero()
			})

			cParts := owned("c")
			killAt := cc.signal(t, syscall.SIGKILL)
			droppedC := waitMembers("c reaped after its session timeout", killAt, "a")
			var servedC time.Time
			clitest.Eventually(t, 30*time.Second, "c's partitions served by a", func() bool {
				servedC = servedAfter(cParts, killAt, a)
				return !servedC.IsZero()
			})
			if d := droppedC.Sub(killAt); d < time.Second { // its last write may have come a starved refresh (up to about 1s) before the kill
				t.Fatalf("c dropped %v after SIGKILL, before its 2s session timeout", d)
			}

			close(stopPub)
			<-pubDone
			ws, err := js.Stream(ctx, cg.WorkStreamName("ORDERS", "g"))
			if err != nil {
				t.Fatal(err)
			}
			clitest.Eventually(t, 60*time.Second, "the work stream drained", func() bool {
				si, err := ws.Info(ctx)
				return err == nil && si.State.Msgs == 0 && si.Sources[0].Lag == 0
			})
			si, _ := ws.Info(ctx)
			seen := map[uint64]bool{}
			printed := func() int {
				for _, p := range []*dynProc{a, b, cc} {
					for _, m := range p.msgs() {
						seen[m.StreamSeq] = true
					}
				}
				return len(seen)
			}
			// c's last message may have been acked and not yet printed
			// when it was killed: at most its one message in flight. a
			// prints a line once the server confirmed its ack, the same
			// moment the work stream lets the message go: its last lines
			// may reach the test after the drain was seen.
			deadline := time.Now().Add(10 * time.Second)
			for int(si.State.LastSeq)-printed() > 1 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if missing := int(si.State.LastSeq) - printed(); missing > 1 {
				var which []uint64
				for seq := uint64(1); seq <= si.State.LastSeq; seq++ {
					if !seen[seq] {
						which = append(which, seq)
					}
				}
				t.Fatalf("%d of %d messages never printed as handled: work stream sequences %v (c killed at %s)", missing, si.State.LastSeq, which, killAt.Format("15:04:05.000"))
			}
			aStop := a.signal(t, syscall.SIGTERM)
			waitMembers("a's SIGTERM left the group empty", aStop)
			t.Logf("figures: process start -> first message %v; SIGTERM -> dropped %v, -> its partitions served elsewhere %v; SIGKILL -> dropped %v (session timeout 2s), -> its partitions served elsewhere %v; %d messages",
				startToFirst.Round(time.Millisecond), droppedB.Sub(stopAt).Round(time.Millisecond), servedB.Sub(stopAt).Round(time.Millisecond),
				droppedC.Sub(killAt).Round(time.Millisecond), servedC.Sub(killAt).Round(time.Millisecond), si.State.LastSeq)
		})
	}
}
