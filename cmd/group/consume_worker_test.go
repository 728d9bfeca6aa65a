//go:build unix

package group_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

// record is one line a test worker appended to its record file:
// key, stream sequence, delivery count (and whatever follows).
type record struct {
	key       string
	seq       uint64
	delivered uint64
	rest      []string
}

func readRecords(t *testing.T, path string) []record {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []record
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			t.Fatalf("record line %q: want key seq delivered", sc.Text())
		}
		seq, err1 := strconv.ParseUint(fs[1], 10, 64)
		del, err2 := strconv.ParseUint(fs[2], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("record line %q", sc.Text())
		}
		out = append(out, record{key: fs[0], seq: seq, delivered: del, rest: fs[3:]})
	}
	return out
}

// checkRecords asserts that the worker saw every stream sequence 1..n,
// each exactly as many times as the server delivered it (deliveries
// 1, 2, ... k, once each), and every key's messages in stream order.
func checkRecords(t *testing.T, recs []record, n int) { checkRecordsOf(t, recs, n, true) }

// checkRecordsOf with every false allows deliveries the worker never saw
// (written to a worker that died before reading them): each delivery it
// saw, it saw once, in order.
func checkRecordsOf(t *testing.T, recs []record, n int, every bool) {
	t.Helper()
	deliveries := map[uint64][]uint64{}
	last := map[string]record{}
	for _, r := range recs {
		deliveries[r.seq] = append(deliveries[r.seq], r.delivered)
		if p, ok := last[r.key]; ok && (r.seq < p.seq || r.seq == p.seq && r.delivered <= p.delivered) {
			t.Fatalf("key %s: seq %d (delivery %d) handled after seq %d (delivery %d): per-key order broken", r.key, r.seq, r.delivered, p.seq, p.delivered)
		}
		last[r.key] = r
	}
	for seq := uint64(1); seq <= uint64(n); seq++ {
		ds := deliveries[seq]
		if len(ds) == 0 {
			t.Fatalf("seq %d never handled", seq)
		}
		for i, d := range ds {
			if every && d != uint64(i+1) || i > 0 && d <= ds[i-1] {
				t.Fatalf("seq %d handled at deliveries %v: want 1..%d once each", seq, ds, len(ds))
			}
		}
	}
	if len(deliveries) != n {
		t.Fatalf("%d sequences handled, want %d", len(deliveries), n)
	}
}

// drained asserts that the member consumer holds nothing unacked or
// undelivered.
func (e *env) drained(stream, consumer string) {
	e.t.Helper()
	clitest.Eventually(e.t, 10*time.Second, "consumer "+consumer+" settled", func() bool {
		c, err := e.js.Consumer(context.Background(), stream, consumer)
		if err != nil {
			return false
		}
		ci, err := c.Info(context.Background())
		return err == nil && ci.NumAckPending == 0 && ci.NumPending == 0 && ci.NumRedelivered == 0
	})
}

// publishKeyed publishes n messages round-robin over keys k0..k(keys-1)
// on orders.<key>.
func (e *env) publishKeyed(n, keys int) {
	e.t.Helper()
	for i := range n {
		if _, err := e.js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%keys), []byte(strconv.Itoa(i))); err != nil {
			e.t.Fatal(err)
		}
	}
}

// A shell --exec worker over 1000 keyed messages with --concurrency 8:
// its own record shows every message handled exactly as many times as the
// server delivered it, every key in order, and the consumer holds nothing.
func TestConsumeExecKeyed(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	const n = 1000
	e.publishKeyed(n, 40)
	rec := filepath.Join(t.TempDir(), "rec")
	worker := fmt.Sprintf(`sh -c 'echo "$CG_KEY $CG_STREAM_SEQ $CG_DELIVERED $CG_SUBJECT $CG_PARTITION" >> %s'`, rec)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "ORDERS", "g", "m1", "--count", strconv.Itoa(n),
		"--exec", worker, "--concurrency", "8")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	recs := readRecords(t, rec)
	checkRecords(t, recs, n)
	for _, x := range recs {
		if x.rest[0] != "orders."+x.key {
			t.Fatalf("record %+v: CG_SUBJECT is not orders.<CG_KEY>", x)
		}
	}
	e.drained("ORDERS", "g-m1")
	sum := clitest.Lines(t, r.Out)
	if last := sum[len(sum)-1]; last["type"] != "summary" || last["acked"] != float64(n) {
		t.Fatalf("summary %v", last)
	}
}

