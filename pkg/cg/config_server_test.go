package cg

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Validate refuses group filters one of which contains another because the
// server refuses such a consumer: check subjectSubset against the server.
func TestConfigFilterOverlapServer(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	srv := natstest.RunServer(t)
	_, js := natstest.JetStream(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "OVERLAP", Subjects: []string{"0.>"}, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	pairs := [][2]string{
		{"a.>", "a.b"}, {"a.*", "a.b"}, {"x.*", "x.*"}, {">", "a"}, {"a.*.c", "a.b.*"},
		{"a.>", "b.>"}, {"a.b", "a.b.c"}, {"a.*", "a.>"}, {"*.*", "a.b"}, {"a", "b"},
	}
	randFilterOf := func() string {
		toks := []string{"a", "b", "*"}
		var out []string
		for n := 1 + r.IntN(3); n > 0; n-- {
			out = append(out, toks[r.IntN(len(toks))])
		}
		if r.IntN(4) == 0 {
			out = append(out, ">")
		}
		return strings.Join(out, ".")
	}
	for len(pairs) < 150 {
		pairs = append(pairs, [2]string{randFilterOf(), randFilterOf()})
	}
	refused := 0
	for _, p := range pairs {
		a, b := p[0], p[1]
		_, err := js.CreateConsumer(ctx, "OVERLAP", jetstream.ConsumerConfig{
			Name:           "c",
			AckPolicy:      jetstream.AckExplicitPolicy,
			FilterSubjects: partition.PartitionFilters([]int{0}, []string{a, b}),
		})
		serverRefuses := err != nil
		if err == nil {
			if err := js.DeleteConsumer(ctx, "OVERLAP", "c"); err != nil {
				t.Fatal(err)
			}
		} else {
			refused++
		}
		ours := subjectSubset(a, b) || subjectSubset(b, a)
		if ours != serverRefuses {
			t.Fatalf("filters %q and %q: server error %v, subjectSubset says overlap=%v", a, b, err, ours)
		}
		verr := StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{a, b}}.Validate()
		if (verr != nil) != serverRefuses {
			t.Fatalf("filters %q and %q: server error %v, Validate %v", a, b, err, verr)
		}
	}
	t.Logf("%d filter pairs, %d refused by the server and by Validate alike", len(pairs), refused)
}

// ValidateName refuses for stream and group names exactly the characters
// the KV API refuses in the key <stream>.<group>.
func TestConfigNameKVKeyServer(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	srv := natstest.RunServer(t)
	_, js := natstest.JetStream(t, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "names", Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"ORDERS", "g-1", "g_1", "g=1", "G9", "grüppe", "g@1", "g#1", "g+1", "g:1", "g,1", "g~1", "g%1", "日本", "g'1", "g$1", "g!", "g(1)"}
	for len(names) < 200 {
		names = append(names, partitiontest.Token(r))
	}
	for _, name := range names {
		if strings.ContainsAny(name, `/\`) {
			continue // refused by ValidateName for every kind; the KV key allows '/'
		}
		_, putErr := kv.PutString(ctx, "STREAM."+name, "x")
		for _, kind := range []string{"stream", "group"} {
			nameErr := ValidateName(kind, name)
			if (nameErr == nil) != (putErr == nil) {
				t.Fatalf("%s name %q: ValidateName %v, KV put %v", kind, name, nameErr, putErr)
			}
		}
		if err := ValidateName("member", name); err != nil {
			t.Fatalf("member name %q: %v", name, err)
		}
	}
}
