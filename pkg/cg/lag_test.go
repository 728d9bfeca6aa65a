package cg_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// published is one message the test sent: where it landed and when.
type published struct {
	seq           uint64
	partition     int
	before, after time.Time
}

// keysByPartition finds a key hashing to each of n partitions under the
// filter orders.* hashing wildcard 1.
func keysByPartition(t *testing.T, n int) []string {
	t.Helper()
	keys := make([]string, n)
	found := 0
	for i := 0; found < n; i++ {
		k := fmt.Sprintf("k%d", i)
		p, err := partition.PartitionOfSubject("orders."+k, "orders.*", n, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		if keys[p] == "" {
			keys[p] = k
			found++
		}
	}
	return keys
}

// publishKnown publishes counts[p] messages on partition p's key, round
// robin over the partitions, and records each message's sequence and the
// time around its publish.
func publishKnown(t *testing.T, js jetstream.JetStream, keys []string, counts []int) []published {
	t.Helper()
	var out []published
	left := append([]int(nil), counts...)
	for more := true; more; {
		more = false
		for p := range left {
			if left[p] == 0 {
				continue
			}
			left[p]--
			more = true
			before := time.Now()
			ack, err := js.Publish(context.Background(), "orders."+keys[p], []byte("x"))
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, published{seq: ack.Sequence, partition: p, before: before, after: time.Now()})
		}
	}
	return out
}

