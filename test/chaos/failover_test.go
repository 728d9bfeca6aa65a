package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The fast-failover scenarios: a frozen (SIGSTOP) and a black-holed pinned
// instance must be replaced within a second of the freeze, a standby that
// joined just before the pinned instance was killed must not wait the
// pinned TTL, and healthy instances, idle or starved of CPU, must keep
// their pin.

// failoverLimit is the most a freeze or a black hole may take from its
// start to the first message handled under a new pin. A concurrent member
// (CG_CHAOS_CONCURRENCY) adds its new-pin barrier, which waits up to
// 300 ms for the dead instance's unacked messages to come again before
// any key goes on (docs/reliability.md): TestMain allows that much more.
var failoverLimit = time.Second

// fenceThreshold is cg's default: a pinned instance doubts its pin after
// this long frozen or without hearing from the server. An ack it sent
// before then is in flight, not stale.
const fenceThreshold = 300 * time.Millisecond

// startVia runs one more instance of member connected through url.
func (e *env) startVia(member, url string) *proc {
	e.t.Helper()
	e.mu.Lock()
	e.next[member]++
	name := fmt.Sprintf("%s#%d", member, e.next[member])
	e.mu.Unlock()
	args := append([]string{e.kind, "consume", streamName, groupName, member}, e.memberArgs()...)
	p, err := startProc(name, member, url, e.cfgDir, args)
	if err != nil {
		e.t.Fatalf("start %s: %v", name, err)
	}
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	e.waitFor(p.name+" joined", 20*time.Second, func() bool {
		for _, l := range p.snapshot() {
			if l.isEvent("joined") {
				return true
			}
		}
		return false
	})
	return p
}

// busyWith waits until p takes a message of a fresh burst, so that the
// disruption finds it with a message in hand.
func (e *env) busyWith(p *proc, n int) {
	e.t.Helper()
	before := e.pub.published()
	e.pub.sendBurst(n)
	e.waitFor("the burst published", 10*time.Second, func() bool { return e.pub.published() >= before+n })
	burst := time.Now()
	e.waitFor(p.name+" busy with the backlog", 10*time.Second, func() bool {
		for _, l := range e.procMsgs(p) {
			if l.at.After(burst) {
				return true
			}
		}
		return false
	})
}

// staleAcks counts, over the lines p printed after since, the messages it
// acked under a pin of h's: those whose ack may have left before it
// could know (inFlight says which) are in flight, the others are stale
// acks.
func staleAcks(p *proc, h held, since time.Time, inFlight func(*line) bool) (n int, stale []string) {
	for _, l := range p.snapshot() {
		if !l.isMsg() || !l.at.After(since) || l.PinID != h.pinFor(l) || !l.Acked {
			continue
		}
		if inFlight(l) {
			n++
			continue
		}
		stale = append(stale, p.name+": "+l.raw)
	}
	return n, stale
}

func durations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Round(time.Millisecond).String())
	}
	return strings.Join(s, ",")
}

