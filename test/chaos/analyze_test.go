package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// obs is one handled message, from a "msg" line.
type obs struct {
	proc      string
	member    string
	partition int
	key       string
	seq       uint64
	sseq      uint64
	delivered uint64
	pin       string
	acked     bool
	at        time.Time // when the test read its line (the handler was done)
	start     time.Time // when the handler took it
	idx       int       // position in its process's output
}

// pinObs is a "pinned" event.
type pinObs struct {
	proc, member, pin string
	at                time.Time
	partition         int // the partition it pins (partition layout), else -1
}

// disruption is something a scenario did to its members, and the window in
// which the pin changes it causes are expected.
type disruption struct {
	what    string
	members []string // members whose pin it may move
	start   time.Time
	end     time.Time // when the test saw the members recover
	// inflight is how many messages it may make be handled twice: the
	// messages in flight at the affected members (max-ack-pending each).
	inflight int
}

// kill is an instance killed with SIGKILL: it may have acked a message it
// did not live to print.
type kill struct {
	proc, member string
	at           time.Time
}

type input struct {
	published map[string]uint64 // last key-seq published per key (1…last all published)
	sseq      map[keySeq]uint64 // stream sequence of each published message (static streams)
	msgs      []obs
	pins      []pinObs
	disr      []*disruption
	kills     []kill
	// grace extends each disruption's window past its end.
	grace time.Duration
	// partitionGaps measures handover gaps per partition (from the last
	// message one member handled to the first the next handled) instead of
	// per member pin: in an elastic group partitions move between members.
	partitionGaps bool
	// partitionPins: the group has the partition layout, so a member holds
	// one pin per partition: pin changes are counted per member and
	// partition, and a killed instance may have acked one message unprinted
	// on each partition it held.
	partitionPins bool
	// publishedBetween, when set, says how much traffic a long gap saw.
	publishedBetween func(a, b time.Time) int
	// eps: a first handling taken less than eps after a later key-seq was
	// taken by another process is counted as jitter of the two output
	// pipes, not as an order violation.
	eps time.Duration
}

type result struct {
	published   int
	handled     int // msg lines
	distinct    int
	lost        []keySeq
	vouched     []keySeq // acked by a killed instance before it could print
	violations  []string
	jitter      int
	dups        int
	republished int // the same key/seq stored twice (a publish retry not deduplicated)
	bound       int
	unkeyed     int
	pinChanges  int
	flaps       []string
	gaps        []time.Duration
	longGaps    []string // the gaps over a second, described
	worstGap    [2]time.Time
}

