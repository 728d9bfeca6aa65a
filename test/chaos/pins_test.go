package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// "The pinned instance" on either layout. On the member layout a member
// has one pin, held by one of its instances. On the partition layout each
// partition the member owns has its own pin, and the member's instances
// may share them out: the instance a scenario disrupts is then the one
// holding the most of its member's pins, and every partition it held must
// resume on its own.

// held is what one instance holds of its member's pins: on the member
// layout the member's one pin (under slot -1: every partition), on the
// partition layout the pin of each partition it holds.
type held struct {
	p      *proc // nil: the pins of every instance of the member
	member string
	pins   map[int]string
}

// slots are the partitions h holds, in order ([-1] on the member layout).
func (h held) slots() []int { return slices.Sorted(maps.Keys(h.pins)) }

// pinFor is the pin h held over l's partition ("" for none).
func (h held) pinFor(l *line) string {
	if pin, ok := h.pins[-1]; ok {
		return pin
	}
	return h.pins[l.Partition]
}

// owned are the partitions member owns in the group as set up.
func (e *env) owned(member string) []int {
	return cg.StaticConfig{MaxMembers: e.n, Members: e.members}.Assignment().MemberPartitions(member)
}

// inflight is how many messages the instance holding h may have out when
// it is disrupted: the member consumer's max ack pending, or on the
// partition layout each of its partitions' consumers'.
func (e *env) inflight(h held) int { return len(h.pins) * e.maxAckPending }

// groupInflight is how many messages every instance of members together
// may have out (a server restart, the loss of a node).
func (e *env) groupInflight(members int) int {
	if e.layout == "partition" {
		return e.n * e.maxAckPending
	}
	return members * e.maxAckPending
}

// holdings waits until every pin of member is held by a running instance
// that has handled messages under it, and returns what each such instance
// holds.
func (e *env) holdings(member string) map[*proc]held {
	e.t.Helper()
	var out map[*proc]held
	what := "a pinned, busy instance of " + member
	if e.layout == "partition" {
		what = "every partition of " + member + " pinned to a busy instance"
	}
	e.waitFor(what, 20*time.Second, func() bool {
		out = map[*proc]held{}
		if e.layout != "partition" {
			pin := e.serverPin(member)
			p := e.handledUnder(member, pin, func(*line) bool { return true })
			if p == nil {
				return false
			}
			out[p] = held{p: p, member: member, pins: map[int]string{-1: pin}}
			return true
		}
		for _, k := range e.owned(member) {
			pin := e.partitionPin(k)
			p := e.handledUnder(member, pin, func(l *line) bool { return l.Partition == k })
			if p == nil {
				return false
			}
			if _, ok := out[p]; !ok {
				out[p] = held{p: p, member: member, pins: map[int]string{}}
			}
			out[p].pins[k] = pin
		}
		return len(out) > 0
	})
	return out
}

// handledUnder is the running instance of member that handled a message
// matching of under pin, or nil.
func (e *env) handledUnder(member, pin string, of func(*line) bool) *proc {
	if pin == "" {
		return nil
	}
	for _, p := range e.allProcs() {
		if p.member != member || p.exited() {
			continue
		}
		if slices.ContainsFunc(e.procMsgs(p), func(l *line) bool { return l.PinID == pin && of(l) }) {
			return p
		}
	}
	return nil
}

// busiest is the instance of hs holding the most pins (the first by name
// of those holding as many).
func busiest(hs map[*proc]held) held {
	var best held
	for _, h := range hs {
		if best.p == nil || len(h.pins) > len(best.pins) || (len(h.pins) == len(best.pins) && h.p.name < best.p.name) {
			best = h
		}
	}
	return best
}

// isBusiest: p holds as many of hs's pins as any instance.
func isBusiest(hs map[*proc]held, p *proc) bool {
	h, ok := hs[p]
	return ok && len(h.pins) == len(busiest(hs).pins)
}

// mergeHeld merges what the instances of one member hold.
func mergeHeld(hs map[*proc]held) held {
	out := held{pins: map[int]string{}}
	for _, h := range hs {
		out.member = h.member
		maps.Copy(out.pins, h.pins)
	}
	return out
}

// pinned waits until member's pins are held by running, busy instances
// and returns "the pinned instance": the one holding the most of them.
func (e *env) pinned(member string) held {
	e.t.Helper()
	return busiest(e.holdings(member))
}

// pinnedAll waits until member's pins are held by running, busy instances
// and returns them all (what a step-down moves).
func (e *env) pinnedAll(member string) held {
	e.t.Helper()
	return mergeHeld(e.holdings(member))
}

// waitNewPin waits until each of h's slots has had k messages handled
// under one pin other than the one h held, delivered after d started.
func (e *env) waitNewPin(d *disruption, h held, k int, timeout time.Duration) {
	e.t.Helper()
	e.waitFor(h.member+" handling under a new pin after "+d.what, timeout, func() bool {
		count := map[string]int{}
		done := map[int]bool{}
		for _, l := range e.msgs(h.member, d.start) {
			old := h.pinFor(l)
			if old == "" || l.PinID == "" || l.PinID == old {
				continue
			}
			count[l.PinID]++
			if count[l.PinID] >= k {
				done[l.Partition] = true
				if _, ok := h.pins[-1]; ok {
					return true
				}
			}
		}
		return len(done) == len(h.pins)
	})
}

