package chaos

import (
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// loadedGapLimit is the most a partition of a frozen pinned instance may go
// without a message under load: from the last message the frozen instance
// handled to the first of that partition the standby handled.
var loadedGapLimit = time.Second

// withLanes runs every instance of e with --concurrency n (lanes, max ack
// pending 4 × n), whatever CG_CHAOS_CONCURRENCY says.
func (e *env) withLanes(n int) {
	if concurrency > 1 {
		return // newEnv has given every member lanes already
	}
	e.extra = append(e.extra, "--concurrency", strconv.Itoa(n))
	e.maxAckPending = 4 * n
}

// partitionGaps measures, for each partition of member that p handled,
// how long it went without a message: from the last message p handled to
// the first of that partition another instance handled after at, waiting
// up to timeout for every partition to have one.
func (e *env) partitionGapsAfter(p *proc, member string, parts []int, at time.Time, timeout time.Duration) map[int]time.Duration {
	e.t.Helper()
	gaps := map[int]time.Duration{}
	e.waitFor("every partition of "+p.name+" handled by another instance", timeout, func() bool {
		var last time.Time
		for _, l := range e.procMsgs(p) {
			if l.at.After(last) {
				last = l.at
			}
		}
		first := map[int]time.Time{}
		for _, l := range e.msgs(member, at) {
			if l.proc == p {
				continue
			}
			if f, ok := first[l.Partition]; !ok || l.at.Before(f) {
				first[l.Partition] = l.at
			}
		}
		for _, part := range parts {
			f, ok := first[part]
			if !ok {
				return false
			}
			gaps[part] = f.Sub(last)
		}
		return true
	})
	return gaps
}

// Under load: three members of two instances each, lanes on (concurrency
// 4), a publisher over every partition. The pinned instance of m1 is
// frozen (SIGSTOP) three times with its window full; each of its
// partitions must be handled by the standby within loadedGapLimit of the
// last message the frozen instance handled. m2 and m3 are never touched:
// a pin change of theirs is a flap.
func TestLoadedFreezeWithLanes(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	e := newEnv(t, "loaded-freeze", s.ClientURL(), envOpts{kind: "static", sleep: "5ms", limit: 90 * time.Second})
	e.withLanes(4)
	members := []string{"m1", "m2", "m3"}
	e.setupStatic(6, 1, members...)
	for _, m := range members {
		e.startJoined(m)
		e.startJoined(m)
	}
	e.publish(4, 4*time.Millisecond)
	e.waitHandled("warm-up", e.began, 40, 30*time.Second, members...)
	e.steady(time.Now(), 40, members...)
	var parts []int
	for _, l := range e.msgs("m1", e.began) {
		if !slices.Contains(parts, l.Partition) {
			parts = append(parts, l.Partition)
		}
	}
	slices.Sort(parts)
	type gap struct {
		round, part int
		d           time.Duration
	}
	var gaps []gap
	var redelivered []string
	later := 0 // third or later deliveries after any freeze
	for round := range 3 {
		h := e.pinned("m1")
		p := h.p
		e.busyWith(p, 60)
		d := e.disrupt("SIGSTOP "+p.name+h.partsNote()+" under load", e.inflight(h), "m1")
		if err := p.signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if e.layout == "partition" {
			// Only the partitions it held stop, each from its own last
			// message.
			frozen := h.slots()
			pg, _ := e.gapsAfter(p, "m1", frozen, d.start, 10*time.Second)
			for i, part := range frozen {
				gaps = append(gaps, gap{round, part, pg[i]})
			}
		} else {
			pg := e.partitionGapsAfter(p, "m1", parts, d.start, 10*time.Second)
			for _, part := range parts {
				gaps = append(gaps, gap{round, part, pg[part]})
			}
		}
		e.takeover(d, h, "SIGSTOP, lanes", 10*time.Second)
		// What the frozen instance held is handed back once: its next
		// delivery is its second. Asserted for the first freeze only:
		// in later ones a message may also have been handed back by the
		// instance continued after the freeze before.
		for _, l := range e.msgs("m1", d.start) {
			if l.proc != p && l.Delivered > 2 {
				later++
				if round == 0 {
					redelivered = append(redelivered, fmt.Sprintf("%s#%d delivered %d times", l.Key, l.KeySeq, l.Delivered))
				}
			}
		}
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
		e.steady(d.end, 20, members...)
	}
	var ds []time.Duration
	for _, g := range gaps {
		ds = append(ds, g.d)
	}
	med, mx := medianMax(ds)
	e.finish(members, func() string {
		return fmt.Sprintf("partition_gaps=%s (median %v, max %v) third_deliveries=%d", durations(ds), med.Round(time.Millisecond), mx.Round(time.Millisecond), later)
	})
	if len(redelivered) > 0 {
		t.Errorf("after the first freeze the standby handled %d message(s) on their third delivery or later: %v", len(redelivered), firstN(redelivered, 10))
	}
	for _, g := range gaps {
		if g.d > loadedGapLimit {
			t.Errorf("freeze %d, partition %d: %v without a message, want at most %v", g.round+1, g.part, g.d, loadedGapLimit)
		}
	}
}
