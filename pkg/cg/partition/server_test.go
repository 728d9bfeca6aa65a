package partition

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The server is the ground truth for partitioning. These tests
// check PartitionOfSubject against the server's own transform code, in
// process, and against what a real embedded JetStream server stores.

// serverPartition runs subject through the server's transform and returns
// the partition token it wrote and the rest of the subject.
func serverPartition(t testing.TB, tr server.SubjectTransformer, subject string) (int, string) {
	t.Helper()
	out, err := tr.Match(subject)
	if err != nil {
		t.Fatalf("server transform of %q: %v", subject, err)
	}
	tok, rest, _ := strings.Cut(out, ".")
	p, err := strconv.Atoi(tok)
	if err != nil {
		t.Fatalf("server transform of %q gave %q: first token is not a number", subject, out)
	}
	return p, rest
}

// checkAgainstServer compares PartitionOfSubject with the server's
// transform tr for subject and reports whether they agree.
func checkAgainstServer(t testing.TB, tr server.SubjectTransformer, tc partitiontest.TransformCase, dest, subject string) {
	t.Helper()
	got, rest := serverPartition(t, tr, subject)
	want, err := PartitionOfSubject(subject, tc.Filter, tc.N, tc.Wildcards)
	if err != nil {
		t.Fatalf("PartitionOfSubject(%q, %q, %d, %v): %v", subject, tc.Filter, tc.N, tc.Wildcards, err)
	}
	if got != want || rest != subject {
		t.Fatalf("subject %q, filter %q, destination %q: server wrote %d.%s, PartitionOfSubject says %d", subject, tc.Filter, dest, got, rest, want)
	}
}

func TestPartitionServerTransformInProcess(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	const transforms, perTransform = 500, 100
	checked, shorthand := 0, 0
	for i := 0; i < transforms; i++ {
		tc := partitiontest.Transform(r, "")
		if i%50 == 0 {
			// The whole-subject shorthand over everything.
			tc = partitiontest.TransformCase{Filter: ">", N: partitiontest.N(r)}
		}
		if len(tc.Wildcards) == 0 {
			shorthand++
		}
		dest := partitiontest.TransformDest(r, tc.N, tc.Filter, tc.Wildcards)
		tr, err := server.NewSubjectTransform(tc.Filter, dest)
		if err != nil {
			t.Fatalf("server refused transform %q -> %q: %v", tc.Filter, dest, err)
		}
		for j := 0; j < perTransform; j++ {
			checkAgainstServer(t, tr, tc, dest, partitiontest.Subject(r, tc.Filter))
			checked++
		}
	}
	t.Logf("%d random subjects over %d transforms (%d of them the partition(N) shorthand) agree with the server's transform", checked, transforms, shorthand)
}

// An elastic group's work-queue stream uses source = filter and the
// destination ElasticTransformDestination writes; the server must accept it
// and partition as PartitionOfSubject does.
func TestPartitionServerElasticDestination(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	checked := 0
	for i := 0; i < 300; i++ {
		tc := partitiontest.Transform(r, "")
		source := tc.Filter
		if i%30 == 0 {
			// No partitioning filters at all: source '>', filter "".
			tc = partitiontest.TransformCase{Filter: ">", N: partitiontest.N(r)}
			source = ">"
		}
		dest := ElasticTransformDestination(tc.N, tc.Filter, tc.Wildcards)
		if i%30 == 0 {
			dest = ElasticTransformDestination(tc.N, "", nil)
		}
		tr, err := server.NewSubjectTransform(source, dest)
		if err != nil {
			t.Fatalf("server refused elastic transform %q -> %q: %v", source, dest, err)
		}
		for j := 0; j < 20; j++ {
			checkAgainstServer(t, tr, tc, dest, partitiontest.Subject(r, tc.Filter))
			checked++
		}
	}
	t.Logf("%d subjects through %d elastic destinations", checked, 300)
}

