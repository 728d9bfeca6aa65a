package publish_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/cmd/publish"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func setup(t *testing.T) (jetstream.JetStream, func(string) string) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	_, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return js, clitest.Env("NATS_URL=" + s.ClientURL())
}

func streamMsgs(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishCounts(t *testing.T) {
	js, env := setup(t)
	r := clitest.Run(t, cmd.Run, env, "publish", "orders.{key}", "--keys", "3", "--count", "30", "--rate", "0")
	if r.Code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
	for _, want := range []string{"Published:", "30", "Keys:", "Rate:", "k0001=10 k0002=10 k0003=10"} {
		if !strings.Contains(r.Out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.Out)
		}
	}
	if !strings.Contains(r.Err, "publishing to orders.{key} over 3 keys") {
		t.Errorf("stderr: %s", r.Err)
	}
	if n := streamMsgs(t, js); n != 30 {
		t.Fatalf("stream holds %d messages, want 30", n)
	}
	// The partition transform stamped them, the headers survived.
	s, _ := js.Stream(context.Background(), "ORDERS")
	m, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if k, seq, ok := traffic.KeyOf(m.Header); !ok || k != "k0001" || seq != 1 || !strings.HasSuffix(m.Subject, ".orders.k0001") {
		t.Fatalf("first message %s %v", m.Subject, m.Header)
	}
}

func TestPublishJSON(t *testing.T) {
	js, env := setup(t)
	r := clitest.Run(t, cmd.Run, env, "--json", "publish", "orders.*", "--keys", "4", "--count", "20", "--rate", "1000/s", "--key-prefix", "cust-", "--size", "100")
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Err)
	}
	var sum publish.Summary
	if err := json.Unmarshal([]byte(r.Out), &sum); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.Out)
	}
	if sum.Published != 20 || sum.Keys != 4 || sum.Failed != 0 || sum.Subject != "orders.*" || sum.Interrupted || sum.LastStreamSeq != 20 {
		t.Fatalf("summary %+v", sum)
	}
	if len(sum.PerKey) != 4 || sum.PerKey["cust-0001"] != 5 {
		t.Fatalf("per key %v", sum.PerKey)
	}
	// 20 messages at 1000/s take at least 19ms.
	if sum.ElapsedSecs < 0.018 || sum.Rate <= 0 {
		t.Fatalf("elapsed %v rate %v", sum.ElapsedSecs, sum.Rate)
	}
	if n := streamMsgs(t, js); n != 20 {
		t.Fatalf("stream holds %d", n)
	}
}

func TestPublishInterruptedExitsZero(t *testing.T) {
	js, env := setup(t)
	a := clitest.Start(cmd.Run, env, "--json", "publish", "orders.{key}", "--count", "0", "--rate", "200/s")
	natstest.Eventually(t, 10*time.Second, "messages in the stream", func() bool { return streamMsgs(t, js) >= 20 })
	if code := a.Stop(t); code != 0 {
		t.Fatalf("exit %d after interrupt: %s", code, a.Err.String())
	}
	var sum publish.Summary
	if err := json.Unmarshal([]byte(a.Out.String()), &sum); err != nil {
		t.Fatalf("no summary after interrupt: %v\n%s", err, a.Out.String())
	}
	if !sum.Interrupted || sum.Published < 20 || sum.Published != streamMsgs(t, js) {
		t.Fatalf("summary %+v, stream %d", sum, streamMsgs(t, js))
	}
}

func TestPublishNoStreamFails(t *testing.T) {
	_, env := setup(t)
	r := clitest.Run(t, cmd.Run, env, "publish", "nowhere.{key}", "--count", "3", "--rate", "0")
	if r.Code != 1 || !strings.Contains(r.Err, "no stream stores nowhere.{key}") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Out, r.Err)
	}
}

func TestPublishUsageErrors(t *testing.T) {
	// No server: usage errors never dial.
	env := clitest.Env("NATS_URL=nats://127.0.0.1:1")
	for _, tc := range []struct {
		args []string
		says []string
	}{
		{[]string{"publish"}, []string{"one <subject-pattern>", "orders.{key}"}},
		{[]string{"publish", "a.{key}", "b"}, []string{"one <subject-pattern>"}},
		{[]string{"publish", "orders"}, []string{"no place for the key", "orders.{key}"}},
		{[]string{"publish", "orders.*.*"}, []string{"2 '*' tokens"}},
		{[]string{"publish", "orders.{key}", "--count", "-1"}, []string{"--count", "below the minimum", "1000"}},
		{[]string{"publish", "orders.{key}", "--count", "many"}, []string{"not a whole number"}},
		{[]string{"publish", "orders.{key}", "--rate", "10"}, []string{"--rate", "no unit", "10/s"}},
		{[]string{"publish", "orders.{key}", "--rate", "fast"}, []string{"not a rate", "10/s"}},
		{[]string{"publish", "orders.{key}", "--rate", "-5/s"}, []string{"negative"}},
		{[]string{"publish", "orders.{key}", "--keys", "0"}, []string{"--keys", "below the minimum"}},
		{[]string{"publish", "orders.{key}", "--duration", "5"}, []string{"no unit", "30s"}},
		{[]string{"publish", "orders.{key}", "--key-prefix", "a.b"}, []string{"--key-prefix", "cust-"}},
	} {
		r := clitest.Run(t, cmd.Run, env, tc.args...)
		if r.Code != 2 {
			t.Errorf("%v: exit %d, want 2\n%s", tc.args, r.Code, r.Err)
			continue
		}
		first := strings.SplitN(r.Err, "\n", 2)[0]
		for _, s := range tc.says {
			if !strings.Contains(first, s) {
				t.Errorf("%v: first stderr line %q lacks %q", tc.args, first, s)
			}
		}
		if r.Out != "" {
			t.Errorf("%v: stdout %q", tc.args, r.Out)
		}
	}
}
