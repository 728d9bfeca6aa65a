package cg

import (
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// nats-server 2.11 refuses {{partition(N)}} without token indexes, so the
// finding must say so and must not send the user back to the same create.
func TestVersionFindingWholeSubjectOn211(t *testing.T) {
	f, bad := versionFinding(Version{2, 11, 4}, true)
	if !bad || f.Code != health.CodeServerTooOld {
		t.Fatalf("2.11.4 whole subject: %+v %v", f, bad)
	}
	if !strings.Contains(f.Message, "2.11.4 refuses {{partition(N)}}") || strings.Contains(f.Message, "does not hash the whole subject") {
		t.Errorf("message: %s", f.Message)
	}
	if !strings.Contains(f.Hint, "upgrade the server to 2.12") || !strings.Contains(f.Hint, "naming the wildcards") || !strings.Contains(f.Hint, "same create fails") {
		t.Errorf("hint: %s", f.Hint)
	}
	if _, bad := versionFinding(Version{2, 12, 0}, true); bad {
		t.Error("2.12 flagged")
	}
}

func TestConsumerNameProblem(t *testing.T) {
	for name, bad := range map[string]bool{">": true, "cg->": true, "a.b": true, "m*": true, "m 1": true, "": true, "m1": false, "cg-m1": false, "x=y_z": false} {
		if got := ConsumerNameProblem(name) != ""; got != bad {
			t.Errorf("ConsumerNameProblem(%q) = %q", name, ConsumerNameProblem(name))
		}
	}
}

// The one-pass layout gives every member exactly MemberFilters and the
// assignment's partitions, for each kind and mode.
func TestLayoutMatchesMemberFilters(t *testing.T) {
	pfs := []PartitioningFilter{{Filter: "a.*", PartitioningWildcards: []int{1}}, {Filter: "b.>"}}
	for _, cfg := range []health.GroupConfig{
		StaticConfig{MaxMembers: 11, Members: []string{"m3", "m1", "m2"}},
		StaticConfig{MaxMembers: 5, Filters: []string{"a.*", "b.>"}, MemberMappings: []partition.MemberMapping{{Member: "x", Partitions: []int{4, 0}}, {Member: "y", Partitions: []int{3, 2, 1}}}},
		ElasticConfig{MaxMembers: 7, PartitioningFilters: pfs, Members: []string{"b", "a"}},
		ElasticConfig{MaxMembers: 4, PartitioningFilters: pfs, MemberMappings: []partition.MemberMapping{{Member: "x", Partitions: []int{3, 1}}, {Member: "y", Partitions: []int{0, 2}}}},
		ElasticConfig{MaxMembers: 3},
	} {
		l := newLayout(cfg)
		for _, m := range cfg.MemberNames() {
			if got, want := strings.Join(l.memberFilters(cfg, m), " "), strings.Join(cfg.MemberFilters(m), " "); got != want {
				t.Errorf("%+v member %s: filters %s, want %s", cfg, m, got, want)
			}
			if got, want := partition.Ranges(l.parts[m]), partition.Ranges(cfg.Assignment().MemberPartitions(m)); got != want {
				t.Errorf("%+v member %s: partitions %s, want %s", cfg, m, got, want)
			}
		}
	}
}
