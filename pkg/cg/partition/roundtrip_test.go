package partition

import (
	"slices"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
)

// This test stays in package cg, beside the random transform generator
// (partition_gen_test.go) the server tests share; the rest of the pure
// partition tests live in package partition.

// ParsePartitionTransform reads back what ElasticTransformDestination writes.
func TestPartitionParseTransformRoundTrip(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	for i := 0; i < 2000; i++ {
		tc := partitiontest.Transform(r, "")
		for _, dest := range []string{
			ElasticTransformDestination(tc.N, tc.Filter, tc.Wildcards),
			partitiontest.TransformDest(r, tc.N, tc.Filter, tc.Wildcards),
		} {
			pt, ok, err := ParsePartitionTransform(tc.Filter, dest)
			if !ok || err != nil || pt.Partitions != tc.N || !slices.Equal(pt.Wildcards, tc.Wildcards) {
				t.Fatalf("ParsePartitionTransform(%q, %q) = %+v, %v, %v; want N=%d wildcards %v", tc.Filter, dest, pt, ok, err, tc.N, tc.Wildcards)
			}
		}
	}
}