// takeAndAck fetches n messages from consumer name and acks the first
// acked of them, leaving the rest delivered but unacked.
func takeAndAck(t *testing.T, js jetstream.JetStream, stream, name string, n, acked int) []uint64 {
	t.Helper()
	ctx := context.Background()
	cons, err := js.Consumer(ctx, stream, name)
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cons.Fetch(n, jetstream.FetchMaxWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	i := 0
	for m := range batch.Messages() {
		md, _ := m.Metadata()
		seqs = append(seqs, md.Sequence.Stream)
		if i < acked {
			if err := m.DoubleAck(ctx); err != nil {
				t.Fatal(err)
			}
		}
		i++
	}
	if len(seqs) != n {
		t.Fatalf("fetched %d messages, want %d", len(seqs), n)
	}
	return seqs
}

// wantLag is the expected pending count and oldest message of partition p
// counting from sequence from.
// Sequences in gone (acked on a work queue) are no longer there.
func wantLag(pubs []published, p int, from uint64, gone ...uint64) (pending int, oldest *published) {
	for i := range pubs {
		if pubs[i].partition != p || pubs[i].seq < from || slices.Contains(gone, pubs[i].seq) {
			continue
		}
		pending++
		if oldest == nil {
			oldest = &pubs[i]
		}
	}
	return pending, oldest
}

func checkPartition(t *testing.T, gi health.GroupInfo, pubs []published, p int, from uint64, gone ...uint64) {
	t.Helper()
	var pl *health.PartitionLag
	for i := range gi.PartitionLag {
		if gi.PartitionLag[i].Partition == p {
			pl = &gi.PartitionLag[i]
		}
	}
	if pl == nil || !pl.Known {
		t.Fatalf("partition %d: no known lag in %+v (error %q)", p, gi.PartitionLag, gi.LagError)
	}
	pending, oldest := wantLag(pubs, p, from, gone...)
	if len(gone) > 0 {
		from = pl.FromSeq // a work queue counts from its first message
	}
	if pl.Pending != uint64(pending) || pl.FromSeq != from {
		t.Errorf("partition %d: pending %d from %d, want %d from %d", p, pl.Pending, pl.FromSeq, pending, from)
	}
	if oldest == nil {
		if pl.OldestSeq != 0 || !pl.Oldest.IsZero() {
			t.Errorf("partition %d: oldest %d at %v, want none", p, pl.OldestSeq, pl.Oldest)
		}
		return
	}
	checkOldest(t, fmt.Sprintf("partition %d", p), gi.SampledAt, pl.Lag, oldest)
}

// checkOldest checks a lag's oldest message against the one published.
func checkOldest(t *testing.T, what string, sampled time.Time, l health.Lag, want *published) {
	t.Helper()
	const slack = 5 * time.Millisecond
	if l.OldestSeq != want.seq {
		t.Errorf("%s: oldest seq %d, want %d", what, l.OldestSeq, want.seq)
	}
	if l.Oldest.Before(want.before.Add(-slack)) || l.Oldest.After(want.after.Add(slack)) {
		t.Errorf("%s: oldest stored at %v, published between %v and %v", what, l.Oldest, want.before, want.after)
	}
	minAge, maxAge := sampled.Sub(want.after)-slack, sampled.Sub(want.before)+slack
	if l.Age() < minAge || l.Age() > maxAge {
		t.Errorf("%s: age %v, want between %v and %v", what, l.Age(), minAge, maxAge)
	}
}

// TestStaticLagKnownBacklog builds a known backlog on a static group and
// checks the lag per partition and per member with each reading method:
// m1 has acked some and holds one unacked, m2 never joined (counted from
// the stream start) until it has a saved position to resume from.
func TestStaticLagKnownBacklog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    jetstream.StreamConfig
		method string
	}{
		{"limits with direct get", jetstream.StreamConfig{AllowDirect: true}, cg.LagDirectGet},
		{"limits without direct get", jetstream.StreamConfig{}, cg.LagProbe},
		{"work queue without direct get", jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}, cg.LagSubjectCounts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := natstest.RunServer(t)
			_, js := natstest.JetStream(t, s)
			ctx := ctxT(t)
			cfg := tc.cfg
			cfg.Name, cfg.Subjects = "ORDERS", []string{"orders.*"}
			cfg.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				t.Fatal(err)
			}
			c := cg.New(js)
			if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2"}}); err != nil {
				t.Fatal(err)
			}
			pubs := publishKnown(t, js, keysByPartition(t, 4), []int{5, 3, 4, 2})
			// m1 (partitions 0-1) takes 4 messages, acks 3, holds 1.
			if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "g-m1", FilterSubjects: []string{"0.>", "1.>"}, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				t.Fatal(err)
			}
			seqs := takeAndAck(t, js, "ORDERS", "g-m1", 4, 3)
			time.Sleep(50 * time.Millisecond) // ages worth measuring

			gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "g")
			if err != nil {
				t.Fatal(err)
			}
			if gi.LagMethod != tc.method || gi.LagError != "" || len(gi.PartitionLag) != 4 {
				t.Fatalf("method %q error %q partitions %d", gi.LagMethod, gi.LagError, len(gi.PartitionLag))
			}
			m1From, gone := seqs[2]+1, []uint64(nil) // just after the ack floor
			if tc.method == cg.LagSubjectCounts {
				m1From, gone = 1, seqs[:3] // a work queue drops what is acked
			}
			checkPartition(t, gi, pubs, 0, m1From, gone...)
			checkPartition(t, gi, pubs, 1, m1From, gone...)
			checkPartition(t, gi, pubs, 2, 1, gone...)
			checkPartition(t, gi, pubs, 3, 1, gone...)

			m1, m2 := gi.Members[0], gi.Members[1]
			if m1.Lag == nil || m1.Lag.Pending != 5 || m1.AckPending != 1 {
				t.Fatalf("m1: lag %+v ack pending %d, want 8-3=5 pending", m1.Lag, m1.AckPending)
			}
			// m1's oldest pending is the one it holds unacked.
			for i := range pubs {
				if pubs[i].seq == seqs[3] {
					checkOldest(t, "m1", gi.SampledAt, *m1.Lag, &pubs[i])
				}
			}
			if m2.ConsumerExists || m2.Lag == nil || m2.Lag.Pending != 6 || m2.Lag.OldestSeq == 0 {
				t.Fatalf("m2 (never joined): %+v lag %+v, want its 6 messages pending", m2, m2.Lag)
			}

			// A member known only by its saved position resumes after it,
			// so that is where its lag is counted from.
			if tc.method == cg.LagSubjectCounts {
				return
			}
			kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: cg.PositionsBucket})
			if err != nil {
				t.Fatal(err)
			}
			floor := pubs[len(pubs)-4].seq
			raw, _ := json.Marshal(cg.Position{AckFloor: floor, Saved: time.Now()})
			if _, err := kv.Put(ctx, "ORDERS.g.m2", raw); err != nil {
				t.Fatal(err)
			}
			ms, err := c.MemberInfo(ctx, cg.KindStatic, "ORDERS", "g", "m2")
			if err != nil {
				t.Fatal(err)
			}
			p2, _ := wantLag(pubs, 2, floor+1)
			p3, _ := wantLag(pubs, 3, floor+1)
			if ms.Lag == nil || ms.Lag.Pending != uint64(p2+p3) {
				t.Fatalf("m2 after saved position %d: lag %+v, want %d", floor, ms.Lag, p2+p3)
			}
		})
	}
}

