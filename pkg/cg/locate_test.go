package cg

import (
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

func TestLocateSubject(t *testing.T) {
	ord := PartitioningFilter{Filter: "orders.*", PartitioningWildcards: []int{1}}
	ev := PartitioningFilter{Filter: "events.*.*", PartitioningWildcards: []int{2, 1}}
	tests := []struct {
		subject string
		n       int
		filters []PartitioningFilter
		tokens  []string
		err     string
	}{
		{"orders.alice", 10, []PartitioningFilter{ord}, []string{"alice"}, ""},
		{"events.x.y", 10, []PartitioningFilter{ord, ev}, []string{"y", "x"}, ""},
		{"orders.alice", 10, nil, []string{"orders.alice"}, ""},
		{"orders.alice", 10, []PartitioningFilter{{Filter: "orders.>"}}, []string{"orders.alice"}, ""},
		{"billing.alice", 10, []PartitioningFilter{ord}, nil, "matches none"},
		{"orders.a.b", 10, []PartitioningFilter{ord}, nil, "matches none"},
		{"orders.*", 10, nil, nil, "literal subject"},
		{"orders..a", 10, nil, nil, "literal subject"},
		{"orders.a", 0, nil, nil, "at least 1"},
	}
	for _, tt := range tests {
		loc, err := LocateSubject(tt.subject, tt.n, tt.filters)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: err %v, want %q", tt.subject, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.subject, err)
		}
		key := strings.Join(tt.tokens, "")
		if !slices.Equal(loc.Tokens, tt.tokens) || loc.Key != key || loc.Hash != partition.Hash(key) || loc.Partition != partition.PartitionOfKey(key, tt.n) {
			t.Errorf("%s: %+v", tt.subject, loc)
		}
		// Agrees with the transform math the members rely on.
		if len(tt.filters) == 1 {
			p, err := partition.PartitionOfSubject(tt.subject, tt.filters[0].Filter, tt.n, tt.filters[0].PartitioningWildcards)
			if err != nil || p != loc.Partition {
				t.Errorf("%s: PartitionOfSubject %d %v, Locate %d", tt.subject, p, err, loc.Partition)
			}
		}
	}
}

func TestOtherSplit(t *testing.T) {
	tests := []struct {
		in, want []string
	}{
		{[]string{"ab", "c"}, []string{"a", "bc"}},
		{[]string{"a", "bc"}, []string{"ab", "c"}},
		{[]string{"a", "b", "cd"}, []string{"a", "bc", "d"}},
		{[]string{"a", "b"}, nil},
		{[]string{"alice"}, nil},
	}
	for _, tt := range tests {
		got, ok := partition.OtherSplit(tt.in)
		if !slices.Equal(got, tt.want) || ok != (tt.want != nil) {
			t.Errorf("OtherSplit(%v) = %v %v, want %v", tt.in, got, ok, tt.want)
			continue
		}
		if g, w := LocateKey(got, 97), LocateKey(tt.in, 97); ok && (g.Hash != w.Hash || g.Partition != w.Partition) {
			t.Errorf("%v and %v land apart", tt.in, got)
		}
	}
}