// A worker failing one subject has it dead-lettered after the policy's
// deliveries while the rest flows.
func TestConsumeExecDeadLetter(t *testing.T) {
	e := shopEnv(t)
	e.publish("shop.k1.refund", "shop.k1.created", "shop.k2.created", "shop.k1.created", "shop.k2.created", "shop.k1.created", "shop.k2.created")
	rec := filepath.Join(t.TempDir(), "rec")
	worker := fmt.Sprintf(`sh -c 'echo "$CG_KEY $CG_STREAM_SEQ $CG_DELIVERED" >> %s; echo "handling $CG_SUBJECT"; test "$CG_SUBJECT" != shop.k1.refund'`, rec)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "SHOP", "g", "m1", "--count", "6",
		"--max-deliver", "3", "--dead-letter", "dlq.shop", "--exec", worker, "--concurrency", "2")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	if dl := e.deadLetters(); len(dl) != 1 || dl[0].Subject != "dlq.shop" || string(dl[0].Data) != "shop.k1.refund" {
		t.Fatalf("dead letters %v, want the one refund", dl)
	}
	recs := readRecords(t, rec)
	failed := 0
	for _, x := range recs {
		if x.seq == 1 {
			failed++
		}
	}
	if failed != 3 || len(recs) != 9 {
		t.Fatalf("the refund was handled %d times (want 3, --max-deliver), %d handlings in all (want 9): %+v", failed, len(recs), recs)
	}
	if !strings.Contains(r.Err, "[p") || !strings.Contains(r.Err, "handling shop.k2.created") {
		t.Fatalf("the worker's output is not on stderr behind its message's prefix:\n%s", r.Err)
	}
	e.drained("SHOP", "g-m1")
	ls := consumeLines(t, r.Out)
	if sum := ls[len(ls)-1]; sum.DeadLettered != 1 || sum.Failed != float64(3) {
		t.Fatalf("summary %+v", sum)
	}
}

// A hung worker is killed at --exec-timeout, its whole process group with
// it, and the message is redelivered and handled: nothing lost.
func TestConsumeExecTimeout(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	e.publishKeyed(3, 3)
	dir := t.TempDir()
	rec, pids := filepath.Join(dir, "rec"), filepath.Join(dir, "pids")
	// The first delivery of seq 2 hangs in a grandchild (sleep), which
	// must die with the group.
	worker := fmt.Sprintf(`sh -c 'echo "$CG_KEY $CG_STREAM_SEQ $CG_DELIVERED" >> %s; if [ "$CG_STREAM_SEQ.$CG_DELIVERED" = 2.1 ]; then echo $$ >> %s; sleep 1000; fi'`, rec, pids)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "ORDERS", "g", "m1", "--count", "3",
		"--exec", worker, "--exec-timeout", "500ms")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	checkRecords(t, readRecords(t, rec), 3)
	b, err := os.ReadFile(pids)
	if err != nil {
		t.Fatal(err)
	}
	pgid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %q", b)
	}
	clitest.Eventually(t, 5*time.Second, "the hung worker's process group gone", func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	})
	if !strings.Contains(r.Out, "timed out after 500ms") {
		t.Fatalf("no timeout failure line:\n%s", r.Out)
	}
	e.drained("ORDERS", "g-m1")
}