// TestElasticLagKnownBacklog builds a known backlog in an elastic group's
// work stream: partition counts come from what is still in it.
func TestElasticLagKnownBacklog(t *testing.T) {
	c, js, _ := elasticSetup(t, 4)
	ctx := ctxT(t)
	if _, err := c.AddMembers(ctx, "ORDERS", "g", []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	counts := []int{2, 4, 3, 5}
	pubs := publishKnown(t, js, keysByPartition(t, 4), counts)
	natstest.Eventually(t, 10*time.Second, "the work stream to source everything", func() bool {
		s, err := js.Stream(ctx, "ORDERS-g")
		return err == nil && s.CachedInfo().State.Msgs == 14
	})
	// The work stream numbers its messages itself, in the order sourced.
	byPart := map[int][]uint64{}
	ws, _ := js.Stream(ctx, "ORDERS-g")
	for seq := uint64(1); seq <= 14; seq++ {
		m, err := ws.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		_, p := partition.StripPartition(m.Subject)
		byPart[p] = append(byPart[p], seq)
	}
	// m2 (partitions 2-3) takes 3 messages and acks 2.
	if _, err := js.CreateConsumer(ctx, "ORDERS-g", jetstream.ConsumerConfig{Name: "m2", FilterSubjects: []string{"2.orders.*", "3.orders.*"}, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	seqs := takeAndAck(t, js, "ORDERS-g", "m2", 3, 2)
	time.Sleep(20 * time.Millisecond)

	gi, err := c.Info(ctx, cg.KindElastic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if gi.LagMethod != cg.LagDirectGet || gi.LagError != "" {
		t.Fatalf("method %q error %q", gi.LagMethod, gi.LagError)
	}
	left := map[int]int{0: 2, 1: 4, 2: 3, 3: 5}
	for _, s := range seqs[:2] {
		for p, ss := range byPart {
			if slices.Contains(ss, s) {
				left[p]--
			}
		}
	}
	for p := range 4 {
		pl := gi.PartitionLag[p]
		if !pl.Known || pl.Pending != uint64(left[p]) || gi.Backlog[p] != uint64(left[p]) {
			t.Errorf("partition %d: lag %+v backlog %d, want %d", p, pl, gi.Backlog[p], left[p])
		}
		// The oldest in the work stream is the first still there; its
		// stored time is when it was sourced, after it was published.
		if pl.Pending > 0 && (pl.OldestSeq == 0 || pl.Oldest.Before(pubs[0].before.Add(-5*time.Millisecond)) || pl.AgeSeconds <= 0) {
			t.Errorf("partition %d: oldest %d at %v age %v", p, pl.OldestSeq, pl.Oldest, pl.Age())
		}
	}
	m1, m2 := gi.Members[0], gi.Members[1]
	if m1.ConsumerExists || m1.Lag == nil || m1.Lag.Pending != uint64(left[0]+left[1]) {
		t.Errorf("m1 (not running): lag %+v, want %d", m1.Lag, left[0]+left[1])
	}
	if m2.Lag == nil || m2.Lag.Pending != uint64(left[2]+left[3]) || m2.Lag.OldestSeq != seqs[2] {
		t.Errorf("m2: lag %+v, want %d pending, oldest seq %d (held unacked)", m2.Lag, left[2]+left[3], seqs[2])
	}
}

// TestLagDegradesWhenOutOfTime: partitions not read within LagTimeout are
// unknown and say so; info itself still answers.
func TestLagDegradesWhenOutOfTime(t *testing.T) {
	_, c, js := setup(t)
	ctx := ctxT(t)
	if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	publishKnown(t, js, keysByPartition(t, 10), []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	defer func(d time.Duration) { cg.LagTimeout = d }(cg.LagTimeout)
	cg.LagTimeout = time.Nanosecond
	gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "g")
	if err != nil {
		t.Fatal(err)
	}
	if gi.LagError == "" || gi.Members[0].Lag != nil {
		t.Fatalf("lag error %q, m1 lag %+v", gi.LagError, gi.Members[0].Lag)
	}
	for _, pl := range gi.PartitionLag {
		if pl.Known {
			t.Fatalf("partition %d known in %s", pl.Partition, gi.LagError)
		}
	}
	t.Log(gi.LagError)
}

// BenchmarkStaticInfoLag256 measures a static info, lag included, on 256
// partitions with 20,000 messages over 2,000 keys and members m1 (caught
// up on half its partitions) and m2 (never joined), per reading method.
func BenchmarkStaticInfoLag256(b *testing.B) {
	for _, tc := range []struct {
		name string
		cfg  jetstream.StreamConfig
	}{
		{cg.LagDirectGet, jetstream.StreamConfig{AllowDirect: true}},
		{cg.LagProbe, jetstream.StreamConfig{}},
		{cg.LagSubjectCounts, jetstream.StreamConfig{Retention: jetstream.WorkQueuePolicy}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s := natstest.RunServer(b)
			_, js := natstest.JetStream(b, s)
			ctx := context.Background()
			cfg := tc.cfg
			cfg.Name, cfg.Subjects = "ORDERS", []string{"orders.*"}
			cfg.SubjectTransform = &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(256,1)}}.orders.{{wildcard(1)}}"}
			if _, err := js.CreateStream(ctx, cfg); err != nil {
				b.Fatal(err)
			}
			c := cg.New(js)
			if _, err := c.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 256, Members: []string{"m1", "m2"}}); err != nil {
				b.Fatal(err)
			}
			for i := range 20000 {
				if _, err := js.PublishAsync(fmt.Sprintf("orders.k%d", i%2000), nil); err != nil {
					b.Fatal(err)
				}
			}
			<-js.PublishAsyncComplete()
			var fs []string
			for p := range 128 {
				fs = append(fs, fmt.Sprintf("%d.>", p))
			}
			if _, err := js.CreateConsumer(ctx, "ORDERS", jetstream.ConsumerConfig{Durable: "g-m1", FilterSubjects: fs, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
				b.Fatal(err)
			}
			cons, _ := js.Consumer(ctx, "ORDERS", "g-m1")
			batch, _ := cons.Fetch(5000, jetstream.FetchMaxWait(10*time.Second))
			for m := range batch.Messages() {
				_ = m.Ack()
			}
			b.ResetTimer()
			for range b.N {
				gi, err := c.Info(ctx, cg.KindStatic, "ORDERS", "g")
				if err != nil || gi.LagError != "" {
					b.Fatal(err, gi.LagError)
				}
			}
		})
	}
}