func analyze(in input) result {
	var r result
	for _, n := range in.published {
		r.published += int(n)
	}
	for i := range in.msgs {
		if in.msgs[i].start.IsZero() {
			in.msgs[i].start = in.msgs[i].at
		}
	}
	// Handled in the order the handlers took the messages (each process's
	// own output order is exact).
	msgs := slices.Clone(in.msgs)
	sort.SliceStable(msgs, func(i, j int) bool {
		if msgs[i].proc == msgs[j].proc {
			return msgs[i].idx < msgs[j].idx
		}
		return msgs[i].start.Before(msgs[j].start)
	})
	r.handled = len(msgs)

	first := map[keySeq]*obs{}
	copies := map[keySeq]map[uint64]bool{} // stream sequences seen per key/seq
	firsts := map[string][]*obs{}          // first handlings per key, in order
	keyMember := map[string]string{}       // the stream order a key's messages share
	order := func(o *obs) string {
		if in.partitionPins {
			return fmt.Sprintf("%s/p%d", o.member, o.partition)
		}
		return o.member
	}
	for i := range msgs {
		o := &msgs[i]
		if o.key == "" || o.seq == 0 {
			r.unkeyed++
			continue
		}
		keyMember[o.key] = order(o)
		ks := keySeq{o.key, o.seq}
		if _, ok := first[ks]; ok {
			if copies[ks][o.sseq] {
				r.dups++
			} else {
				copies[ks][o.sseq] = true
				r.republished++
			}
			continue
		}
		first[ks] = o
		copies[ks] = map[uint64]bool{o.sseq: true}
		list := firsts[o.key]
		violated, near := false, false
		for i := len(list) - 1; i >= 0 && list[i].seq > o.seq; i-- {
			h := list[i]
			if h.proc == o.proc || o.start.Sub(h.start) > in.eps {
				violated = true
				r.violations = append(r.violations, fmt.Sprintf("%s taken by %s at %s after %s#%d by %s at %s",
					ks, o.proc, o.start.Format("15:04:05.000"), o.key, h.seq, h.proc, h.start.Format("15:04:05.000")))
				break
			}
			near = true
		}
		if !violated && near {
			r.jitter++
		}
		firsts[o.key] = append(list, o)
	}
	r.distinct = len(first)

	var missing []keySeq
	for key, n := range in.published {
		for s := uint64(1); s <= n; s++ {
			if first[keySeq{key, s}] == nil {
				missing = append(missing, keySeq{key, s})
			}
		}
	}
	// A killed instance may have acked the message in hand and died before
	// printing it; the server then never redelivers it. That message is the
	// one after the last the instance printed, in its member's stream order.
	if len(in.kills) > 0 && len(missing) > 0 {
		bySSeq := map[uint64]keySeq{}
		memberSeqs := map[string][]uint64{}
		for ks, s := range in.sseq {
			bySSeq[s] = ks
			if m := keyMember[ks.key]; m != "" {
				memberSeqs[m] = append(memberSeqs[m], s)
			}
		}
		for _, ss := range memberSeqs {
			slices.Sort(ss)
		}
		miss := map[keySeq]bool{}
		for _, ks := range missing {
			miss[ks] = true
		}
		for _, k := range in.kills {
			last := map[string]uint64{} // per stream order the instance printed in
			for i := range msgs {
				o := &msgs[i]
				if o.proc == k.proc && o.sseq > last[order(o)] {
					last[order(o)] = o.sseq
				}
			}
			if _, ok := last[k.member]; !ok && !in.partitionPins {
				last[k.member] = 0 // printed nothing: its first message may be the one
			}
			if in.partitionPins {
				// Pinned on a partition but killed before it printed any
				// message of it: the one after the last any instance took
				// there before the kill may be the one.
				for _, p := range in.pins {
					ord := fmt.Sprintf("%s/p%d", p.member, p.partition)
					if _, ok := last[ord]; ok || p.proc != k.proc || p.partition < 0 || p.at.After(k.at) {
						continue
					}
					last[ord] = 0
					for i := range msgs {
						if o := &msgs[i]; order(o) == ord && o.start.Before(k.at) && o.sseq > last[ord] {
							last[ord] = o.sseq
						}
					}
				}
			}
			for ord, l := range last {
				ss := memberSeqs[ord]
				i, _ := slices.BinarySearch(ss, l+1)
				if i < len(ss) {
					if ks := bySSeq[ss[i]]; miss[ks] {
						delete(miss, ks)
						r.vouched = append(r.vouched, ks)
					}
				}
			}
		}
		missing = missing[:0]
		for ks := range miss {
			missing = append(missing, ks)
		}
	}
	sort.Slice(missing, func(i, j int) bool {
		if missing[i].key != missing[j].key {
			return missing[i].key < missing[j].key
		}
		return missing[i].seq < missing[j].seq
	})
	r.lost = missing

	for _, d := range in.disr {
		r.bound += d.inflight
	}

	// Pins: a member's pin changes when a pin id it has not had before
	// first shows (a "pinned" event or a message delivered under it). Each
	// change must fall in the window of a disruption of that member.
	type pinSeen struct {
		pin      string
		firstAt  time.Time
		firstMsg time.Time
	}
	byMember := map[string]map[string]*pinSeen{}
	note := func(member, pin string, at time.Time, isMsg bool) {
		if pin == "" {
			return
		}
		if byMember[member] == nil {
			byMember[member] = map[string]*pinSeen{}
		}
		ps := byMember[member][pin]
		if ps == nil {
			ps = &pinSeen{pin: pin, firstAt: at}
			byMember[member][pin] = ps
		}
		if at.Before(ps.firstAt) {
			ps.firstAt = at
		}
		if isMsg && (ps.firstMsg.IsZero() || at.Before(ps.firstMsg)) {
			ps.firstMsg = at
		}
	}
	for i := range msgs {
		note(order(&msgs[i]), msgs[i].pin, msgs[i].at, true)
	}
	for _, p := range in.pins {
		who := p.member
		if in.partitionPins {
			who = fmt.Sprintf("%s/p%d", p.member, p.partition)
		}
		note(who, p.pin, p.at, false)
	}
	members := make([]string, 0, len(byMember))
	for m := range byMember {
		members = append(members, m)
	}
	slices.Sort(members)
	for _, member := range members {
		var seen []*pinSeen
		for _, ps := range byMember[member] {
			seen = append(seen, ps)
		}
		sort.Slice(seen, func(i, j int) bool { return seen[i].firstAt.Before(seen[j].firstAt) })
		for _, ps := range seen[min(1, len(seen)):] {
			r.pinChanges++
			var cause *disruption
			for _, d := range in.disr {
				m, _, _ := strings.Cut(member, "/")
				if slices.Contains(d.members, m) && !ps.firstAt.Before(d.start) &&
					(d.end.IsZero() || !ps.firstAt.After(d.end.Add(in.grace))) {
					cause = d
					break
				}
			}
			if cause == nil {
				r.flaps = append(r.flaps, fmt.Sprintf("%s pinned anew (pin …%s) at %s with no disruption under way", member, short(ps.pin), ps.firstAt.Format("15:04:05.000")))
				continue
			}
			if ps.firstMsg.IsZero() || in.partitionGaps {
				continue
			}
			// The failover gap: from the member's last message under
			// another pin to its first under this one.
			var prev time.Time
			for i := range msgs {
				o := &msgs[i]
				if order(o) == member && o.pin != ps.pin && o.at.Before(ps.firstMsg) && o.at.After(prev) {
					prev = o.at
				}
			}
			if !prev.IsZero() {
				gap := ps.firstMsg.Sub(prev)
				r.gaps = append(r.gaps, gap)
				if gap > r.worstGap[1].Sub(r.worstGap[0]) {
					r.worstGap = [2]time.Time{prev, ps.firstMsg}
				}
				if gap > time.Second {
					r.longGaps = append(r.longGaps, fmt.Sprintf("%s: %v without a message, %s to %s (pin …%s, %s)%s", member,
						gap.Round(time.Millisecond), prev.Format("15:04:05.000"), ps.firstMsg.Format("15:04:05.000"), short(ps.pin), cause.what, in.trafficIn(prev, ps.firstMsg)))
				}
			}
		}
	}
	if in.partitionGaps {
		last := map[int]*obs{}
		for i := range msgs {
			o := &msgs[i]
			if p := last[o.partition]; p != nil && (p.member != o.member || p.pin != o.pin) {
				gap := o.at.Sub(p.at)
				r.gaps = append(r.gaps, gap)
				if gap > r.worstGap[1].Sub(r.worstGap[0]) {
					r.worstGap = [2]time.Time{p.at, o.at}
				}
				if gap > time.Second {
					r.longGaps = append(r.longGaps, fmt.Sprintf("partition %d: %v without a message, %s (%s) to %s (%s)%s", o.partition,
						gap.Round(time.Millisecond), p.at.Format("15:04:05.000"), p.proc, o.at.Format("15:04:05.000"), o.proc, in.trafficIn(p.at, o.at)))
				}
			}
			last[o.partition] = o
		}
	}
	return r
}

func (in input) trafficIn(a, b time.Time) string {
	if in.publishedBetween == nil {
		return ""
	}
	return fmt.Sprintf("; %d messages published meanwhile", in.publishedBetween(a, b))
}

func short(pin string) string {
	if len(pin) > 6 {
		return pin[len(pin)-6:]
	}
	return pin
}

// median and maximum of ds (0 when empty).
func medianMax(ds []time.Duration) (time.Duration, time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[len(s)-1]
}
