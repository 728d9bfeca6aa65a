package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/nats-io/nats.go/jetstream"
)

// Every numeric flag above its ceiling (pkg/cg/limits.go,
// internal/traffic) is refused with one line naming the ceiling, exit 2,
// before anything is dialled, created or joined.
func TestAboveCeilingIsRefusedChangingNothing(t *testing.T) {
	url, js := world(t)
	before := takeSnapshot(t, js)
	consume := []string{"static", "consume", "ORDERS", "sg", "m1"}
	econsume := []string{"elastic", "consume", "PLAIN", "eg", "a"}
	with := func(base []string, more ...string) []string { return append(append([]string{}, base...), more...) }
	for _, tc := range []badCase{
		{name: "concurrency", args: with(consume, "--concurrency", "100000"),
			want: []string{"--concurrency 100000 is above cg's ceiling of 1024", "2.2 KB", "use at most 1024"}},
		{name: "concurrency, elastic", args: with(econsume, "--concurrency", "1025"),
			want: []string{"--concurrency 1025 is above cg's ceiling of 1024"}},
		{name: "max-ack-pending", args: with(consume, "--max-ack-pending", "100000"),
			want: []string{"--max-ack-pending 100000 is above cg's ceiling of 4096", "use at most 4096"}},
		{name: "max-ack-pending with concurrency", args: with(consume, "--concurrency", "8", "--max-ack-pending", "5000"),
			want: []string{"--max-ack-pending 5000 is above cg's ceiling of 4096"}},
		{name: "batch", args: with(consume, "--batch", "1000000"),
			want: []string{"--batch 1000000 is above cg's ceiling of 1024"}},
		{name: "max-deliver", args: with(consume, "--max-deliver", "1000000"),
			want: []string{"--max-deliver 1000000 is above cg's ceiling of 1000"}},
		{name: "backoff entries", args: with(consume, "--max-deliver", "5", "--backoff", strings.TrimSuffix(strings.Repeat("1s,", 101), ",")),
			want: []string{"--backoff with 101 delays is above cg's ceiling of 100"}},
		{name: "backoff delay", args: with(consume, "--max-deliver", "5", "--backoff", "1s,48h"),
			want: []string{"--backoff delay 48h0m0s is above cg's ceiling of 24h0m0s"}},
		{name: "publish keys", args: []string{"publish", "orders.{key}", "--keys", "10000000"},
			want: []string{"--keys 10000000 is above cg's ceiling of 100000"}},
		{name: "publish size", args: []string{"publish", "orders.{key}", "--size", "100000000"},
			want: []string{"--size 100000000 is above cg's ceiling of 1048576 bytes"}},
		{name: "bench concurrency", args: []string{"bench", "--concurrency", "5000"},
			want: []string{"--concurrency", "from 1 to 1024"}},
		{name: "bench max-ack-pending", args: []string{"bench", "--max-ack-pending", "10000"},
			want: []string{"--max-ack-pending", "from 1 to 4096"}},
		{name: "bench keys", args: []string{"bench", "--keys", "10000000"},
			want: []string{"--keys 10000000 is above cg's ceiling of 100000"}},
		{name: "demo concurrency", args: []string{"demo", "--concurrency", "100000"},
			want: []string{"--concurrency 100000 is above cg's ceiling of 1024"}},
		{name: "demo keys", args: []string{"demo", "--keys", "10000000"},
			want: []string{"--keys 10000000 is above cg's ceiling of 100000"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, []string{"NATS_URL=" + url}, tc.args...)
			if r.Code != 2 {
				t.Errorf("exit %d, want 2\n%s", r.Code, r)
			}
			if r.Took > 4*time.Second {
				t.Errorf("took %s to refuse\n%s", r.Took, r)
			}
			checkErrorLine(t, r, 2, tc.want, nil)
			if diff := before.diff(takeSnapshot(t, js)); len(diff) > 0 {
				t.Errorf("cg %q changed the server:\n%s", tc.args, strings.Join(diff, "\n"))
				before = takeSnapshot(t, js)
			}
		})
	}
}

// On a partition-layout group each partition runs the options once: a
// --concurrency within the flag's ceiling can still be too much for the
// group's 256 partitions. The join is refused in one line naming the
// ceiling for this group, exit 2, and no consumer is made.
func TestPartitionLayoutCeilingIsRefusedChangingNothing(t *testing.T) {
	s, js, _ := clitest.Server(t)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "WIDE", Subjects: []string{"wide.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "wide.*", Destination: "{{partition(256,1)}}.wide.{{wildcard(1)}}"},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).CreateStatic(ctx, "WIDE", "g", cg.StaticConfig{MaxMembers: 256, Members: []string{"m1"}, Layout: cg.LayoutPartition}); err != nil {
		t.Fatal(err)
	}
	before := takeSnapshot(t, js)
	r := run(t, []string{"NATS_URL=" + s.ClientURL()}, "static", "consume", "WIDE", "g", "m1", "--concurrency", "100")
	if r.Code != 2 {
		t.Fatalf("exit %d, want 2\n%s", r.Code, r)
	}
	checkErrorLine(t, r, 2, []string{"--concurrency 100 is above cg's ceiling of 64 for this group", "256 partitions", "use at most --concurrency 64"}, nil)
	if diff := before.diff(takeSnapshot(t, js)); len(diff) > 0 {
		t.Fatalf("the refused consume changed the server:\n%s", strings.Join(diff, "\n"))
	}
}
