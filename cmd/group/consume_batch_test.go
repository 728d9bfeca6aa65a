package group_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cg-dev/cg/internal/clitest"
)

// consume --batch --json: each message line carries its batch and comes
// before that batch's line; a failed batch (--fail-every) is retried whole
// with the same sequences; acked batches run in stream order and cover
// every message once; --count stops after the batch holding the Nth.
func TestCLIConsumeBatchJSON(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	const n = 100
	for i := range n {
		if _, err := e.js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%8), nil); err != nil {
			t.Fatal(err)
		}
	}
	r := e.mustRun("static", "consume", "ORDERS", "g", "m1", "--batch", "10", "--fail-every", "3", "--count", fmt.Sprint(n), "--sleep", "0s", "--json")
	var pending []map[string]any // message lines since the last batch line
	var acked []uint64
	seen := map[uint64]int{}
	var last map[string]any // the previous batch line
	retried := 0
	var summary map[string]any
	for _, l := range clitest.Lines(t, r.Out) {
		switch l["type"] {
		case "msg":
			pending = append(pending, l)
		case "batch":
			num := l["batch"].(float64)
			if int(l["size"].(float64)) != len(pending) {
				t.Errorf("batch %v: size %v but %d message lines before it", num, l["size"], len(pending))
			}
			for i, m := range pending {
				if m["batch"] != num {
					t.Errorf("message line %v in batch %v's lines says batch %v", m["stream_seq"], num, m["batch"])
				}
				if i == 0 && m["stream_seq"] != l["first_seq"] || i == len(pending)-1 && m["stream_seq"] != l["last_seq"] {
					t.Errorf("batch %v seq %v-%v, message lines %v..%v", num, l["first_seq"], l["last_seq"], pending[0]["stream_seq"], pending[len(pending)-1]["stream_seq"])
				}
			}
			if last != nil && last["acked"] == false {
				retried++
				if l["batch"] != last["batch"] || l["attempt"] != 2.0 || l["first_seq"] != last["first_seq"] || l["last_seq"] != last["last_seq"] {
					t.Errorf("after failed %v came %v: want the same batch, attempt 2", last, l)
				}
				if !strings.Contains(last["error"].(string), "simulated sink failure") {
					t.Errorf("failed batch line's error %q", last["error"])
				}
			}
			if l["acked"] == true {
				for _, m := range pending {
					s := uint64(m["stream_seq"].(float64))
					if len(acked) > 0 && s <= acked[len(acked)-1] {
						t.Errorf("acked %d after %d: out of stream order", s, acked[len(acked)-1])
					}
					acked = append(acked, s)
					seen[s]++
				}
			}
			pending, last = nil, l
		case "summary":
			summary = l
		}
	}
	if len(seen) != n || len(acked) != n {
		t.Errorf("acked %d messages (%d distinct), want %d once each", len(acked), len(seen), n)
	}
	if retried < 3 {
		t.Errorf("%d batches retried, want every 3rd of 10 (at least 3)", retried)
	}
	if len(pending) != 0 {
		t.Errorf("%d message lines after the last batch line", len(pending))
	}
	if summary == nil || summary["acked"] != float64(n) || summary["reason"] != "count reached" {
		t.Errorf("summary %v", summary)
	}
}

// Bad --batch input: one clear line, non-zero exit, nothing joined.
func TestCLIConsumeBatchBadInput(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	e.mustRun("elastic", "create", "ORDERS", "eg", "4", "--filter", "*.orders.*:2")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--batch", "0"}, "--batch 0: use 1 or more"},
		{[]string{"--batch", "-5"}, "--batch -5: use 1 or more"},
		{[]string{"--batch", "10", "--max-ack-pending", "5"}, "--max-ack-pending 5 is below --batch 10"},
		{[]string{"--batch", "10", "--batch-wait", "-1s"}, "is negative"},
		{[]string{"--batch", "10", "--fail-every", "-1"}, "--fail-every -1 is negative"},
		{[]string{"--batch", "10", "--concurrency", "4"}, "--batch and --concurrency 4 cannot be combined"},
		{[]string{"--batch-wait", "1s"}, "--batch-wait works only with --batch"},
	} {
		for _, g := range [][]string{{"static", "consume", "ORDERS", "g", "m1"}, {"elastic", "consume", "ORDERS", "eg", "m1"}} {
			args := append(append([]string{}, g...), tc.args...)
			r := e.run(args...)
			errs := clitest.ErrorLines(r.Err)
			if r.Code == 0 || len(errs) != 1 || !strings.Contains(errs[0], tc.want) {
				t.Errorf("cg %v: exit %d, stderr %q; want one line saying %q", args, r.Code, r.Err, tc.want)
			}
		}
	}
	if c := e.consumers("ORDERS"); c != 0 {
		t.Errorf("%d consumers on ORDERS after refused joins", c)
	}
	if c := e.consumers("ORDERS-eg"); c != 0 {
		t.Errorf("%d consumers on the work stream after refused joins", c)
	}
}
