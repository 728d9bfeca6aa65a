package cg

import (
	"fmt"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// minimalChange keeps a member list when that is as good, and stores
// mappings otherwise.
func TestMinimalChangeKeepsMemberListWhenAsGood(t *testing.T) {
	tests := []struct {
		name     string
		cfg      ElasticConfig
		list     []string
		mappings bool
	}{
		{"1 to 2 over 10", ElasticConfig{MaxMembers: 10, Members: []string{"a"}}, []string{"a", "b"}, false},
		{"8 to 9 over 256", ElasticConfig{MaxMembers: 256, Members: names("m", 8)}, names("m", 9), true},
		{"drop the last", ElasticConfig{MaxMembers: 10, Members: []string{"a"}}, nil, false},
		{"mapped, drop the last", ElasticConfig{MaxMembers: 2, MemberMappings: []partition.MemberMapping{{Member: "a", Partitions: []int{0, 1}}}}, nil, false},
		{"mapped, back to even blocks", ElasticConfig{MaxMembers: 4, MemberMappings: []partition.MemberMapping{{Member: "a", Partitions: []int{0, 1, 2}}, {Member: "b", Partitions: []int{3}}}}, []string{"a", "b"}, false},
		{"mapped, uneven", ElasticConfig{MaxMembers: 4, MemberMappings: []partition.MemberMapping{{Member: "a", Partitions: []int{3}}, {Member: "b", Partitions: []int{0, 1, 2}}}}, []string{"a", "b"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			minimalChange(&cfg, tt.list)
			if got := len(cfg.MemberMappings) > 0; got != tt.mappings || (got && len(cfg.Members) > 0) {
				t.Fatalf("members %v mappings %v, want mappings %v", cfg.Members, cfg.MemberMappings, tt.mappings)
			}
			if err := cfg.ValidateStored(); err != nil {
				t.Fatal(err)
			}
			if got, want := len(partition.Moves(tt.cfg.Assignment(), cfg.Assignment())), partition.MinimumBalancedMoves(tt.cfg.Assignment(), tt.list); got != want {
				t.Fatalf("moves %d, minimum %d", got, want)
			}
		})
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i+1)
	}
	return out
}
