package partition

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
	"github.com/synadia-io/orbit.go/pcgroups"
)

// Cross-checks against the reference library's own function: two members,
// one running the reference and one running cg, must compute the same
// consumer filters or they would share (or both skip) a partition.

// referenceFilters is what a reference member puts in its consumer's
// FilterSubjects: GeneratePartitionFilters once per group filter, in order
// (the reference's static join and ElasticGetPartitionFilters both do so).
func referenceFilters(members []string, n int, mappings []MemberMapping, member string, filters []string) []string {
	var mms []pcgroups.MemberMapping
	for _, mm := range mappings {
		mms = append(mms, pcgroups.MemberMapping{Member: mm.Member, Partitions: mm.Partitions})
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var out []string
	for _, f := range filters {
		out = append(out, pcgroups.GeneratePartitionFilters(members, uint(n), mms, member, f)...)
	}
	return out
}

func checkAgainstReference(t testing.TB, members []string, n int, filters []string) {
	t.Helper()
	a := BalancedAssignment(members, n)
	// Every listed name, including ones trimmed away, and a stranger.
	names := append(slices.Clone(members), "not-a-member")
	slices.Sort(names)
	for _, m := range slices.Compact(names) {
		want := referenceFilters(members, n, nil, m, filters)
		if got := PartitionFilters(a.MemberPartitions(m), filters); !slices.Equal(got, want) {
			t.Fatalf("members %q N=%d filters %q member %q: PartitionFilters = %q, reference %q", members, n, filters, m, got, want)
		}
	}
}

func TestPartitionReferenceBalanced(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	filterSets := [][]string{nil, {">"}, {"orders.*"}, {"a.>", "b.*.c"}, {"x", "y.*", "z.>"}}
	checked := 0
	for i := 0; i < 2000; i++ {
		n := 1 + r.IntN(100)
		if i%40 == 0 {
			n = 1 + r.IntN(1024)
		}
		maxM := 30
		if i%4 == 0 && n <= 100 {
			maxM = n + 10 // more members than partitions
		}
		checkAgainstReference(t, partitiontest.Members(r, maxM), n, filterSets[r.IntN(len(filterSets))])
		checked++
	}
	// Every N and M up to 40, with distinct members, exhaustively.
	for n := 1; n <= 40; n++ {
		for m := 1; m <= n+3; m++ {
			var ms []string
			for k := m; k > 0; k-- { // listed in reverse: sorting matters
				ms = append(ms, fmt.Sprintf("m%d", k))
			}
			checkAgainstReference(t, ms, n, nil)
			checked++
		}
	}
	t.Logf("%d member lists agree with pcgroups.GeneratePartitionFilters", checked)
}

func TestPartitionReferenceTable(t *testing.T) {
	// The reference's output for the balanced examples, spelled out.
	for _, c := range []struct {
		members []string
		n       int
		member  string
		want    string
	}{
		{[]string{"m1", "m2", "m3"}, 10, "m1", "0.> 1.> 2.> 9.>"},
		{[]string{"m1", "m2", "m3"}, 10, "m2", "3.> 4.> 5.>"},
		{[]string{"m1", "m2", "m3"}, 10, "m3", "6.> 7.> 8.>"},
		{[]string{"m1", "m2"}, 10, "m2", "5.> 6.> 7.> 8.> 9.>"},
		{[]string{"m0", "m1", "m2"}, 4, "m0", "0.> 3.>"},
	} {
		ref := strings.Join(referenceFilters(c.members, c.n, nil, c.member, nil), " ")
		ours := strings.Join(PartitionFilters(BalancedAssignment(c.members, c.n).MemberPartitions(c.member), nil), " ")
		if ref != c.want || ours != c.want {
			t.Errorf("%v N=%d %s: reference %q, ours %q, want %q", c.members, c.n, c.member, ref, ours, c.want)
		}
	}
}

// For mapped groups the reference writes <p>.> in the mapping's order
// whatever the filters; with no filters cg must write the same list.
func TestPartitionReferenceMapped(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	for i := 0; i < 1000; i++ {
		n := 1 + r.IntN(64)
		m := 1 + r.IntN(n)
		var mms []MemberMapping
		for k := 0; k < m; k++ {
			mms = append(mms, MemberMapping{Member: fmt.Sprintf("m%d", k)})
		}
		for _, p := range r.Perm(n) {
			k := r.IntN(m)
			if p < m {
				k = p // every entry gets at least one partition
			}
			mms[k].Partitions = append(mms[k].Partitions, p)
		}
		if err := validMappings(mms, n); err != nil {
			t.Fatalf("%+v: %v", mms, err)
		}
		a := MappedAssignment(mms, n)
		for _, mm := range append(mms, MemberMapping{Member: "stranger"}) {
			want := referenceFilters(nil, n, mms, mm.Member, nil)
			// A mapped member's filters keep its mapping's order, as the
			// reference writes them; the assignment holds the same set.
			if owned := slices.Sorted(slices.Values(mm.Partitions)); !slices.Equal(a.MemberPartitions(mm.Member), owned) && len(owned) > 0 {
				t.Fatalf("%+v member %q: MappedAssignment gives %v", mms, mm.Member, a.MemberPartitions(mm.Member))
			}
			if got := PartitionFilters(mm.Partitions, nil); !slices.Equal(got, want) {
				t.Fatalf("%+v member %q: PartitionFilters = %q, reference %q", mms, mm.Member, got, want)
			}
		}
	}
}

// FuzzPartitionReference compares with the reference for fuzzed member
// lists (comma separated) and partition counts.
func FuzzPartitionReference(f *testing.F) {
	f.Add("m1,m2,m3", uint16(10), "")
	f.Add("m2,m1,m2,m1", uint16(3), "a.>")
	f.Add("a,b,c,d,e,f", uint16(4), "x.*,y.>")
	f.Add("é,E,e", uint16(1024), "")
	f.Add("solo", uint16(1), "o.*.*")
	f.Fuzz(func(t *testing.T, list string, n16 uint16, filterList string) {
		n := int(n16%1024) + 1
		var members, filters []string
		if list != "" {
			members = strings.Split(list, ",")
		}
		if filterList != "" {
			filters = strings.Split(filterList, ",")
		}
		checkAgainstReference(t, members, n, filters)
	})
}
