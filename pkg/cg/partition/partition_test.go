package partition

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
)

func TestHashFNV1a32(t *testing.T) {
	// Published FNV-1a 32-bit test vectors.
	for _, c := range []struct {
		in   string
		want uint32
	}{
		{"", 0x811c9dc5},
		{"a", 0xe40c292c},
		{"foobar", 0xbf9cf968},
	} {
		if got := Hash(c.in); got != c.want {
			t.Errorf("Hash(%q) = %#x, want %#x", c.in, got, c.want)
		}
	}
}

func TestPartitionOfKey(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int
		want int
	}{
		{"a", 10, 0xe40c292c % 10},
		{"foobar", 7, 0xbf9cf968 % 7},
		{"anything", 1, 0},
		// The server writes "0" for a zero count instead of dividing by it.
		{"a", 0, 0},
		{"a", -3, 0},
	} {
		if got := PartitionOfKey(c.key, c.n); got != c.want {
			t.Errorf("PartitionOfKey(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

func TestPartitionKey(t *testing.T) {
	for _, c := range []struct {
		subject, filter string
		wildcards       []int
		want            string
		err             string // substring of the error; "" for none
	}{
		{"orders.alice.buy", "orders.*.*", []int{1}, "alice", ""},
		{"orders.alice.buy", "orders.*.*", []int{2}, "buy", ""},
		{"orders.alice.buy", "orders.*.*", []int{2, 1}, "buyalice", ""},
		{"orders.alice.buy", "orders.*.*", []int{1, 1}, "alicealice", ""},
		{"orders.alice.buy", "orders.*.*", nil, "orders.alice.buy", ""},
		{"a.x.b.y", "a.*.b.*", []int{2, 1}, "yx", ""},
		{"x.y.z.w", "*.*.*.*", []int{4, 1, 3}, "wxz", ""},
		{"a.k.rest.of.it", "a.*.>", []int{1}, "k", ""},
		{"a.k.r", "a.>", nil, "a.k.r", ""},
		// Index out of range, zero, negative.
		{"orders.alice", "orders.*", []int{2}, "", "wildcard index 2 out of range"},
		{"orders.alice", "orders.*", []int{0}, "", "wildcard index 0 out of range"},
		{"orders.alice", "orders.*", []int{-1}, "", "wildcard index -1 out of range"},
		// Subjects not matching the filter.
		{"orders.alice", "billing.*", []int{1}, "", "does not match"},
		{"orders", "orders.*", []int{1}, "", "does not match"},
		{"orders.alice.x", "orders.*", []int{1}, "", "does not match"},
		{"a", "a.*.>", []int{1}, "", "does not match"},
		{"a.k", "a.*.>", []int{1}, "", "does not match"},
		{"a.k.x", "a.>.*", []int{1}, "", "'>' must be the last token"},
	} {
		got, err := PartitionKey(c.subject, c.filter, c.wildcards)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("PartitionKey(%q, %q, %v) error = %v, want one containing %q", c.subject, c.filter, c.wildcards, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("PartitionKey(%q, %q, %v) = %q, %v; want %q", c.subject, c.filter, c.wildcards, got, err, c.want)
		}
	}
}

// The key is the tokens concatenated with no separator, so ab+c and a+bc
// hash alike (the server side of this is in partition_server_test.go).
func TestPartitionConcatenation(t *testing.T) {
	for n := 1; n <= 1024; n++ {
		p1, err1 := PartitionOfSubject("k.ab.c", "k.*.*", n, []int{1, 2})
		p2, err2 := PartitionOfSubject("k.a.bc", "k.*.*", n, []int{1, 2})
		if err1 != nil || err2 != nil || p1 != p2 || p1 != PartitionOfKey("abc", n) {
			t.Fatalf("n=%d: ab+c -> %d (%v), a+bc -> %d (%v), abc -> %d", n, p1, err1, p2, err2, PartitionOfKey("abc", n))
		}
	}
}

func TestPartitionStrip(t *testing.T) {
	for _, c := range []struct {
		in   string
		rest string
		p    int
	}{
		{"2.orders.alice.buy", "orders.alice.buy", 2},
		{"0.x", "x", 0},
		{"1023.a.b", "a.b", 1023},
		{"orders", "orders", -1},
		{"12", "12", -1},
		// The reference strips the first token whatever it is; so do we,
		// reporting -1 for a token that is not a partition number.
		{"abc.def", "def", -1},
		{"x.", "", -1},
	} {
		rest, p := StripPartition(c.in)
		if rest != c.rest || p != c.p {
			t.Errorf("StripPartition(%q) = %q, %d; want %q, %d", c.in, rest, p, c.rest, c.p)
		}
	}
}

func TestPartitionElasticTransformDestination(t *testing.T) {
	for _, c := range []struct {
		n         int
		filter    string
		wildcards []int
		want      string
	}{
		{10, "orders.*", []int{1}, "{{Partition(10,1)}}.orders.{{Wildcard(1)}}"},
		{10, "orders.*", nil, "{{Partition(10)}}.orders.{{Wildcard(1)}}"},
		{4, "a.*.b.*", []int{2, 1}, "{{Partition(4,2,1)}}.a.{{Wildcard(1)}}.b.{{Wildcard(2)}}"},
		{7, "*.*.*", []int{3}, "{{Partition(7,3)}}.{{Wildcard(1)}}.{{Wildcard(2)}}.{{Wildcard(3)}}"},
		{5, "a.*.>", []int{1}, "{{Partition(5,1)}}.a.{{Wildcard(1)}}.>"},
		{3, ">", nil, "{{Partition(3)}}.>"},
		{3, "", nil, "{{Partition(3)}}.>"},
		{1, "orders.eu", nil, "{{Partition(1)}}.orders.eu"},
	} {
		if got := ElasticTransformDestination(c.n, c.filter, c.wildcards); got != c.want {
			t.Errorf("ElasticTransformDestination(%d, %q, %v) = %q, want %q", c.n, c.filter, c.wildcards, got, c.want)
		}
	}
}

func TestPartitionParseTransform(t *testing.T) {
	for _, c := range []struct {
		dest      string
		ok        bool
		n         int
		wildcards []int
		err       string // substring; "" for no error
	}{
		{"{{partition(10,1)}}.orders.{{wildcard(1)}}", true, 10, []int{1}, ""},
		{"{{Partition(10,1)}}.x", true, 10, []int{1}, ""},
		{"{{PARTITION(10,1)}}.x", true, 10, []int{1}, ""},
		{"{{pArTiTiOn(3)}}.x", true, 3, nil, ""},
		{"{{partition(10)}}", true, 10, nil, ""},
		{"{{partition(10)}}.>", true, 10, nil, ""},
		{"{{ partition( 10 , 2, 1 ) }}.a.b", true, 10, []int{2, 1}, ""},
		{"{{partition(1024,4,3,2,1)}}.x", true, 1024, []int{4, 3, 2, 1}, ""},
		// Not a partition() first token.
		{"orders.{{partition(10,1)}}", false, 0, nil, ""},
		{"{{wildcard(1)}}.{{partition(10,1)}}", false, 0, nil, ""},
		{"{{partitions(10)}}.x", false, 0, nil, ""},
		{"{{partition(10,1)}}x.y", false, 0, nil, ""},
		{"{{partition 10}}.x", false, 0, nil, ""},
		{"foo.bar", false, 0, nil, ""},
		{"{{partition(10", false, 0, nil, ""},
		{"", false, 0, nil, ""},
		// A partition() call with bad numbers.
		{"{{partition(x)}}.y", true, 0, nil, `partition count "x"`},
		{"{{partition(0)}}.y", true, 0, nil, `partition count "0"`},
		{"{{partition(-3,1)}}.y", true, 0, nil, `partition count "-3"`},
		{"{{partition()}}.y", true, 0, nil, `partition count ""`},
		{"{{partition(10,a)}}.y", true, 10, nil, `wildcard index "a"`},
		{"{{partition(10,1,)}}.y", true, 10, []int{1}, `wildcard index ""`},
		{"{{partition(10,1.5)}}.y", true, 10, nil, `wildcard index "1.5"`},
	} {
		pt, ok, err := ParsePartitionTransform("src.>", c.dest)
		if ok != c.ok {
			t.Errorf("ParsePartitionTransform(%q) ok = %v, want %v", c.dest, ok, c.ok)
			continue
		}
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), c.dest) {
				t.Errorf("ParsePartitionTransform(%q) error = %v, want one naming %s and the destination", c.dest, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePartitionTransform(%q): %v", c.dest, err)
			continue
		}
		if !ok {
			continue
		}
		if pt.Partitions != c.n || !slices.Equal(pt.Wildcards, c.wildcards) || pt.Source != "src.>" || pt.Destination != c.dest {
			t.Errorf("ParsePartitionTransform(%q) = %+v, want N=%d wildcards %v", c.dest, pt, c.n, c.wildcards)
		}
	}
}

// owners renders an assignment as "m1[0,1] m2[2]" in member order.
func owners(a Assignment, members []string) string {
	var parts []string
	for _, m := range members {
		ps := a.MemberPartitions(m)
		s := make([]string, len(ps))
		for i, p := range ps {
			s[i] = fmt.Sprint(p)
		}
		parts = append(parts, m+"["+strings.Join(s, ",")+"]")
	}
	return strings.Join(parts, " ")
}

func TestBalancedAssignmentTable(t *testing.T) {
	for _, c := range []struct {
		members []string
		n       int
		want    string // owners() over the normalised members
	}{
		// The contract's example and the reference's own output.
		{[]string{"m1", "m2", "m3"}, 10, "m1[0,1,2,9] m2[3,4,5] m3[6,7,8]"},
		{[]string{"m1", "m2"}, 10, "m1[0,1,2,3,4] m2[5,6,7,8,9]"},
		// The seed article's 4-partition picture. Its first line is what
		// the formula gives; its later lines (m0[p0] m1[p2,p3] m2[p1], then
		// m1[p2] m2[p1] m3[p3]) are an illustration of "few partitions
		// move", not the formula, which every implementation must follow.
		{[]string{"m0", "m1"}, 4, "m0[0,1] m1[2,3]"},
		{[]string{"m0", "m1", "m2"}, 4, "m0[0,3] m1[1] m2[2]"},
		{[]string{"m0", "m1", "m2", "m3"}, 4, "m0[0] m1[1] m2[2] m3[3]"},
		// A fifth member beyond N owns nothing: the list is trimmed.
		{[]string{"m0", "m1", "m2", "m3", "m4"}, 4, "m0[0] m1[1] m2[2] m3[3]"},
		// Sorted by byte order, duplicates dropped.
		{[]string{"m2", "m10", "m1", "m2"}, 7, "m1[0,1,6] m10[2,3] m2[4,5]"},
		{[]string{"b", "B", "a"}, 3, "B[0] a[1] b[2]"},
		{[]string{"solo"}, 5, "solo[0,1,2,3,4]"},
		{[]string{"x", "y"}, 1, "x[0]"},
		{[]string{"a", "b", "c", "d"}, 11, "a[0,1,8] b[2,3,9] c[4,5,10] d[6,7]"},
	} {
		a := BalancedAssignment(c.members, c.n)
		if got := owners(a, BalancedMembers(c.members, c.n)); got != c.want {
			t.Errorf("BalancedAssignment(%v, %d) = %s, want %s", c.members, c.n, got, c.want)
		}
	}
}

func TestBalancedAssignmentEmpty(t *testing.T) {
	a := BalancedAssignment(nil, 4)
	if len(a.Owner) != 4 || a.Members() != nil || slices.ContainsFunc(a.Owner, func(s string) bool { return s != "" }) {
		t.Errorf("no members: %+v", a)
	}
	a = BalancedAssignment([]string{"m1"}, 0)
	if len(a.Owner) != 0 || a.MemberPartitions("m1") != nil {
		t.Errorf("no partitions: %+v", a)
	}
}

func TestBalancedMembers(t *testing.T) {
	for _, c := range []struct {
		in   []string
		n    int
		want []string
	}{
		{[]string{"c", "a", "b", "a"}, 10, []string{"a", "b", "c"}},
		{[]string{"c", "a", "b", "a"}, 2, []string{"a", "b"}},
		{[]string{"m2", "m10", "m1"}, 10, []string{"m1", "m10", "m2"}},
		{[]string{"é", "z", "Z"}, 10, []string{"Z", "z", "é"}},
		{[]string{"x"}, 0, []string{}},
		{nil, 3, []string{}},
	} {
		if got := BalancedMembers(c.in, c.n); !slices.Equal(got, c.want) {
			t.Errorf("BalancedMembers(%v, %d) = %v, want %v", c.in, c.n, got, c.want)
		}
	}
}

// checkBalanced asserts the properties every balanced assignment has.
func checkBalanced(t testing.TB, members []string, n int) {
	t.Helper()
	a := BalancedAssignment(members, n)
	norm := BalancedMembers(members, n)

	// Normalisation: the sorted set of distinct names, trimmed to n.
	uniq := slices.Clone(members)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	if len(uniq) > n {
		uniq = uniq[:n]
	}
	if !slices.Equal(norm, uniq) {
		t.Fatalf("members %q n=%d: normalised %q, want %q", members, n, norm, uniq)
	}
	if len(a.Owner) != n || a.Partitions != n {
		t.Fatalf("members %q n=%d: %d owners", members, n, len(a.Owner))
	}
	if len(norm) == 0 {
		return
	}
	// Every partition owned exactly once, by a kept member.
	count := map[string]int{}
	for p, m := range a.Owner {
		if !slices.Contains(norm, m) {
			t.Fatalf("members %q n=%d: partition %d owned by %q", members, n, p, m)
		}
		count[m]++
	}
	// Every kept member owns something, and sizes differ by at most one.
	lo, hi := n, 0
	for _, m := range norm {
		lo, hi = min(lo, count[m]), max(hi, count[m])
	}
	if lo < 1 || hi-lo > 1 {
		t.Fatalf("members %q n=%d: sizes from %d to %d", members, n, lo, hi)
	}
	// MemberPartitions partitions 0..n-1 among the members.
	var all []int
	for _, m := range norm {
		all = append(all, a.MemberPartitions(m)...)
	}
	slices.Sort(all)
	for p := range all {
		if all[p] != p {
			t.Fatalf("members %q n=%d: member partitions %v", members, n, all)
		}
	}
	// The first M*per partitions come in contiguous blocks of per.
	per := n / len(norm)
	for p := 0; p < len(norm)*per; p++ {
		if want := norm[p/per]; a.Owner[p] != want {
			t.Fatalf("members %q n=%d: partition %d owned by %q, want %q", members, n, p, a.Owner[p], want)
		}
	}
	// Members() reads "" as unowned; an empty name is refused by Validate.
	if got := a.Members(); !slices.Contains(norm, "") && !slices.Equal(got, norm) {
		t.Fatalf("members %q n=%d: Members() = %q, want %q", members, n, got, norm)
	}
}

// randMembers returns 0 to maxM names drawn from a small pool, so that
// duplicates and byte-order surprises (m1 < m10 < m2, B < a) are common.
func randMembers(r *rand.Rand, maxM int) []string {
	pool := []string{"m0", "m1", "m2", "m10", "m11", "m20", "a", "B", "b", "é", "Ω", "w-1", "w_1", "z"}
	var out []string
	for m := r.IntN(maxM + 1); m > 0; m-- {
		if r.IntN(4) == 0 {
			out = append(out, fmt.Sprintf("w%d", r.IntN(400)))
		} else {
			out = append(out, pool[r.IntN(len(pool))])
		}
	}
	return out
}

func TestBalancedAssignmentProperties(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	for i := 0; i < 3000; i++ {
		n := 1 + r.IntN(200)
		checkBalanced(t, randMembers(r, 40), n)
	}
	// More members than partitions: every partition still assigned, one each.
	for n := 1; n <= 20; n++ {
		var ms []string
		for m := 0; m < n+5; m++ {
			ms = append(ms, fmt.Sprintf("m%03d", m))
		}
		checkBalanced(t, ms, n)
		a := BalancedAssignment(ms, n)
		for p := 0; p < n; p++ {
			if a.Owner[p] != ms[p] {
				t.Fatalf("n=%d: partition %d owned by %q, want %q", n, p, a.Owner[p], ms[p])
			}
		}
	}
}

func TestBalancedOwnerFormula(t *testing.T) {
	// The balanced rule spelled out once more, for every N and M up to 64.
	for n := 1; n <= 64; n++ {
		for m := 1; m <= n; m++ {
			per := n / m
			for p := 0; p < n; p++ {
				want := (p - m*per) % m
				if p < m*per {
					want = (p / per) % m
				}
				if got := BalancedOwner(p, n, m); got != want {
					t.Fatalf("BalancedOwner(%d, %d, %d) = %d, want %d", p, n, m, got, want)
				}
			}
		}
	}
}

func TestMappedAssignment(t *testing.T) {
	mms := []MemberMapping{{"m1", []int{3, 0}}, {"m2", []int{1, 2}}}
	a := MappedAssignment(mms, 4)
	if got := owners(a, []string{"m1", "m2"}); got != "m1[0,3] m2[1,2]" {
		t.Errorf("mapped: %s", got)
	}
	if got := a.Members(); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("Members() = %v", got)
	}
	// Out of range and repeated partitions are left to Validate: the first
	// mapping wins and nothing panics.
	a = MappedAssignment([]MemberMapping{{"m1", []int{-1, 0, 9}}, {"m2", []int{0, 1}}}, 3)
	if !slices.Equal(a.Owner, []string{"m1", "m2", ""}) {
		t.Errorf("tolerant mapped: %q", a.Owner)
	}
}

func TestPartitionFilters(t *testing.T) {
	for _, c := range []struct {
		partitions []int
		filters    []string
		want       []string
	}{
		{[]int{0, 1}, nil, []string{"0.>", "1.>"}},
		{[]int{3}, []string{"orders.*"}, []string{"3.orders.*"}},
		// Filter by filter, as the reference builds them.
		{[]int{0, 2}, []string{"a.>", "b.*"}, []string{"0.a.>", "2.a.>", "0.b.*", "2.b.*"}},
		// Partitions keep the order given (a mapping's stored order).
		{[]int{5, 1}, nil, []string{"5.>", "1.>"}},
		{nil, []string{"a"}, []string{}},
	} {
		if got := PartitionFilters(c.partitions, c.filters); !slices.Equal(got, c.want) {
			t.Errorf("PartitionFilters(%v, %v) = %q, want %q", c.partitions, c.filters, got, c.want)
		}
	}
}

// FuzzBalancedAssignment runs its seed corpus under plain go test; with
// -fuzz it explores member lists (comma separated) and partition counts.
func FuzzBalancedAssignment(f *testing.F) {
	f.Add("m1,m2,m3", uint16(10))
	f.Add("m1,m2", uint16(10))
	f.Add("m0,m1,m2", uint16(4))
	f.Add("m0,m1,m2,m3,m4", uint16(4))
	f.Add("b,a,b,a,c", uint16(2))
	f.Add("", uint16(5))
	f.Add("x", uint16(1))
	f.Add(",,,", uint16(3))
	f.Add("é,e,E,日本", uint16(1023))
	f.Fuzz(func(t *testing.T, list string, n16 uint16) {
		n := int(n16%1024) + 1
		var members []string
		if list != "" {
			members = strings.Split(list, ",")
		}
		checkBalanced(t, members, n)
	})
}

func FuzzPartitionStrip(f *testing.F) {
	f.Add(uint16(2), "orders.alice.buy")
	f.Add(uint16(0), "x")
	f.Add(uint16(1023), "a.b.c")
	f.Fuzz(func(t *testing.T, p uint16, rest string) {
		rest2, p2 := StripPartition(fmt.Sprintf("%d.%s", p, rest))
		if rest2 != rest || p2 != int(p) {
			t.Fatalf("StripPartition(%d.%s) = %q, %d", p, rest, rest2, p2)
		}
	})
}
