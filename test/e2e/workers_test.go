//go:build unix

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
)

// SIGTERM to a cg running workers: the messages in hand are finished by
// their workers and acked, cg exits 0, and no worker process outlives it.
func TestWorkersSIGTERM(t *testing.T) {
	forms := map[string]func(dir string) []string{
		"exec": func(dir string) []string {
			return []string{"--exec", "sh -c 'echo $$ >> " + filepath.Join(dir, "pids") + "; sleep 0.5; echo $CG_STREAM_SEQ >> " + filepath.Join(dir, "done") + "'"}
		},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		forms["worker"] = func(dir string) []string {
			py := `import json,os,sys,time
for l in sys.stdin:
    m = json.loads(l)
    open(sys.argv[1], "a").write("%d\n" % os.getpid())
    time.sleep(0.5)
    open(sys.argv[2], "a").write("%d\n" % m["seq"])
    print(json.dumps({"id": m["id"], "ok": True}), flush=True)
`
			return []string{"--worker", "python3 -c '" + py + "' " + filepath.Join(dir, "pids") + " " + filepath.Join(dir, "done")}
		}
	}
	for name, form := range forms {
		t.Run(name, func(t *testing.T) {
			url, js := setup(t)
			ctx := context.Background()
			for i := range 4 {
				if _, err := js.Publish(ctx, "orders.k"+strconv.Itoa(i), nil); err != nil {
					t.Fatal(err)
				}
			}
			dir := t.TempDir()
			cmd := exec.Command(cgBin, append([]string{"static", "consume", "ORDERS", "g", "m1", "--json", "--concurrency", "4"}, form(dir)...)...)
			cmd.Env = append(os.Environ(), "NATS_URL="+url)
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			// A worker writes its pid when a message is in its hands.
			clitest.Eventually(t, 10*time.Second, "a worker at work", func() bool {
				b, _ := os.ReadFile(filepath.Join(dir, "pids"))
				return len(b) > 0
			})
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("cg exited with %v after SIGTERM, want 0", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("cg did not exit after SIGTERM")
			}
			pids := strings.Fields(readOr(filepath.Join(dir, "pids")))
			for _, p := range pids {
				pid, _ := strconv.Atoi(p)
				if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
					t.Errorf("worker process %d outlived cg (kill 0: %v)", pid, err)
				}
			}
			finished := strings.Fields(readOr(filepath.Join(dir, "done")))
			if len(finished) == 0 {
				t.Fatalf("no message finished by its worker")
			}
			c, err := js.Consumer(ctx, "ORDERS", "g-m1")
			if err != nil {
				t.Fatal(err)
			}
			ci, err := c.Info(ctx)
			if err != nil {
				t.Fatal(err)
			}
			// Every message a worker had started was finished, and acked;
			// what no worker had started yet (a loaded machine may start
			// fewer than four before the signal) was handed back, still
			// pending for the next instance.
			if len(finished) != len(pids) {
				t.Errorf("workers started %d messages and finished %d (%v): the stop cut a message in hand short", len(pids), len(finished), finished)
			}
			if ci.AckFloor.Stream < uint64(len(finished)) || ci.NumAckPending != 4-len(finished) {
				t.Fatalf("after the stop: %d unacked, ack floor %d; the workers finished %v", ci.NumAckPending, ci.AckFloor.Stream, finished)
			}
		})
	}
}

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
