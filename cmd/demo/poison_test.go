package demo_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/demo"
	"github.com/cg-dev/cg/internal/clitest"
)

// cg demo poison, shortened: one poison message dead-lettered once with
// its headers, its key's later messages handled only after that, the rest
// flowing meanwhile; nothing lost, order kept.
func TestDemoPoison(t *testing.T) {
	start := time.Now()
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "poison",
		"--phase", "2s", "--ack-wait", "1s", "--keys", "6", "--rate", "100/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.PoisonVerdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	if !v.OK || v.DeadLettered != 1 || !v.HeadersOK || v.Failures != 3 || v.EarlyAfter != 0 || v.KeyAfter == 0 ||
		v.OrderViolations != 0 || v.Lost != 0 || v.OthersDuringRetries == 0 {
		t.Fatalf("verdict %+v\nstderr:\n%s", v, r.Err)
	}
	if v.Published == 0 || v.Processed != v.Published {
		t.Fatalf("counts: published %d processed %d", v.Published, v.Processed)
	}
	for i, n := range v.Deliveries {
		if n != i+1 {
			t.Fatalf("poison deliveries %v, want 1, 2, 3", v.Deliveries)
		}
	}
	if v.Headers["Cg-Sequence"] == "" || v.Headers["Cg-Member"] == "" || !strings.HasPrefix(v.Headers["Nats-Msg-Id"], "cg-dl.") {
		t.Fatalf("headers %v", v.Headers)
	}
	for _, want := range []string{"Created stream DEAD", "Published one poison message", "dead-lettered message ORDERS sequence"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
	if el := time.Since(start); el > 40*time.Second {
		t.Fatalf("demo took %v", el)
	}
}

// cg demo poison --batch: the batch holding the poison message fails its
// attempts and is halved until the message fails alone; only it is
// dead-lettered, everything else handled once and in order.
func TestDemoPoisonBatch(t *testing.T) {
	r := clitest.Run(t, cmd.Run, clitest.Env(), "--json", "demo", "poison", "--batch", "10",
		"--phase", "2s", "--ack-wait", "1s", "--keys", "6", "--rate", "100/s", "--sleep", "1ms")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	var v demo.PoisonVerdict
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("stdout is not the JSON verdict: %v\n%s", err, r.Out)
	}
	// 3 calls of the whole batch, then at most ceil(log2 10) = 4 halves.
	if !v.OK || v.Batch != 10 || v.DeadLettered != 1 || !v.HeadersOK || v.Failures < 3 || v.Failures > 7 || v.EarlyAfter != 0 ||
		v.KeyAfter == 0 || v.OrderViolations != 0 || v.Duplicates != 0 || v.Lost != 0 || v.Published == 0 || v.Processed != v.Published {
		t.Fatalf("verdict %+v\nstderr:\n%s", v, r.Err)
	}
	if v.Headers["Cg-Reason"] != "max_deliver" || v.Headers["Cg-Subject"] != v.PoisonSubject {
		t.Fatalf("headers %v", v.Headers)
	}
	for i, a := range v.Deliveries[:3] {
		if a != i+1 {
			t.Fatalf("attempts of calls holding the poison message %v, want 1, 2, 3 first", v.Deliveries)
		}
	}
	for _, want := range []string{"ordered batches of 10", "dead-lettered message ORDERS sequence"} {
		if !strings.Contains(r.Err, want) {
			t.Errorf("narration lacks %q:\n%s", want, r.Err)
		}
	}
}

// A demo name it does not know is a usage error that names poison.
func TestDemoPoisonUnknown(t *testing.T) {
	r := clitest.Run(t, cmd.Run, clitest.Env(), "demo", "poisson")
	if r.Code != 2 || !strings.Contains(r.Err, "cg demo poison") {
		t.Fatalf("%s", r)
	}
}
