package demo

import (
	"strings"
	"testing"
	"time"
)

// The batches verdict over a sink record: the killed batch's replay by the
// standby is allowed, and so is the replay after a pin the server gave
// anew (a late pull renewal on a starved machine); a rewind under the same
// pin is an order violation, and duplicates beyond those replays fail.
func TestBatchJudgeAllowsReplayAfterRepin(t *testing.T) {
	at := time.Now()
	w := func(inst, pin string, seqs ...uint64) []write {
		var ws []write
		for _, s := range seqs {
			ws = append(ws, write{inst: inst, seq: s, pin: pin, at: at})
		}
		return ws
	}
	record := func(ws ...[]write) *sink {
		s := newSink()
		for _, part := range ws {
			s.writes = append(s.writes, part...)
		}
		s.killed = &KilledBatch{Instance: "m1/a", Size: 2, FirstSeq: 3, LastSeq: 4}
		s.killAt, s.killSeq = at, []uint64{3, 4}
		return s
	}
	judge := func(s *sink, dups uint64) (*BatchVerdict, []string) {
		d := &batchWalk{demo: &demo{o: &Options{Batch: 2}}, sink: s}
		v := &Verdict{Duplicates: dups}
		why := d.judge(t.Context(), v)
		return v.Batches, why
	}

	// a killed after writing 3-4; b replays 3-4, goes on to 6, is pinned
	// anew and gets 5-6 again.
	s := record(w("m1/a", "A", 1, 2, 3, 4), w("m1/b", "B", 3, 4, 5, 6), w("m1/b", "B2", 5, 6, 7, 8))
	bv, why := judge(s, 4)
	if len(why) != 0 || bv.Repins != 1 || bv.BatchOrderViolations != 0 || !bv.RedeliveredInOrder {
		t.Fatalf("kill and a re-pin: why %q, verdict %+v", why, bv)
	}
	// More duplicates than both replays: refused, and the reason names the re-pin.
	if _, why := judge(s, 5); len(why) != 1 || !strings.Contains(why[0], "5 duplicates") || !strings.Contains(why[0], "after 1 re-pin") {
		t.Fatalf("too many duplicates: why %q", why)
	}
	// The same rewind under the same pin is a write out of order.
	s = record(w("m1/a", "A", 1, 2, 3, 4), w("m1/b", "B", 3, 4, 5, 6, 5, 6, 7, 8))
	bv, why = judge(s, 4)
	if bv.Repins != 0 || bv.BatchOrderViolations != 2 || len(why) != 2 {
		t.Fatalf("rewind under one pin: why %q, verdict %+v", why, bv)
	}
}
