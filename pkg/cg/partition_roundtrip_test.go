package cg

import (
	"slices"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// This test stays in package cg, beside the random transform generator
// (partition_gen_test.go) the server tests share; the rest of the pure
// partition tests live in package partition.

// ParsePartitionTransform reads back what ElasticTransformDestination writes.
func TestPartitionParseTransformRoundTrip(t *testing.T) {
	r := newRand(testSeed(t))
	for i := 0; i < 2000; i++ {
		tc := randTransformCase(r, "")
		for _, dest := range []string{
			partition.ElasticTransformDestination(tc.n, tc.filter, tc.wildcards),
			transformDest(r, tc.n, tc.filter, tc.wildcards),
		} {
			pt, ok, err := partition.ParsePartitionTransform(tc.filter, dest)
			if !ok || err != nil || pt.Partitions != tc.n || !slices.Equal(pt.Wildcards, tc.wildcards) {
				t.Fatalf("ParsePartitionTransform(%q, %q) = %+v, %v, %v; want N=%d wildcards %v", tc.filter, dest, pt, ok, err, tc.n, tc.wildcards)
			}
		}
	}
}
