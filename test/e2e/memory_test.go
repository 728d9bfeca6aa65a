package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
)

// TestMeasureConsumeRSS measures the peak resident memory (VmHWM) of the
// built binary's consume at several --concurrency values, each handling
// 20 messages: what a handler slot costs a whole process. It runs only
// when asked (Linux):
//
//	CG_MEASURE_MEMORY=1 go test -run TestMeasureConsumeRSS -v ./test/e2e/
func TestMeasureConsumeRSS(t *testing.T) {
	if os.Getenv("CG_MEASURE_MEMORY") == "" {
		t.Skip("set CG_MEASURE_MEMORY=1 to measure consume's resident memory per --concurrency")
	}
	// Without the race detector, which multiplies memory: the binary users run.
	bin, err := clitest.Build(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	url, js := setup(t)
	for _, n := range []string{"1", "256", "1024"} {
		for i := 0; i < 20; i++ {
			if _, err := js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i), nil); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(bin, "static", "consume", "ORDERS", "g", "m1", "--json", "--sleep", "0s", "--count", "20", "--concurrency", n)
		cmd.Env = append(os.Environ(), "NATS_URL="+url)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Peak so far, read until the process exits (it exits after 20).
		var peak int
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for running := true; running; {
			if kb := vmHWM(cmd.Process.Pid); kb > peak {
				peak = kb
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("--concurrency %s: %v", n, err)
				}
				running = false
			case <-time.After(5 * time.Millisecond):
			}
		}
		t.Logf("--concurrency %5s: peak RSS %6.1f MB", n, float64(peak)/1024)
		// Made again by the next run with its own max ack pending; it
		// resumes after what this one handled.
		if err := js.DeleteConsumer(context.Background(), "ORDERS", "g-m1"); err != nil {
			t.Fatal(err)
		}
	}
}

func vmHWM(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return kb
		}
	}
	return 0
}