// Frozen: SIGSTOP of the pinned instance, with a message in hand. A
// standby must be handling under a new pin within a second; the frozen
// instance, continued 1.5s later, fences and acks nothing stale.
func TestFrozenPinnedFailsOverWithinASecond(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	const work = 25 * time.Millisecond
	e := newEnv(t, "frozen", s.ClientURL(), envOpts{kind: "static", sleep: work.String(), limit: 60 * time.Second})
	e.setupStatic(4, 1, "m1")
	e.startJoined("m1")
	e.startJoined("m1")
	e.publish(3, 50*time.Millisecond)
	e.waitHandled("warm-up", e.began, 10, 30*time.Second, "m1")
	e.steady(time.Now(), 10, "m1")
	var rounds [][]resumed
	inFlight, frozenPins := 0, 0
	var stale []string
	for range 3 {
		h := e.pinned("m1")
		p := h.p
		frozenPins += len(h.pins)
		e.busyWith(p, 12)
		d := e.disrupt("SIGSTOP "+p.name+h.partsNote(), e.inflight(h), "m1")
		if err := p.signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		stopped := time.Now()
		rounds = append(rounds, e.takeover(d, h, "SIGSTOP", 10*time.Second))
		e.waitFor("the freeze to last 1.5s", 5*time.Second, func() bool { return time.Since(d.start) >= 1500*time.Millisecond })
		cont := time.Now()
		if err := p.signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		e.waitFor(p.name+" fenced or lost its pin after SIGCONT", 10*time.Second, func() bool {
			for _, l := range p.snapshot() {
				if l.at.After(cont) && (l.isEvent("fenced") || l.isEvent("pin_lost")) {
					return true
				}
			}
			return false
		})
		e.recovered(d)
		n, st := staleAcks(p, h, cont, func(l *line) bool { return l.ackMayHaveLeft(stopped, work) })
		inFlight += n
		stale = append(stale, st...)
		e.steady(d.end, 10, "m1")
	}
	e.finish([]string{"m1"}, func() string {
		return fmt.Sprintf("takeover=%s stale_acks=%d in_flight_acks=%d", durations(allTooks(rounds)), len(stale), inFlight)
	})
	for i, rs := range rounds {
		for _, r := range rs {
			if r.took > failoverLimit {
				t.Errorf("freeze %d%s: the standby took over %v after SIGSTOP, want at most %v", i+1, r.where(), r.took, failoverLimit)
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("after SIGCONT the frozen instance acked %d message(s) under the pin it had lost:\n%s", len(stale), strings.Join(stale, "\n"))
	}
	// A serial instance has at most one ack in flight per pin it holds
	// (on the partition layout each partition runs its own handler).
	if inFlight > frozenPins {
		t.Errorf("%d acks in flight at a freeze, more than one per pin frozen (%d)", inFlight, frozenPins)
	}
}

// allTooks lists every round's resumes.
func allTooks(rounds [][]resumed) []time.Duration {
	var out []time.Duration
	for _, rs := range rounds {
		out = append(out, tooks(rs)...)
	}
	return out
}

// Black-holed: the pinned instance's connection goes through a proxy that
// stops forwarding both ways without closing. A standby must be handling
// under a new pin within a second; the cut-off instance fences, and once
// the proxy forwards again it acks nothing stale.
func TestBlackholedPinnedFailsOverWithinASecond(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	e := newEnv(t, "black-hole", s.ClientURL(), envOpts{kind: "static", sleep: "25ms", limit: 60 * time.Second})
	e.setupStatic(4, 1, "m1")
	e.publish(3, 50*time.Millisecond)
	var rounds [][]resumed
	inFlight, cutPins := 0, 0
	var stale []string
	var standby *proc
	for round := range 2 {
		bh := natstest.NewBlackhole(t, s.Addr().String())
		cut := e.startVia("m1", bh.URL())
		if round == 0 {
			standby = e.startJoined("m1")
		}
		// Only the proxied instance and the standby stay, so that a
		// step-down can only move the pin from one to the other.
		for _, p := range e.allProcs() {
			if p == cut || p == standby || p.exited() {
				continue
			}
			d := e.disrupt("SIGTERM "+p.name, 0, "m1")
			if err := p.signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if ok, _ := p.wait(15 * time.Second); !ok {
				t.Fatalf("%s did not stop on SIGTERM", p.name)
			}
			e.pinned("m1")
			e.recovered(d)
		}
		// Move the pin onto the proxied instance: on the partition layout,
		// until it holds as many of m1's partitions as the standby (each
		// step-down re-pins every partition to whichever instance's pull
		// the server takes first).
		var h held
		for try := 0; ; try++ {
			hs := e.holdings("m1")
			if isBusiest(hs, cut) {
				h = hs[cut]
				break
			}
			if try == 10 {
				t.Fatalf("the pin never moved onto %s", cut.name)
			}
			was := mergeHeld(hs)
			d := e.disrupt("step-down onto "+cut.name, e.inflight(was), "m1")
			e.mustCLI("static", "step-down", streamName, groupName, "m1")
			e.waitNewPin(d, was, 1, 10*time.Second)
			e.recovered(d)
		}
		cutPins += len(h.pins)
		e.steady(time.Now(), 5, "m1")
		e.busyWith(cut, 12)
		d := e.disrupt("black hole "+cut.name+h.partsNote(), e.inflight(h), "m1")
		bh.Hold()
		rounds = append(rounds, e.takeover(d, h, "black hole", 10*time.Second))
		e.waitFor(cut.name+" fenced while cut off", 10*time.Second, func() bool {
			for _, l := range cut.snapshot() {
				if l.at.After(d.start) && l.isEvent("fenced") {
					return true
				}
			}
			return false
		})
		e.waitFor("the black hole to last 1.5s", 5*time.Second, func() bool { return time.Since(d.start) >= 1500*time.Millisecond })
		bh.Release()
		e.recovered(d)
		e.steady(d.end, 10, "m1")
		n, st := staleAcks(cut, h, d.start, func(l *line) bool { return l.started().Before(d.start.Add(fenceThreshold)) })
		inFlight += n
		stale = append(stale, st...)
	}
	e.finish([]string{"m1"}, func() string {
		return fmt.Sprintf("takeover=%s stale_acks=%d in_flight_acks=%d", durations(allTooks(rounds)), len(stale), inFlight)
	})
	for i, rs := range rounds {
		for _, r := range rs {
			if r.took > failoverLimit {
				t.Errorf("black hole %d%s: the standby took over %v after the cut, want at most %v", i+1, r.where(), r.took, failoverLimit)
			}
		}
	}
	if len(stale) > 0 {
		t.Errorf("the black-holed instance acked %d message(s) under the pin it had lost:\n%s", len(stale), strings.Join(stale, "\n"))
	}
	// A serial member has at most the message in hand's ack in flight when
	// the link is cut; a concurrent one, one per handler call at once; on
	// the partition layout, that much per partition cut.
	perCut := max(concurrency, 1)
	if inFlight > perCut*cutPins {
		t.Errorf("%d acks in flight at a black hole, more than %d per pin cut off (%d)", inFlight, perCut, cutPins)
	}
}

// Just joined: a standby joins 100ms before the pinned instance is killed
// (kill -9): it must take over well within a second, not after the pinned
// TTL.
func TestJustJoinedStandbyTakesOver(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	e := newEnv(t, "just-joined", s.ClientURL(), envOpts{kind: "static", limit: 60 * time.Second})
	e.setupStatic(4, 1, "m1")
	e.startJoined("m1")
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1")
	var rounds [][]resumed
	for range 3 {
		h := e.pinned("m1")
		e.startJoined("m1")
		joined := time.Now()
		e.waitFor("100ms since the standby joined", time.Second, func() bool { return time.Since(joined) >= 100*time.Millisecond })
		d := e.disrupt("kill -9 "+h.p.name+h.partsNote()+" just after a standby joined", e.inflight(h), "m1")
		e.kill(h.p)
		rounds = append(rounds, e.takeover(d, h, "kill -9, just joined", 10*time.Second))
		e.recovered(d)
		e.steady(d.end, 20, "m1")
	}
	e.finish([]string{"m1"}, func() string { return "takeover=" + durations(allTooks(rounds)) })
	for i, rs := range rounds {
		for _, r := range rs {
			if r.took > failoverLimit {
				t.Errorf("kill %d%s: the just-joined standby took over %v after the kill, want at most %v", i+1, r.where(), r.took, failoverLimit)
			}
		}
	}
}

// hogEnv names the environment variable that makes the test binary a CPU
// hog (see TestMain): it spins for that long and exits.
const hogEnv = "CG_CHAOS_HOG"

// hog spins two processes (one per core of the reference machine) for d;
// CG_CHAOS_HOGS=n runs n instead, to look for the breaking point.
func hog(t *testing.T, d time.Duration) {
	t.Helper()
	n := 2
	if v, err := strconv.Atoi(os.Getenv("CG_CHAOS_HOGS")); err == nil && v > 0 && v <= 32 {
		n = v
	}
	for range n {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), hogEnv+"="+d.String())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
}

// spin is a hog process's life: busy loops on every core for d.
func spin(d time.Duration) {
	until := time.Now().Add(d)
	done := make(chan struct{})
	for range 4 {
		go func() {
			x := 0
			for time.Now().Before(until) {
				for i := 0; i < 1e6; i++ {
					x += i
				}
			}
			_ = x
			done <- struct{}{}
		}()
	}
	for range 4 {
		<-done
	}
}

// No false failovers: two healthy instances of a member, with traffic,
// for 6s idle and then 8s under CPU hogs that keep both cores busy. No
// pin may change (finish counts any as a flap).
func TestNoFalseFailovers(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	e := newEnv(t, "no-false-failover", s.ClientURL(), envOpts{kind: "static", limit: 60 * time.Second})
	e.setupStatic(4, 1, "m1")
	e.startJoined("m1")
	e.startJoined("m1")
	e.publish(4, 20*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1")
	idle := time.Now()
	e.waitFor("6s idle", 10*time.Second, func() bool { return time.Since(idle) >= 6*time.Second })
	idleChanges := pinsSince(e, idle)
	loaded := time.Now()
	hog(t, 8*time.Second)
	e.waitFor("8s loaded", 15*time.Second, func() bool { return time.Since(loaded) >= 8*time.Second })
	loadedChanges := pinsSince(e, loaded)
	handledLoaded := len(e.msgs("m1", loaded))
	e.finish([]string{"m1"}, func() string {
		return fmt.Sprintf("idle_pin_changes=%d loaded_pin_changes=%d handled_loaded=%d", idleChanges, loadedChanges, handledLoaded)
	})
}

// pinsSince counts the "pinned" events every instance printed after since.
func pinsSince(e *env, since time.Time) int {
	n := 0
	for _, p := range e.allProcs() {
		for _, l := range p.snapshot() {
			if l.at.After(since) && l.isEvent("pinned") {
				n++
			}
		}
	}
	return n
}
