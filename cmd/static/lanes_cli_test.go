package static_test

import (
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