// Tokens are concatenated with no separator: ab+c and a+bc land in the same partition, on the server.
func TestPartitionServerConcatenation(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	checked := 0
	for _, n := range []int{1, 2, 3, 7, 10, 64, 100, 1000, 1024} {
		dest := fmt.Sprintf("{{partition(%d,1,2)}}.k.{{wildcard(1)}}.{{wildcard(2)}}", n)
		tr, err := server.NewSubjectTransform("k.*.*", dest)
		if err != nil {
			t.Fatal(err)
		}
		p1, _ := serverPartition(t, tr, "k.ab.c")
		p2, _ := serverPartition(t, tr, "k.a.bc")
		if p1 != p2 || p1 != PartitionOfKey("abc", n) {
			t.Fatalf("N=%d: server puts ab+c in %d, a+bc in %d; PartitionOfKey(abc) = %d", n, p1, p2, PartitionOfKey("abc", n))
		}
		// Every split of a random key, at every rune boundary.
		for i := 0; i < 100; i++ {
			key := []rune(partitiontest.Token(r) + partitiontest.Token(r) + partitiontest.Token(r))
			if len(key) < 2 {
				continue
			}
			want := PartitionOfKey(string(key), n)
			for k := 1; k < len(key); k++ {
				subject := "k." + string(key[:k]) + "." + string(key[k:])
				if got, _ := serverPartition(t, tr, subject); got != want {
					t.Fatalf("N=%d: server puts %q in %d, PartitionOfKey(%q) = %d", n, subject, got, string(key), want)
				}
				checked++
			}
		}
	}
	t.Logf("%d splits checked", checked)
}

// FuzzPartitionServerTransform compares PartitionOfSubject with the
// server's transform over a four-wildcard filter; the seeds run under plain
// go test.
func FuzzPartitionServerTransform(f *testing.F) {
	f.Add("alice", "buy", "x", "y", uint16(10), uint8(0))
	f.Add("ab", "c", "a", "bc", uint16(7), uint8(1))
	f.Add("日本", "é", "🚀", "-", uint16(1024), uint8(2))
	f.Add("0", "1", "2", "3", uint16(1), uint8(3))
	f.Add("a", "a", "a", "a", uint16(999), uint8(4))
	f.Fuzz(func(t *testing.T, a, b, c, d string, n16 uint16, sel uint8) {
		for _, tok := range []string{a, b, c, d} {
			if tok == "" || strings.ContainsAny(tok, ".*> \t\r\n\f") {
				return
			}
		}
		n := int(n16%1024) + 1
		// sel picks one of a few index lists, or the shorthand.
		lists := [][]int{{1}, {2, 1}, {4, 3, 2, 1}, nil, {1, 1, 3}, {3}}
		tc := partitiontest.TransformCase{Filter: "f.*.*.*.*", N: n, Wildcards: lists[int(sel)%len(lists)]}
		dest := ElasticTransformDestination(tc.N, tc.Filter, tc.Wildcards)
		tr, err := server.NewSubjectTransform(tc.Filter, dest)
		if err != nil {
			t.Fatal(err)
		}
		checkAgainstServer(t, tr, tc, dest, strings.Join([]string{"f", a, b, c, d}, "."))
	})
}

// serverStream is one stream of the real-server test: its transform and
// the subjects published to it.
type serverStream struct {
	name     string
	tc       partitiontest.TransformCase
	dest     string
	subjects []string
}

