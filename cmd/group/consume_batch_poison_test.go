package group_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

// batchPoisonLine is what the test reads of consume --batch --json lines.
type batchPoisonLine struct {
	Type      string `json:"type"`
	Subject   string `json:"subject"`
	StreamSeq uint64 `json:"stream_seq"`
	Batch     uint64 `json:"batch"`
	Attempt   int    `json:"attempt"`
	Failed    any    `json:"failed"`
	Acked     any    `json:"acked"`
	Size      int    `json:"size"`
	FirstSeq  uint64 `json:"first_seq"`
	LastSeq   uint64 `json:"last_seq"`
	Final     bool   `json:"final"`
	Poison    string `json:"poison"`
	Action    string `json:"action"`
	// summary
	DeadLettered int `json:"dead_lettered"`
}

// --batch with a retry policy through the CLI: the batch holding the
// poison message fails its three attempts, is split until the poison
// message fails alone, which is dead-lettered; every other message is
// acked once, in stream order, and every message line carries the batch
// and attempt of the batch line that reports it.
func TestConsumeBatchDeadLetter(t *testing.T) {
	e := shopEnv(t)
	var subjects []string
	for i := range 40 {
		subjects = append(subjects, fmt.Sprintf("shop.k%d.created", i%4))
		if i == 17 {
			subjects = append(subjects, "shop.k3.refund") // stream sequence 19
		}
	}
	e.publish(subjects...)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "SHOP", "g", "m1", "--count", "40", "--sleep", "0s",
		"--batch", "10", "--max-deliver", "3", "--backoff", "100ms,200ms", "--on-poison", "dead-letter", "--dead-letter", "dlq.shop",
		"--fail-subject", "shop.*.refund")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	const poisonSeq = 19
	type attempt struct {
		batch uint64
		n     int
	}
	var lines []batchPoisonLine
	for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n") {
		var bl batchPoisonLine
		if err := json.Unmarshal([]byte(l), &bl); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		lines = append(lines, bl)
	}
	pending := map[attempt][]batchPoisonLine{} // message lines not yet reported
	acked := map[uint64]int{}
	var order []uint64
	poisonLines, dlLines, wholeFails := 0, 0, 0
	for _, l := range lines {
		switch l.Type {
		case "msg":
			a := attempt{l.Batch, max(l.Attempt, 1)}
			pending[a] = append(pending[a], l)
			if (l.Failed == true) != (l.StreamSeq == poisonSeq) {
				t.Errorf("message line %+v: failed must be set on the poison message only", l)
			}
		case "batch":
			a := attempt{l.Batch, l.Attempt}
			ms := pending[a]
			delete(pending, a)
			if len(ms) != l.Size || len(ms) == 0 || ms[0].StreamSeq != l.FirstSeq || ms[len(ms)-1].StreamSeq != l.LastSeq {
				t.Fatalf("batch line %+v reports %d message lines %+v", l, len(ms), ms)
			}
			if l.Acked == true {
				for _, m := range ms {
					acked[m.StreamSeq]++
					order = append(order, m.StreamSeq)
				}
			}
			if l.FirstSeq <= poisonSeq && poisonSeq <= l.LastSeq && l.Size == 10 && l.Acked != true {
				wholeFails++
			}
			if l.Poison != "" {
				poisonLines++
				if l.Poison != "dead-letter" || l.Size != 1 || l.FirstSeq != poisonSeq || !l.Final {
					t.Errorf("poison batch line %+v", l)
				}
			}
		case "poison":
			if l.Action == "dead-letter" {
				dlLines++
			}
		}
	}
	if len(pending) != 0 {
		t.Errorf("message lines no batch line reported: %+v", pending)
	}
	if wholeFails != 3 || poisonLines != 1 || dlLines != 1 {
		t.Fatalf("%d failed attempts of the whole batch (want 3), %d poison batch lines, %d dead-letter lines (want 1 each)\n%s", wholeFails, poisonLines, dlLines, r.Out)
	}
	for seq := uint64(1); seq <= 41; seq++ {
		want := 1
		if seq == poisonSeq {
			want = 0
		}
		if acked[seq] != want {
			t.Errorf("stream sequence %d acked %d time(s), want %d", seq, acked[seq], want)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("acked out of stream order: %v", order)
		}
	}
	if sum := lines[len(lines)-1]; sum.Type != "summary" || sum.DeadLettered != 1 {
		t.Fatalf("summary %+v", sum)
	}
	dl := e.deadLetters()
	if len(dl) != 1 || dl[0].Header.Get("Cg-Subject") != "shop.k3.refund" || dl[0].Header.Get("Cg-Reason") != "max_deliver" ||
		!strings.Contains(dl[0].Header.Get("Cg-Error"), "--fail-subject shop.*.refund") {
		t.Fatalf("dead letters %+v", dl)
	}
}
