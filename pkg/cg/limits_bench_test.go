package cg_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestMeasureConsumerFilters times the server creating one member
// consumer with N filter subjects, the measurement cg.MaxPartitions is
// chosen from. It is slow by nature, so it runs only when asked:
//
//	CG_MEASURE_FILTERS=1024,4096,8192 go test -run TestMeasureConsumerFilters -v ./pkg/cg/
func TestMeasureConsumerFilters(t *testing.T) {
	spec := os.Getenv("CG_MEASURE_FILTERS")
	if spec == "" {
		t.Skip("set CG_MEASURE_FILTERS=1024,4096 to measure consumer creation")
	}
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range splitInts(t, spec) {
		filters := partition.PartitionFilters(upTo(f), []string{"s.>"})
		for i := range filters {
			filters[i] = "s." + filters[i] // s.<p>.s.> stays inside the stream's subjects
		}
		start := time.Now()
		_, err := js.CreateConsumer(ctx, "S", jetstream.ConsumerConfig{
			Durable: "m" + strconv.Itoa(f), AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: filters,
			PriorityGroups: []string{cg.PriorityGroup}, PriorityPolicy: jetstream.PriorityPolicyPinned, PinnedTTL: 2 * time.Second,
		})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("%d filters: %v", f, err)
		}
		t.Logf("consumer with %6d filter subjects created in %v", f, took.Round(time.Millisecond))
	}
}

func splitInts(t *testing.T, s string) []int {
	var out []int
	for _, f := range splitComma(s) {
		n, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("%q: %v", f, err)
		}
		out = append(out, n)
	}
	return out
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

func upTo(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// bigElastic stores an elastic group of n partitions the way the
// reference would (no ceiling applies to what another implementation
// writes) and makes its work stream, with a few members that never
// joined: every partition's lag is then read.
func bigElastic(tb testing.TB, js jetstream.JetStream, stream, group string, n int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subj := strings.ToLower(stream) + ".*"
	si, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subj}})
	if err != nil {
		tb.Fatal(err)
	}
	cfg := cg.ElasticConfig{MaxMembers: n, Members: []string{"m1", "m2", "m3", "m4"},
		PartitioningFilters: []cg.PartitioningFilter{{Filter: subj, PartitioningWildcards: []int{1}}}}
	raw, _ := json.Marshal(cfg)
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.ElasticBucket})
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := kv.Put(ctx, cg.Key(stream, group), raw); err != nil {
		tb.Fatal(err)
	}
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: cg.WorkStreamName(stream, group), Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew,
		AllowDirect: true, Storage: si.CachedInfo().Config.Storage, Replicas: 1,
		Sources: []*jetstream.StreamSource{{Name: stream, SubjectTransforms: cg.ElasticTransforms(cfg)}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	// Messages on many keys, so info has partitions to read.
	for i := range bigMsgs {
		if _, err := js.PublishAsync(strings.TrimSuffix(subj, "*")+"k"+strconv.Itoa(i), nil); err != nil {
			tb.Fatal(err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		tb.Fatal("publish did not complete")
	}
	natstest.Eventually(tb, 30*time.Second, "work stream sourced the messages", func() bool {
		ws, err := js.Stream(ctx, cg.WorkStreamName(stream, group))
		return err == nil && ws.CachedInfo().State.Msgs == bigMsgs
	})
}

// bigMsgs is how many messages bigElastic publishes.
const bigMsgs = 2000

// BenchmarkInfoPartitions is Info of an elastic group on groups of 1000, 4000 and
// 16000 partitions (above cg's create ceiling, as the reference can store
// them), four members that never joined: every partition is read.
func BenchmarkInfoPartitions(b *testing.B) {
	for _, n := range []int{1000, 4000, 16000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.JetStream(b, s)
			bigElastic(b, js, "ORDERS", "g", n)
			c := cg.New(js)
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				gi, err := c.Info(ctx, cg.KindElastic, "ORDERS", "g")
				if err != nil {
					b.Fatal(err)
				}
				if len(gi.PartitionLag) != n || gi.LagError != "" {
					b.Fatalf("%d partition lags, error %q", len(gi.PartitionLag), gi.LagError)
				}
			}
		})
	}
}
