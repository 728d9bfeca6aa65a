package static_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// --concurrency and --order: bad values are usage errors (exit 2, nothing
// joined); a concurrent consume keeps per-key order by the publisher's
// stamps.
func TestConsumeConcurrency(t *testing.T) {
	e := newEnv(t)
	if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1"); r.Code != 0 {
		t.Fatal(r.Err)
	}
	for _, bad := range [][]string{
		{"--order", "random"},
		{"--concurrency", "0"},
		{"--concurrency", "8", "--max-ack-pending", "2"},
	} {
		r := e.run(append([]string{"static", "consume", "ORDERS", "g", "m1", "--count", "1"}, bad...)...)
		if r.Code != 2 || !strings.Contains(r.Err, bad[len(bad)-1]) || !strings.HasPrefix(r.Err, "error: ") {
			t.Errorf("%v: code %d err %q", bad, r.Code, r.Err)
		}
	}
	if r := e.run("publish", "orders.{key}", "--keys", "5", "--count", "100", "--rate", "0"); r.Code != 0 {
		t.Fatalf("publish: %d %s", r.Code, r.Err)
	}
	r := e.run("static", "consume", "ORDERS", "g", "m1", "--sleep", "2ms", "--count", "100", "--verify", "--json", "--concurrency", "8")
	if r.Code != 0 {
		t.Fatalf("consume --concurrency 8 --verify: %d %s", r.Code, r.Err)
	}
	if !strings.Contains(r.Out, `"order_violations":0`) || !strings.Contains(r.Out, `"processed":100`) {
		t.Fatalf("verify summary: %s", r.Out[max(0, len(r.Out)-600):])
	}
}

// A concurrent consume acks without waiting in its handler (the engine
// holds each key until the ack's reply is in): on both layouts every
// message is printed once, after its reply, as acked, in per-key order,
// lines of a key in its order, and the summary counts what was printed.
func TestConsumeConcurrentAcksPrintedWhenConfirmed(t *testing.T) {
	for _, layout := range []string{"member", "partition"} {
		t.Run(layout, func(t *testing.T) {
			e := newEnv(t)
			if r := e.run("static", "create", "balanced", "ORDERS", "g", "10", "m1", "--layout", layout); r.Code != 0 {
				t.Fatal(r.Err)
			}
			if r := e.run("publish", "orders.{key}", "--keys", "20", "--count", "600", "--rate", "0"); r.Code != 0 {
				t.Fatalf("publish: %d %s", r.Code, r.Err)
			}
			r := e.run("static", "consume", "ORDERS", "g", "m1", "--sleep", "0", "--count", "500", "--verify", "--json", "--concurrency", "8")
			if r.Code != 0 {
				t.Fatalf("consume: %d %s", r.Code, r.Err)
			}
			seqs, last := map[float64]bool{}, map[string]float64{}
			var sum map[string]any
			for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n") {
				var v map[string]any
				if err := json.Unmarshal([]byte(l), &v); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				switch v["type"] {
				case "msg":
					if v["acked"] != true || v["check"] != "fresh" {
						t.Errorf("line not acked, or not fresh: %s", l)
					}
					// Printed when the reply came, before the key ran on.
					key, ks := v["key"].(string), v["key_seq"].(float64)
					if ks <= last[key] {
						t.Errorf("key %s: line of #%v printed after #%v", key, ks, last[key])
					}
					last[key] = ks
					seqs[v["stream_seq"].(float64)] = true
				case "summary":
					sum = v
				}
			}
			// --count may be passed by the calls that were in hand when
			// it was reached, never by more than the concurrency.
			if n := len(seqs); n < 500 || n >= 508 {
				t.Errorf("%d distinct messages printed, want 500 to 507", n)
			}
			if sum == nil || sum["handled"] != float64(len(seqs)) || sum["acked"] != float64(len(seqs)) {
				t.Errorf("summary %v for %d messages printed", sum, len(seqs))
			}
		})
	}
}
