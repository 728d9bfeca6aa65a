package cg

import (
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// The key a lane orders by is what the partition transform hashes, read
// back off the stored subject, never the whole subject.
func TestLaneKeyOfStoredSubject(t *testing.T) {
	for _, tc := range []struct {
		src, dst, subject, want string
		ok                      bool
	}{
		{"orders.*.*", "{{partition(8,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}", "orders.k1.created", "k1", true},
		{"orders.*.*", "{{partition(8,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}", "orders.k1.paid", "k1", true},
		{"orders.*.*", "{{partition(8,2,1)}}.x.{{wildcard(2)}}.{{ Wildcard( 1 ) }}", "x.b.a", "ba", true},
		{"orders.*", "{{partition(8)}}.orders.{{wildcard(1)}}", "orders.k1", "orders.k1", true},
		// The destination drops the hashed token: order by partition.
		{"orders.*.*", "{{partition(8,1)}}.orders.{{wildcard(2)}}", "orders.created", "", false},
		// The whole subject is hashed but not written back as it was.
		{"orders.*", "{{partition(8)}}.o.{{wildcard(1)}}", "o.k1", "", false},
	} {
		pt, ok, err := partition.ParsePartitionTransform(tc.src, tc.dst)
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", tc.dst, ok, err)
		}
		got, ok := staticKeyOf(pt)(tc.subject)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s %s: key %q %v, want %q %v", tc.dst, tc.subject, got, ok, tc.want, tc.ok)
		}
	}
	// One hashed wildcard: the key is read as a slice of the subject, the
	// same key the general reader reads, and allocating nothing.
	for _, tc := range []struct{ src, dst string }{
		{"orders.*.*", "{{partition(8,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}"},
		{"bench.*", "{{partition(8,1)}}.bench.{{wildcard(1)}}"},
		{"a.*.*", "{{partition(4,2)}}.{{wildcard(2)}}"},
		{"a.*.*", "{{partition(4,2)}}.x.{{wildcard(2)}}.y.{{wildcard(2)}}"},
		{"a.*.*", "{{partition(4,2)}}.x.{{wildcard(1)}}"},
		{"a.*", "{{partition(4,1)}}"},
	} {
		pt, ok, err := partition.ParsePartitionTransform(tc.src, tc.dst)
		if !ok || err != nil {
			t.Fatalf("%s: %v %v", tc.dst, ok, err)
		}
		general := joinedKey(staticKeyTokens(pt), "")
		fast := staticKeyOf(pt)
		for _, subject := range []string{"", "x", "x.k1", "orders.k1.created", "bench.k42", "x.k.y.z", "x..y", "a.b.c.d.e"} {
			g, gok := general(subject)
			f, fok := fast(subject)
			if g != f || gok != fok {
				t.Errorf("%s %q: key %q %v, the general reader's %q %v", tc.dst, subject, f, fok, g, gok)
			}
		}
	}
	pt, _, _ := partition.ParsePartitionTransform("bench.*", "{{partition(8,1)}}.bench.{{wildcard(1)}}")
	key := staticKeyOf(pt)
	if n := testing.AllocsPerRun(100, func() { _, _ = key("bench.k42") }); n != 0 {
		t.Errorf("reading a one-token key allocates %v times", n)
	}
	el := elasticKeyOf([]PartitioningFilter{{Filter: "orders.*.*", PartitioningWildcards: []int{1}}, {Filter: "audit.>"}})
	for subject, want := range map[string]string{"orders.k1.created": "k1", "orders.k1.paid": "k1", "audit.a.b": "audit.a.b"} {
		if got, ok := el(subject); !ok || got != want {
			t.Errorf("elastic %s: %q %v, want %q", subject, got, ok, want)
		}
	}
	if _, ok := el("other.x"); ok {
		t.Error("elastic: a subject no filter matches got a key")
	}
}