// resumed is how long one slot of a disrupted instance went before its
// messages were handled again under a new pin.
type resumed struct {
	part int // -1: the member's one pin
	took time.Duration
	// raw is from the disruption's start, whatever the traffic; took may
	// start later on the partition layout (see takeover).
	raw time.Duration
}

// where names the slot for a message: "" for a member pin.
func (r resumed) where() string {
	if r.part < 0 {
		return ""
	}
	return fmt.Sprintf(", partition %d", r.part)
}

func tooks(rs []resumed) []time.Duration {
	out := make([]time.Duration, len(rs))
	for i, r := range rs {
		out[i] = r.took
	}
	return out
}

// resumeFig is one measured resume, for the suite's report.
type resumeFig struct {
	fault string
	resumed
}

// takeover measures, for each of h's slots, how long after d started a
// message of it was taken (the handler's start) under a pin other than h's,
// waiting up to timeout for every slot, and records it for the report as
// fault. On the member layout that is the member's first message under a
// new pin, from d's start. On the partition layout it is per partition:
// from d's start when the partition had a message waiting or in hand then,
// else from the first message of it published after, unless that came
// after the one taken (a message in hand of the disrupted instance, handed
// back): a partition's resume is then not its traffic's spacing, which in
// some scenarios is 400 ms.
func (e *env) takeover(d *disruption, h held, fault string, timeout time.Duration) []resumed {
	e.t.Helper()
	first := map[int]time.Time{}
	e.waitFor(h.member+" handling under a new pin after "+d.what, timeout, func() bool {
		clear(first)
		for _, l := range e.msgs(h.member, d.start) {
			old := h.pinFor(l)
			if old == "" || l.PinID == "" || l.PinID == old {
				continue
			}
			slot := l.Partition
			if _, ok := h.pins[-1]; ok {
				slot = -1
			}
			if f, ok := first[slot]; !ok || l.started().Before(f) {
				first[slot] = l.started()
			}
		}
		return len(first) == len(h.pins)
	})
	var out []resumed
	for _, k := range h.slots() {
		r := resumed{part: k, raw: max(first[k].Sub(d.start), 0)}
		r.took = r.raw
		if k >= 0 {
			if avail := e.available(k, d.start); avail.Before(first[k]) {
				r.took = max(first[k].Sub(avail), 0)
			}
		}
		if r.took > failoverLimit && k >= 0 {
			e.t.Logf("%s, partition %d resumed %v after it (%v after the fault); events:\n  %s", d.what, k, r.took.Round(time.Millisecond),
				r.raw.Round(time.Millisecond), strings.Join(e.eventsOf(h.member, k, d.start), "\n  "))
		}
		out = append(out, r)
		e.mu.Lock()
		e.resumes = append(e.resumes, resumeFig{fault: fault, resumed: r})
		e.mu.Unlock()
	}
	return out
}

// available is when partition k had a message for its members after at:
// at itself if one published before was not yet taken (waiting, or in the
// hand of an instance that never printed it), else the first of k
// published after at (the far future when none was).
func (e *env) available(k int, at time.Time) time.Time {
	taken := map[keySeq]time.Time{}
	for _, l := range e.msgs("", time.Time{}) {
		ks := keySeq{l.Key, l.KeySeq}
		if t, ok := taken[ks]; !ok || l.started().Before(t) {
			taken[ks] = l.started()
		}
	}
	e.pub.mu.Lock()
	defer e.pub.mu.Unlock()
	next := at.Add(time.Hour)
	for i, ks := range e.pub.pubKS {
		if partition.PartitionOfKey(ks.key, e.n) != k {
			continue
		}
		pubAt := e.pub.pubAt[i]
		if pubAt.After(at) {
			next = pubAt
			break
		}
		if t, ok := taken[ks]; !ok || !t.Before(at) {
			return at
		}
	}
	return next
}

// failedOver waits until each of h's slots has handled k messages under a
// new pin after d, measures each one's resume (takeover) and, on the
// partition layout, holds every partition to failoverLimit: one instance's
// fault must move each partition it held within it, on its own.
func (e *env) failedOver(d *disruption, h held, fault string, k int, timeout time.Duration) []resumed {
	e.t.Helper()
	e.waitNewPin(d, h, k, timeout)
	rs := e.takeover(d, h, fault, timeout)
	if e.layout == "partition" {
		for _, r := range rs {
			if r.took > failoverLimit {
				e.t.Errorf("%s%s: resumed %v after it (%v after the fault), want at most %v", d.what, r.where(),
					r.took.Round(time.Millisecond), r.raw.Round(time.Millisecond), failoverLimit)
			}
		}
	}
	return rs
}

// resumeSummary is the summary line's account of e's resumes per fault.
func (e *env) resumeSummary() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	by := map[string][]time.Duration{}
	var faults []string
	for _, r := range e.resumes {
		if _, ok := by[r.fault]; !ok {
			faults = append(faults, r.fault)
		}
		by[r.fault] = append(by[r.fault], r.took)
	}
	var s []string
	for _, f := range faults {
		med, mx := medianMax(by[f])
		s = append(s, fmt.Sprintf("resume[%s]=n%d/med %v/max %v", strings.ReplaceAll(f, " ", ""), len(by[f]), med.Round(time.Millisecond), mx.Round(time.Millisecond)))
	}
	return strings.Join(s, " ")
}

// partsNote names the partitions h holds, for a disruption's description
// ("" on the member layout, where the pin covers them all).
func (h held) partsNote() string {
	if _, ok := h.pins[-1]; ok {
		return ""
	}
	return fmt.Sprintf(" holding %v", h.slots())
}