// --batch with --exec: one command per batch, the batch as JSON lines on
// its stdin, in order.
func TestConsumeExecBatch(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	e.publishKeyed(100, 7)
	rec := filepath.Join(t.TempDir(), "rec")
	worker := fmt.Sprintf(`sh -c 'echo "batch $CG_BATCH $CG_BATCH_SIZE" >> %[1]s.env; cat >> %[1]s'`, rec)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "ORDERS", "g", "m1", "--count", "100",
		"--exec", worker, "--batch", "10")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	lines := clitest.Lines(t, readFile(t, rec))
	if len(lines) != 100 {
		t.Fatalf("%d lines, want 100", len(lines))
	}
	for i, l := range lines {
		if l["seq"] != float64(i+1) || l["data"] != strconv.Itoa(i) || l["key"] != fmt.Sprintf("k%d", i%7) || l["subject"] != fmt.Sprintf("orders.k%d", i%7) {
			t.Fatalf("line %d: %v", i, l)
		}
	}
	if envs := strings.Count(readFile(t, rec+".env"), "batch "); envs < 10 {
		t.Fatalf("%d batch commands for 100 messages in batches of 10", envs)
	}
	e.drained("ORDERS", "g-m1")
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// --http: each message POSTed with its metadata headers; a 500 fails the
// delivery (redelivered, then acked on the 200), nothing else repeats.
func TestConsumeHTTP(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	const n = 50
	e.publishKeyed(n, 5)
	var mu sync.Mutex
	seen := map[string]int{} // seq -> posts
	var bad []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 64)
		nb, _ := r.Body.Read(b)
		mu.Lock()
		defer mu.Unlock()
		seq := r.Header.Get("Cg-Stream-Seq")
		seen[seq]++
		if r.Header.Get("Cg-Subject") != "orders."+r.Header.Get("Cg-Key") || r.Header.Get("Cg-Stream") != "ORDERS" ||
			r.Header.Get("Cg-Delivered") != strconv.Itoa(seen[seq]) || r.Method != http.MethodPost {
			bad = append(bad, fmt.Sprintf("%s %v", r.Method, r.Header))
		}
		if s, _ := strconv.Atoi(seq); string(b[:nb]) != strconv.Itoa(s-1) {
			bad = append(bad, "body "+string(b[:nb])+" for seq "+seq)
		}
		if r.Header.Get("Cg-Key") == "k1" && r.Header.Get("Cg-Delivered") == "1" {
			http.Error(w, "k1 not yet", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "ORDERS", "g", "m1", "--count", strconv.Itoa(n),
		"--http", srv.URL+"/orders", "--concurrency", "4")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bad) > 0 {
		t.Fatalf("bad requests: %v", bad)
	}
	for seq := 1; seq <= n; seq++ {
		want := 1
		if (seq-1)%5 == 1 {
			want = 2
		}
		if seen[strconv.Itoa(seq)] != want {
			t.Fatalf("seq %d posted %d times, want %d", seq, seen[strconv.Itoa(seq)], want)
		}
	}
	if !strings.Contains(r.Out, "HTTP 500 Internal Server Error: k1 not yet") {
		t.Fatalf("no failure line with the answer:\n%s", r.Out)
	}
	e.drained("ORDERS", "g-m1")
}

