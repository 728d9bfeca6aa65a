package chaos

import (
	"slices"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// The counting itself, on made-up observations: a chaos run that passes is
// only worth something if the analysis would have failed it.
func TestAnalyzeCounts(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	o := func(proc string, key string, seq, sseq uint64, pin string, ms int) obs {
		return obs{proc: proc, member: "m1", key: key, seq: seq, sseq: sseq, delivered: 1, pin: pin, acked: true, at: at(ms)}
	}
	base := func() input {
		return input{
			published: map[string]uint64{"a": 3, "b": 2},
			sseq:      map[keySeq]uint64{{"a", 1}: 1, {"b", 1}: 2, {"a", 2}: 3, {"b", 2}: 4, {"a", 3}: 5},
			grace:     100 * time.Millisecond,
			eps:       20 * time.Millisecond,
		}
	}

	t.Run("clean handover", func(t *testing.T) {
		in := base()
		in.msgs = []obs{o("x", "a", 1, 1, "P1", 0), o("x", "b", 1, 2, "P1", 10), o("x", "a", 2, 3, "P1", 20),
			o("y", "a", 2, 3, "P2", 1020), o("y", "b", 2, 4, "P2", 1030), o("y", "a", 3, 5, "P2", 1040)}
		in.disr = []*disruption{{what: "kill", members: []string{"m1"}, start: at(25), end: at(1050), inflight: 1}}
		r := analyze(in)
		if len(r.lost) != 0 || len(r.violations) != 0 || r.dups != 1 || r.bound != 1 || len(r.flaps) != 0 || r.pinChanges != 1 {
			t.Fatalf("%+v", r)
		}
		if len(r.gaps) != 1 || r.gaps[0] != time.Second {
			t.Fatalf("gaps %v, want [1s]", r.gaps)
		}
	})

	t.Run("loss, reorder, flap", func(t *testing.T) {
		in := base()
		in.msgs = []obs{o("x", "a", 1, 1, "P1", 0), o("x", "a", 3, 5, "P1", 10), o("y", "a", 2, 3, "P2", 500), o("y", "b", 1, 2, "P2", 510)}
		r := analyze(in)
		if len(r.lost) != 1 || r.lost[0] != (keySeq{"b", 2}) {
			t.Errorf("lost %v, want [b#2]", r.lost)
		}
		if len(r.violations) != 1 {
			t.Errorf("violations %v, want a#2 after a#3", r.violations)
		}
		if len(r.flaps) != 1 {
			t.Errorf("flaps %v, want the unexplained pin P2", r.flaps)
		}
	})

	t.Run("pipe jitter across processes is not a violation", func(t *testing.T) {
		in := base()
		in.published = map[string]uint64{"a": 2}
		in.msgs = []obs{o("y", "a", 2, 3, "P2", 100), o("x", "a", 1, 1, "P1", 105)}
		in.disr = []*disruption{{members: []string{"m1"}, start: at(0), end: at(200)}}
		r := analyze(in)
		if len(r.violations) != 0 || r.jitter != 1 {
			t.Fatalf("violations %v jitter %d, want 0 and 1", r.violations, r.jitter)
		}
		in.msgs[1].proc = "y" // the same process: its own output order is exact
		if r := analyze(in); len(r.violations) != 1 {
			t.Fatalf("violations %v, want 1", r.violations)
		}
	})

	t.Run("order is by when the handler took the message, not when it printed", func(t *testing.T) {
		in := base()
		in.published = map[string]uint64{"a": 2}
		// x took a#1 at 0 and printed it at 5000 (its ack timed out); y
		// took a#2 at 2000.
		late := o("x", "a", 1, 1, "P1", 5000)
		late.start = at(0)
		in.msgs = []obs{late, o("y", "a", 2, 3, "P2", 2000)}
		in.disr = []*disruption{{members: []string{"m1"}, start: at(0), end: at(6000)}}
		if r := analyze(in); len(r.violations) != 0 {
			t.Fatalf("violations %v, want none", r.violations)
		}
		late.start = at(2500) // taken after a#2: out of order
		in.msgs[0] = late
		if r := analyze(in); len(r.violations) != 1 {
			t.Fatalf("violations %v, want 1", r.violations)
		}
	})

	t.Run("a killed instance's unprinted ack is vouched for, nothing else", func(t *testing.T) {
		in := base()
		in.msgs = []obs{o("x", "a", 1, 1, "P1", 0), o("x", "b", 1, 2, "P1", 10), // x acked a#2 (sseq 3), died before printing
			o("y", "b", 2, 4, "P2", 1000), o("y", "a", 3, 5, "P2", 1010)}
		in.kills = []kill{{proc: "x", member: "m1", at: at(15)}}
		in.disr = []*disruption{{members: []string{"m1"}, start: at(15), end: at(1020), inflight: 1}}
		r := analyze(in)
		if len(r.lost) != 0 || len(r.vouched) != 1 || r.vouched[0] != (keySeq{"a", 2}) {
			t.Fatalf("lost %v vouched %v, want a#2 vouched", r.lost, r.vouched)
		}
		in.msgs = in.msgs[:3] // a#3 (the kill's successor) missing too: a real loss
		if r := analyze(in); len(r.lost) != 1 || r.lost[0] != (keySeq{"a", 3}) {
			t.Fatalf("lost %v, want [a#3]", r.lost)
		}
	})

	t.Run("partition layout: pins count per partition, a kill vouches once per partition it held", func(t *testing.T) {
		in := base()
		in.partitionPins = true
		in.partitionGaps = true
		// Keys a (partition 0) and b (partition 1); x held both pins and
		// acked a#2 and b#2 unprinted when it was killed.
		p := func(ob obs, part int) obs { ob.partition = part; return ob }
		in.msgs = []obs{p(o("x", "a", 1, 1, "P0", 0), 0), p(o("x", "b", 1, 2, "P1", 10), 1),
			p(o("y", "a", 3, 5, "Q0", 300), 0)}
		in.kills = []kill{{proc: "x", member: "m1", at: at(15)}}
		in.disr = []*disruption{{members: []string{"m1"}, start: at(15), end: at(400), inflight: 2}}
		in.pins = []pinObs{{proc: "x", member: "m1", pin: "P0", at: at(0), partition: 0}, {proc: "x", member: "m1", pin: "P1", at: at(5), partition: 1},
			{proc: "y", member: "m1", pin: "Q0", at: at(290), partition: 0}, {proc: "y", member: "m1", pin: "Q1", at: at(295), partition: 1}}
		r := analyze(in)
		if len(r.lost) != 0 || len(r.vouched) != 2 {
			t.Fatalf("lost %v vouched %v, want a#2 and b#2 vouched", r.lost, r.vouched)
		}
		// Two partitions' first pins are not changes; each partition's second is.
		if r.pinChanges != 2 || len(r.flaps) != 0 || len(r.gaps) != 1 || r.gaps[0] != 300*time.Millisecond {
			t.Fatalf("pin changes %d flaps %v gaps %v, want 2, none, [300ms]", r.pinChanges, r.flaps, r.gaps)
		}
		in.pins = append(in.pins, pinObs{proc: "y", member: "m1", pin: "Q2", at: at(2000), partition: 1})
		if r := analyze(in); len(r.flaps) != 1 {
			t.Fatalf("flaps %v, want partition 1's unexplained pin", r.flaps)
		}
	})

	t.Run("partition layout: a kill vouches on a partition it was pinned on but printed nothing of", func(t *testing.T) {
		in := base()
		in.partitionPins = true
		p := func(ob obs, part int) obs { ob.partition = part; return ob }
		// y handled b#1 on partition 1, then x was pinned there and acked
		// b#2 unprinted when it was killed; y handled the rest.
		in.msgs = []obs{p(o("x", "a", 1, 1, "P0", 0), 0), p(o("y", "b", 1, 2, "Q1", 2), 1),
			p(o("y", "a", 2, 3, "Q0", 300), 0), p(o("y", "a", 3, 5, "Q0", 310), 0)}
		in.kills = []kill{{proc: "x", member: "m1", at: at(15)}}
		in.disr = []*disruption{{members: []string{"m1"}, start: at(3), end: at(400), inflight: 2}}
		in.pins = []pinObs{{proc: "x", member: "m1", pin: "P0", at: at(0), partition: 0}, {proc: "y", member: "m1", pin: "Q1", at: at(1), partition: 1},
			{proc: "x", member: "m1", pin: "P1", at: at(5), partition: 1}, {proc: "y", member: "m1", pin: "Q0", at: at(290), partition: 0}}
		r := analyze(in)
		if len(r.lost) != 0 || len(r.vouched) != 1 || r.vouched[0] != (keySeq{"b", 2}) {
			t.Fatalf("lost %v vouched %v, want b#2 vouched", r.lost, r.vouched)
		}
		in.pins = slices.Delete(in.pins, 2, 3) // x never pinned on partition 1: b#2 is lost
		if r := analyze(in); len(r.lost) != 1 || r.lost[0] != (keySeq{"b", 2}) {
			t.Fatalf("lost %v, want [b#2]", r.lost)
		}
	})

	t.Run("a message stored twice is not a redelivery", func(t *testing.T) {
		in := base()
		in.published = map[string]uint64{"a": 1}
		in.msgs = []obs{o("x", "a", 1, 1, "P1", 0), o("x", "a", 1, 9, "P1", 10), o("x", "a", 1, 9, "P1", 20)}
		r := analyze(in)
		if r.republished != 1 || r.dups != 1 {
			t.Fatalf("republished %d dups %d, want 1 and 1", r.republished, r.dups)
		}
	})
}

// A partition's resume on the partition layout is timed from when it had
// a message to hand: at the fault when one was waiting or in hand, else
// from the next one published.
func TestAvailable(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	keys := keysFor(4, 1) // one key per partition
	var a, b string       // a key of partition 0, one of partition 1
	for _, k := range keys {
		switch partition.PartitionOfKey(k, 4) {
		case 0:
			a = k
		case 1:
			b = k
		}
	}
	p := &proc{name: "m1#1", member: "m1"}
	msg := func(key string, seq uint64, ms int) *line {
		return &line{Type: "msg", Key: key, KeySeq: seq, at: at(ms), proc: p}
	}
	e := &env{n: 4, procs: []*proc{p}, pub: &publisher{
		pubKS: []keySeq{{a, 1}, {b, 1}, {b, 2}, {a, 2}},
		pubAt: []time.Time{at(0), at(10), at(60), at(300)},
	}}
	p.lines = []*line{msg(a, 1, 5), msg(b, 1, 20)}
	if got := e.available(0, at(100)); !got.Equal(at(300)) {
		t.Errorf("partition 0, nothing waiting at the fault: available at %v, want the next publish (300ms)", got.Sub(t0))
	}
	if got := e.available(1, at(100)); !got.Equal(at(100)) {
		t.Errorf("partition 1, b#2 waiting at the fault: available at %v, want the fault (100ms)", got.Sub(t0))
	}
	p.lines = append(p.lines, msg(b, 2, 70))
	if got := e.available(1, at(100)); !got.After(at(100).Add(time.Minute)) {
		t.Errorf("partition 1, b#2 taken before the fault and nothing after: available at %v, want never", got.Sub(t0))
	}
}