// TestPartitionServerStreams publishes random subjects to streams of a real
// embedded JetStream server whose subject transform prepends a partition
// token, reads back what the server stored, and checks every partition
// token against PartitionOfSubject.
func TestPartitionServerStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("publishes ten thousand messages")
	}
	start := time.Now()
	r := partitiontest.Rand(partitiontest.Seed(t))
	srv := natstest.RunServer(t)
	nc, js := natstest.JetStream(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Filter shapes: 1 to 4 wildcards, a leading wildcard, a trailing '>',
	// the whole-subject shorthand, and destinations as ElasticTransformDestination
	// writes them. Each stream gets a random N and wildcard selection.
	shapes := []struct {
		filter    string
		shorthand bool
		elastic   bool
	}{
		{filter: "*.s1.*"},
		{filter: "s0.*"},
		{filter: "s2.*.b.*"},
		{filter: "s3.*.*.*"},
		{filter: "s4.*.*.*.*"},
		{filter: "s5.*.x.*.>"},
		{filter: "s6.*.*", shorthand: true},
		{filter: "s7.*.*.*.*", elastic: true},
		{filter: "s8.*.>", shorthand: true, elastic: true},
		{filter: "s9.*.*.y.*.*"},
	}
	const perStream = 1100
	var streams []*serverStream
	for i, sh := range shapes {
		tc := partitiontest.TransformCase{Filter: sh.filter, N: partitiontest.N(r)}
		if !sh.shorthand {
			tc.Wildcards = partitiontest.Wildcards(r, strings.Count(sh.filter, "*"))
		}
		st := &serverStream{name: fmt.Sprintf("PART%d", i), tc: tc}
		st.dest = partitiontest.TransformDest(r, tc.N, tc.Filter, tc.Wildcards)
		if sh.elastic {
			st.dest = ElasticTransformDestination(tc.N, tc.Filter, tc.Wildcards)
		}
		for j := 0; j < perStream; j++ {
			st.subjects = append(st.subjects, partitiontest.Subject(r, tc.Filter))
		}
		streams = append(streams, st)
	}
	// One more stream for the concatenation's consequence: every split of a key
	// across two tokens, stored by the server in one partition.
	concat := &serverStream{name: "PARTCONCAT", tc: partitiontest.TransformCase{Filter: "cc.*.*", N: 1 + r.IntN(1024), Wildcards: []int{1, 2}}}
	concat.dest = partitiontest.TransformDest(r, concat.tc.N, concat.tc.Filter, concat.tc.Wildcards)
	for len(concat.subjects) < 400 {
		key := []rune(partitiontest.Token(r) + partitiontest.Token(r))
		for k := 1; k < len(key); k++ {
			concat.subjects = append(concat.subjects, "cc."+string(key[:k])+"."+string(key[k:]))
		}
	}
	streams = append(streams, concat)

	total := 0
	for _, st := range streams {
		// A stream over a leading wildcard overlaps the JetStream API's
		// subjects, which the server allows only without publish acks: its
		// messages go out as plain publishes and are counted in afterwards.
		// It overlaps the other streams too, so it is checked and deleted
		// before they are created.
		noAck := strings.HasPrefix(st.tc.Filter, "*")
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{
			Name:     st.name,
			Subjects: []string{st.tc.Filter},
			Storage:  jetstream.MemoryStorage,
			NoAck:    noAck,
			SubjectTransform: &jetstream.SubjectTransformConfig{
				Source:      st.tc.Filter,
				Destination: st.dest,
			},
		})
		if err != nil {
			t.Fatalf("create stream %s (%q -> %q): %v", st.name, st.tc.Filter, st.dest, err)
		}
		for _, subj := range st.subjects {
			if noAck {
				err = nc.Publish(subj, []byte(subj))
			} else {
				_, err = js.PublishAsync(subj, []byte(subj))
			}
			if err != nil {
				t.Fatalf("publish %q: %v", subj, err)
			}
		}
		if noAck {
			// Plain publishes are not paced by acks: let the server take
			// them in before the next stream's burst.
			if err := nc.FlushWithContext(ctx); err != nil {
				t.Fatal(err)
			}
			total += checkStoredPartitions(ctx, t, js, st)
			if err := js.DeleteStream(ctx, st.name); err != nil {
				t.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		t.Fatalf("publish acks: %v", ctx.Err())
	}
	published := time.Since(start)

	for _, st := range streams {
		if !strings.HasPrefix(st.tc.Filter, "*") {
			total += checkStoredPartitions(ctx, t, js, st)
		}
	}
	t.Logf("%d subjects over %d streams: the server's stored partition token equals PartitionOfSubject for every one (publish %v, total %v)",
		total, len(streams), published.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// checkStreamCount waits until st's stream holds every published message.
func checkStreamCount(ctx context.Context, t *testing.T, js jetstream.JetStream, st *serverStream) {
	t.Helper()
	stream, err := js.Stream(ctx, st.name)
	if err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, fmt.Sprintf("%s to hold %d messages", st.name, len(st.subjects)), func() bool {
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == uint64(len(st.subjects))
	})
}

// checkStoredPartitions reads every message of st back with an ordered
// consumer and checks its stored subject; it returns how many it checked.
func checkStoredPartitions(ctx context.Context, t *testing.T, js jetstream.JetStream, st *serverStream) int {
	t.Helper()
	checkStreamCount(ctx, t, js, st)
	cons, err := js.OrderedConsumer(ctx, st.name, jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]int{} // concatenated key -> partition, for the concat stream
	seen := 0
	for seen < len(st.subjects) {
		// Never ask for more than is left: a fetch waits for a full batch.
		batch, err := cons.Fetch(min(500, len(st.subjects)-seen), jetstream.FetchMaxWait(10*time.Second))
		if err != nil {
			t.Fatalf("%s: fetch: %v", st.name, err)
		}
		got := 0
		for msg := range batch.Messages() {
			got++
			original := string(msg.Data())
			if want := st.subjects[seen]; original != want {
				t.Fatalf("%s: message %d is %q, published %q", st.name, seen+1, original, want)
			}
			seen++
			rest, p := StripPartition(msg.Subject())
			want, err := PartitionOfSubject(original, st.tc.Filter, st.tc.N, st.tc.Wildcards)
			if err != nil {
				t.Fatalf("%s: PartitionOfSubject(%q): %v", st.name, original, err)
			}
			if p != want || rest != original {
				t.Fatalf("%s (%q -> %q): published %q, server stored %q; PartitionOfSubject says %d",
					st.name, st.tc.Filter, st.dest, original, msg.Subject(), want)
			}
			if strings.HasPrefix(original, "cc.") {
				key := strings.Replace(strings.TrimPrefix(original, "cc."), ".", "", 1)
				if q, ok := byKey[key]; ok && q != p {
					t.Fatalf("%s: key %q split differently stored in partitions %d and %d", st.name, key, q, p)
				}
				byKey[key] = p
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			t.Fatalf("%s: batch: %v", st.name, err)
		}
		if got == 0 {
			t.Fatalf("%s: fetch returned nothing after %d of %d messages", st.name, seen, len(st.subjects))
		}
	}
	return seen
}

// Why PartitionFilters keeps the reference's order: creating a consumer
// that exists is accepted only with an identical configuration, and the
// server compares FilterSubjects as an ordered list.
func TestPartitionFiltersOrderMattersToServer(t *testing.T) {
	srv := natstest.RunServer(t)
	_, js := natstest.JetStream(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORD", Subjects: []string{"0.>", "2.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	cfg := func(filters []string) jetstream.ConsumerConfig {
		return jetstream.ConsumerConfig{Durable: "g-m1", AckPolicy: jetstream.AckExplicitPolicy, FilterSubjects: filters}
	}
	ours := PartitionFilters([]int{0, 2}, []string{"a.>", "b.>"})
	if _, err := js.CreateConsumer(ctx, "ORD", cfg(ours)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "ORD", cfg(ours)); err != nil {
		t.Fatalf("same filters, same order: %v", err)
	}
	swapped := []string{"0.a.>", "0.b.>", "2.a.>", "2.b.>"}
	if _, err := js.CreateConsumer(ctx, "ORD", cfg(swapped)); !errors.Is(err, jetstream.ErrConsumerExists) {
		t.Fatalf("same filters in another order: got %v, want %v", err, jetstream.ErrConsumerExists)
	}
}
