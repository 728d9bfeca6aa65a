//go:build unix

package group_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// BenchmarkWorkers is the workers' figure: messages/s through consume for
// the in-process handler (--sleep 0s) and each worker form, doing nothing,
// back to back in one run and at the same --concurrency, over a preloaded
// backlog of keyed messages (100 keys, 4 partitions, one member). It
// reports each form's msgs/s and its ratio to the in-process handler of
// the same concurrency. Every message must be acked (a failure fails the
// run). Each b.N iteration is a whole set of runs: use -benchtime 1x.
// -short preloads fewer messages.
func BenchmarkWorkers(b *testing.B) {
	n, nExec := 3000, 600
	if testing.Short() {
		n, nExec = 600, 200
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	forms := []struct {
		name string
		args []string
		n    int
	}{
		{"in-process", []string{"--sleep", "0s"}, n},
		{"exec", []string{"--exec", "true"}, nExec},
		{"worker-awk", []string{"--worker", `awk -W interactive '{ split($0, a, ","); print a[1] ",\"ok\":true}" }'`}, n},
		{"http", []string{"--http", srv.URL}, n},
	}
	if _, err := exec.LookPath("python3"); err == nil {
		forms = append(forms, struct {
			name string
			args []string
			n    int
		}{"worker-python", []string{"--worker", "python3 testdata/worker_trivial.py"}, n})
	}
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			rates := map[string]float64{}
			for range b.N {
				for _, f := range forms {
					rates[f.name] += workersRun(b, f.n, conc, f.args)
				}
			}
			for _, f := range forms {
				r := rates[f.name] / float64(b.N)
				b.ReportMetric(r, f.name+"-msgs/s")
				if f.name != "in-process" {
					b.ReportMetric(r/(rates["in-process"]/float64(b.N)), f.name+"/in-process")
				}
			}
		})
	}
}

// workersRun consumes a backlog of n messages with args and returns msgs/s
// over the run (join included, as a member starting on a backlog sees it).
func workersRun(b *testing.B, n, conc int, args []string) float64 {
	b.Helper()
	s := natstest.RunServer(b)
	_, js := natstest.JetStream(b, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}}); err != nil {
		b.Fatal(err)
	}
	env := clitest.Env("NATS_URL=" + s.ClientURL())
	if r := clitest.Run(b, cmd.Run, env, "static", "create", "balanced", "ORDERS", "g", "4", "m1"); r.Code != 0 {
		b.Fatalf("create: %s", r)
	}
	for i := range n {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.k%d", i%100), []byte(strconv.Itoa(i))); err != nil {
			b.Fatal(err)
		}
	}
	full := append([]string{"--json", "static", "consume", "ORDERS", "g", "m1", "--count", strconv.Itoa(n), "--concurrency", strconv.Itoa(conc)}, args...)
	r := clitest.Run(b, cmd.Run, env, full...)
	if r.Code != 0 {
		b.Fatalf("consume %v: %s", args, r)
	}
	lines := strings.Split(strings.TrimSpace(r.Out), "\n")
	var sum struct {
		Acked   int     `json:"acked"`
		Seconds float64 `json:"seconds"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Acked != n {
		b.Fatalf("consume %v: summary %q (%v), want %d acked", args, lines[len(lines)-1], err, n)
	}
	return float64(n) / sum.Seconds
}