// Bad worker flags: one line naming the mistake, exit 2, nothing joined.
func TestConsumeWorkerBadInput(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	before := clitest.Inventory(t, e.js)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--exec", ""}, []string{"--exec", "no command"}},
		{[]string{"--exec", "   "}, []string{"--exec", "no command"}},
		{[]string{"--exec", "sh -c 'echo"}, []string{"--exec", "unbalanced single quote"}},
		{[]string{"--exec", `sh -c "echo`}, []string{"--exec", "unbalanced double quote"}},
		{[]string{"--exec", `cat \`}, []string{"--exec", "backslash"}},
		{[]string{"--exec", "cat | wc"}, []string{"--exec", "shell syntax", "sh -c"}},
		{[]string{"--exec", "no-such-command-here"}, []string{"--exec", "not found"}},
		{[]string{"--worker", "'python3"}, []string{"--worker", "unbalanced"}},
		{[]string{"--exec", "cat", "--http", "http://127.0.0.1:1/"}, []string{"--exec and --http", "cannot be combined"}},
		{[]string{"--exec", "cat", "--worker", "cat"}, []string{"--exec and --worker", "cannot be combined"}},
		{[]string{"--exec", "cat", "--exec-timeout", "0s"}, []string{"--exec-timeout", "positive"}},
		{[]string{"--exec", "cat", "--exec-timeout", "-1s"}, []string{"--exec-timeout", "negative"}},
		{[]string{"--exec-timeout", "1s"}, []string{"--exec-timeout", "only with --exec"}},
		{[]string{"--http", "127.0.0.1:8080"}, []string{"--http", "http://"}},
		{[]string{"--http", "ftp://x/"}, []string{"--http", "http://"}},
		{[]string{"--http", "http://"}, []string{"--http", "with a host"}},
		{[]string{"--exec", "cat", "--sleep", "1s"}, []string{"--sleep", "demo handler", "--exec"}},
		{[]string{"--worker", "cat", "--fail-subject", "orders.k1"}, []string{"--fail-subject", "demo handler"}},
		{[]string{"--worker", "cat", "--batch", "10"}, []string{"--batch", "--exec only"}},
		{[]string{"--http", "http://127.0.0.1:1/", "--batch", "10"}, []string{"--batch", "--exec only"}},
	} {
		args := append([]string{"static", "consume", "ORDERS", "g", "m1", "--count", "1"}, c.args...)
		r := clitest.Run(t, cmd.Run, e.env, args...)
		if r.Code != 2 {
			t.Errorf("%q: exit %d, want 2; stderr %q", c.args, r.Code, r.Err)
			continue
		}
		errs := clitest.ErrorLines(r.Err)
		if len(errs) != 1 {
			t.Errorf("%q: %d error lines, want 1: %q", c.args, len(errs), r.Err)
			continue
		}
		clitest.OneLine(t, strings.Join(c.args, " "), errs[0], c.want...)
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("a refused consume changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// Elastic groups take the same workers: --exec per message, per-key order
// kept with --concurrency, the key read with the partitioning filter.
func TestConsumeExecElastic(t *testing.T) {
	e := newEnv(t, 4)
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1")
	const n = 200
	for i := range n {
		if _, err := e.js.Publish(context.Background(), fmt.Sprintf("plain.k%d", i%9), []byte(strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	rec := filepath.Join(t.TempDir(), "rec")
	worker := fmt.Sprintf(`sh -c 'echo "$CG_KEY $CG_STREAM_SEQ $CG_DELIVERED $CG_SUBJECT $CG_STREAM" >> %s'`, rec)
	r := clitest.Run(t, cmd.Run, e.env, "--json", "elastic", "consume", "PLAIN", "e", "m1", "--count", strconv.Itoa(n),
		"--exec", worker, "--concurrency", "4")
	if r.Code != 0 {
		t.Fatalf("consume: %s", r)
	}
	recs := readRecords(t, rec)
	checkRecords(t, recs, n)
	for _, x := range recs {
		if x.rest[0] != "plain."+x.key || x.rest[1] != "PLAIN" {
			t.Fatalf("record %+v: want CG_SUBJECT plain.<CG_KEY> and CG_STREAM PLAIN", x)
		}
	}
	e.drained("PLAIN-e", "m1")
}

// The long-lived worker (Python, answering out of order) keeps every
// key's order with --concurrency 8, and one that dies mid-flight loses
// nothing: what it had not answered is redelivered to its successor.
func TestConsumeLongWorker(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed")
	}
	for _, c := range []struct {
		name  string
		crash bool
	}{{"out of order", false}, {"crash", true}} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, 4)
			e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
			const n = 500
			e.publishKeyed(n, 20)
			dir := t.TempDir()
			rec, marker := filepath.Join(dir, "rec"), filepath.Join(dir, "crashed")
			w := "python3 testdata/worker_ooo.py " + rec
			if c.crash {
				w += " 100 " + marker
			}
			r := clitest.Run(t, cmd.Run, e.env, "--json", "static", "consume", "ORDERS", "g", "m1", "--count", strconv.Itoa(n),
				"--worker", w, "--concurrency", "8")
			if r.Code != 0 {
				t.Fatalf("consume: %s", r)
			}
			recs := readRecords(t, rec)
			checkRecordsOf(t, recs, n, !c.crash)
			e.drained("ORDERS", "g-m1")
			redelivered := 0
			for _, x := range recs {
				if x.delivered > 1 {
					redelivered++
				}
			}
			if c.crash {
				if _, err := os.Stat(marker); err != nil || redelivered == 0 || !strings.Contains(r.Out, "before answering") {
					t.Fatalf("the worker did not crash with messages in flight (marker: %v, %d redelivered):\n%s", err, redelivered, r.Err)
				}
			} else if redelivered != 0 {
				t.Fatalf("%d redeliveries without a crash", redelivered)
			}
		})
	}
}

// The examples docs/workers.md shows run as it says: the shell one per
// message, the Python one long-lived; an "invalid" order fails each time
// and is dead-lettered after --max-deliver 2.
func TestWorkerExamples(t *testing.T) {
	forms := [][]string{{"--exec", "../../docs/examples/handle.sh"}}
	if _, err := exec.LookPath("python3"); err == nil {
		forms = append(forms, []string{"--worker", "python3 ../../docs/examples/worker.py", "--concurrency", "4"})
	}
	for _, form := range forms {
		t.Run(form[0], func(t *testing.T) {
			e := newEnv(t, 4)
			e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
			if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DLQ", Subjects: []string{"dlq.orders"}}); err != nil {
				t.Fatal(err)
			}
			for i, body := range []string{"2 books", "1 lamp", "invalid", "3 pens", "1 desk"} {
				if _, err := e.js.Publish(context.Background(), fmt.Sprintf("orders.k%d", i%2), []byte(body)); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"--json", "static", "consume", "ORDERS", "g", "m1", "--count", "4", "--max-deliver", "2", "--dead-letter", "dlq.orders"}, form...)
			r := clitest.Run(t, cmd.Run, e.env, args...)
			if r.Code != 0 {
				t.Fatalf("consume: %s", r)
			}
			if got := strings.Count(r.Err, "): "); got != 4 || !strings.Contains(r.Err, "order k1 (seq 4, delivery 1): 3 pens") {
				t.Fatalf("%d order lines on stderr, want 4:\n%s", got, r.Err)
			}
			e.drained("ORDERS", "g-m1")
			clitest.Eventually(t, 5*time.Second, "the invalid order dead-lettered", func() bool {
				s, err := e.js.Stream(context.Background(), "DLQ")
				if err != nil {
					return false
				}
				si, err := s.Info(context.Background())
				return err == nil && si.State.Msgs == 1
			})
		})
	}
}

// A refusal is poison at once, without the retries: an HTTP 4xx from
// --http, a "poison":true result from --worker. Each is dead-lettered after
// one delivery while the rest is acked.
func TestConsumeWorkerPoison(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("Cg-Subject"), ".refund") {
			http.Error(w, "refunds are not accepted here", http.StatusUnprocessableEntity)
		}
	}))
	defer srv.Close()
	forms := [][]string{{"--http", srv.URL}}
	if _, err := exec.LookPath("python3"); err == nil {
		py := `import json,sys
for l in sys.stdin:
    m = json.loads(l)
    r = {"id": m["id"], "ok": True}
    if m["subject"].endswith(".refund"):
        r = {"id": m["id"], "error": "no refunds", "poison": True}
    print(json.dumps(r), flush=True)
`
		forms = append(forms, []string{"--worker", "python3 -c '" + py + "'"})
	}
	for _, form := range forms {
		t.Run(form[0], func(t *testing.T) {
			e := shopEnv(t)
			e.publish("shop.k1.created", "shop.k1.refund", "shop.k2.created", "shop.k1.created")
			args := append([]string{"--json", "static", "consume", "SHOP", "g", "m1", "--count", "3", "--max-deliver", "5", "--dead-letter", "dlq.shop"}, form...)
			r := clitest.Run(t, cmd.Run, e.env, args...)
			if r.Code != 0 {
				t.Fatalf("consume: %s", r)
			}
			clitest.Eventually(t, 5*time.Second, "the refund dead-lettered", func() bool { return len(e.deadLetters()) == 1 })
			ls := consumeLines(t, r.Out)
			failed := 0
			for _, l := range ls {
				if l.Type == "msg" && l.Failed == true {
					failed++
				}
			}
			if failed != 1 {
				t.Fatalf("%d failed deliveries, want 1 (poison: no retry)\n%s", failed, r.Out)
			}
			if dl := e.deadLetters(); string(dl[0].Data) != "shop.k1.refund" || dl[0].Header.Get("Cg-Deliveries") != "1" {
				t.Fatalf("dead letter %q %v", dl[0].Data, dl[0].Header)
			}
			e.drained("SHOP", "g-m1")
		})
	}
}
