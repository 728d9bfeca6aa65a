package partition

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
)

// This file is pure partition math: it imports nothing from NATS. Every
// function here must agree bit for bit with the NATS server's subject
// transform and with the reference implementation's assignment, or two
// workers would end up sharing a partition.

// Hash is the FNV-1a 32-bit hash the server's {{partition()}} transform uses.
func Hash(key string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return h.Sum32()
}

// PartitionOfKey returns the partition a hashed key lands in among n
// partitions. n must be at least 1.
func PartitionOfKey(key string, n int) int {
	if n <= 0 {
		return 0
	}
	return int(Hash(key) % uint32(n))
}

// PartitionKey returns the string the server hashes for subject when the
// transform's source filter is filter and its partition() call lists the
// given 1-based wildcard indexes: the tokens standing at those `*`
// wildcards, concatenated with no separator, in the order listed. With no
// indexes the whole subject is hashed (the partition(N) shorthand).
func PartitionKey(subject, filter string, wildcards []int) (string, error) {
	if len(wildcards) == 0 {
		return subject, nil
	}
	tokens, err := PartitionKeyTokens(subject, filter, wildcards)
	if err != nil {
		return "", err
	}
	return strings.Join(tokens, ""), nil
}

// PartitionKeyTokens returns the tokens PartitionKey concatenates, after
// checking that subject matches filter (also with no wildcards, when the
// one token is the whole subject).
func PartitionKeyTokens(subject, filter string, wildcards []int) ([]string, error) {
	stoks := strings.Split(subject, ".")
	ftoks := strings.Split(filter, ".")
	// positions[k] is the subject token index of the k-th `*` (1-based k).
	var positions []int
	for i, ft := range ftoks {
		if ft == ">" {
			if i != len(ftoks)-1 {
				return nil, fmt.Errorf("filter %q: '>' must be the last token", filter)
			}
			if len(stoks) <= i {
				return nil, fmt.Errorf("subject %q does not match filter %q", subject, filter)
			}
			break
		}
		if i >= len(stoks) {
			return nil, fmt.Errorf("subject %q does not match filter %q", subject, filter)
		}
		if ft == "*" {
			positions = append(positions, i)
		} else if ft != stoks[i] {
			return nil, fmt.Errorf("subject %q does not match filter %q", subject, filter)
		}
	}
	if !slices.Contains(ftoks, ">") && len(stoks) != len(ftoks) {
		return nil, fmt.Errorf("subject %q does not match filter %q", subject, filter)
	}
	if len(wildcards) == 0 {
		return []string{subject}, nil
	}
	out := make([]string, 0, len(wildcards))
	for _, w := range wildcards {
		if w < 1 || w > len(positions) {
			return nil, fmt.Errorf("wildcard index %d out of range: filter %q has %d '*' wildcard(s)", w, filter, len(positions))
		}
		out = append(out, stoks[positions[w-1]])
	}
	return out, nil
}

// PartitionOfSubject is the partition the server's transform
// {{partition(n, wildcards...)}} over source filter assigns to subject.
func PartitionOfSubject(subject, filter string, n int, wildcards []int) (int, error) {
	key, err := PartitionKey(subject, filter, wildcards)
	if err != nil {
		return 0, err
	}
	return PartitionOfKey(key, n), nil
}

// BalancedMembers normalises a member list the way every implementation
// must before assigning partitions: first occurrence wins, sorted by byte
// order, at most n kept.
func BalancedMembers(members []string, n int) []string {
	seen := make(map[string]bool, len(members))
	out := make([]string, 0, len(members))
	for _, m := range members {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	slices.Sort(out)
	if n >= 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// BalancedOwner returns the index (into members, already normalised by
// BalancedMembers) of the member owning partition p among n partitions:
// contiguous blocks of n/M, leftovers round-robin from the first member.
func BalancedOwner(p, n, m int) int {
	per := n / m
	if p < m*per {
		return (p / per) % m
	}
	return (p - m*per) % m
}

// Assignment maps every partition 0..N-1 to the member owning it.
type Assignment struct {
	Partitions int
	// Owner[p] is the member that owns partition p ("" when unowned).
	Owner []string
}

// MemberPartitions returns the partitions owned by member, ascending.
func (a Assignment) MemberPartitions(member string) []int {
	var out []int
	for p, m := range a.Owner {
		if m == member {
			out = append(out, p)
		}
	}
	return out
}

// Members returns the members that own at least one partition, in the
// order they first own one.
func (a Assignment) Members() []string {
	var out []string
	for _, m := range a.Owner {
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// BalancedAssignment assigns n partitions to members as the reference does.
func BalancedAssignment(members []string, n int) Assignment {
	a := Assignment{Partitions: n, Owner: make([]string, max(n, 0))}
	ms := BalancedMembers(members, n)
	if len(ms) == 0 || n <= 0 {
		return a
	}
	for p := 0; p < n; p++ {
		a.Owner[p] = ms[BalancedOwner(p, n, len(ms))]
	}
	return a
}

// MappedAssignment assigns partitions from explicit mappings. Entries that
// are out of range are ignored here; Validate reports them.
func MappedAssignment(mappings []MemberMapping, n int) Assignment {
	a := Assignment{Partitions: n, Owner: make([]string, max(n, 0))}
	for _, mm := range mappings {
		for _, p := range mm.Partitions {
			if p >= 0 && p < n && a.Owner[p] == "" {
				a.Owner[p] = mm.Member
			}
		}
	}
	return a
}

// PartitionFilters returns a member's consumer filter subjects: `<p>.<f>`
// for each owned partition p and each group filter f (">" when none).
//
// The order is the reference's, filter by filter and, within a filter, the
// partitions in the order given: the server compares FilterSubjects as an
// ordered list when a consumer is created again, so an instance of the
// reference and an instance of cg running the same member must produce the
// identical list or each would see the other's consumer as a conflict.
func PartitionFilters(partitions []int, filters []string) []string {
	if len(filters) == 0 {
		filters = []string{">"}
	}
	out := make([]string, 0, len(partitions)*len(filters))
	for _, f := range filters {
		for _, p := range partitions {
			out = append(out, strconv.Itoa(p)+"."+f)
		}
	}
	return out
}

// StripPartition removes the leading partition token from a subject and
// returns the partition it named (-1 when the first token is not a number).
func StripPartition(subject string) (string, int) {
	i := strings.IndexByte(subject, '.')
	if i < 0 {
		return subject, -1
	}
	p, err := strconv.Atoi(subject[:i])
	if err != nil {
		return subject[i+1:], -1
	}
	return subject[i+1:], p
}

// ElasticTransformDestination is the subject transform destination the
// work-queue stream of an elastic group applies to a partitioning filter:
// `{{Partition(N,w1,...)}}.` + filter with its k-th `*` written
// `{{Wildcard(k)}}`. An empty filter stands for `>`.
func ElasticTransformDestination(n int, filter string, wildcards []int) string {
	var b strings.Builder
	b.WriteString("{{Partition(")
	b.WriteString(strconv.Itoa(n))
	for _, w := range wildcards {
		b.WriteString(",")
		b.WriteString(strconv.Itoa(w))
	}
	b.WriteString(")}}")
	if filter == "" {
		filter = ">"
	}
	k := 0
	for _, t := range strings.Split(filter, ".") {
		b.WriteString(".")
		if t == "*" {
			k++
			b.WriteString("{{Wildcard(" + strconv.Itoa(k) + ")}}")
		} else {
			b.WriteString(t)
		}
	}
	return b.String()
}

// PartitionTransform describes a stream subject transform whose destination
// starts with a {{partition(N, ...)}} token.
type PartitionTransform struct {
	Source      string
	Destination string
	Partitions  int
	Wildcards   []int
}

// ParsePartitionTransform reads the partition count and wildcard indexes of
// a destination whose first token is {{partition(N,...)}} (any case). ok is
// false when the first token is not a partition() call.
func ParsePartitionTransform(source, destination string) (PartitionTransform, bool, error) {
	first := destination
	if i := strings.Index(destination, "}}"); i >= 0 {
		first = destination[:i+2]
	}
	t := strings.TrimSpace(first)
	if !strings.HasPrefix(t, "{{") || !strings.HasSuffix(t, "}}") {
		return PartitionTransform{}, false, nil
	}
	inner := strings.TrimSpace(t[2 : len(t)-2])
	open := strings.IndexByte(inner, '(')
	if open < 0 || !strings.HasSuffix(inner, ")") || !strings.EqualFold(strings.TrimSpace(inner[:open]), "partition") {
		return PartitionTransform{}, false, nil
	}
	rest := destination[len(first):]
	if rest != "" && !strings.HasPrefix(rest, ".") {
		return PartitionTransform{}, false, nil
	}
	args := strings.Split(inner[open+1:len(inner)-1], ",")
	pt := PartitionTransform{Source: source, Destination: destination}
	n, err := strconv.Atoi(strings.TrimSpace(args[0]))
	if err != nil || n < 1 {
		return pt, true, fmt.Errorf("partition count %q in %q is not a positive number", strings.TrimSpace(args[0]), destination)
	}
	pt.Partitions = n
	for _, a := range args[1:] {
		w, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil {
			return pt, true, fmt.Errorf("wildcard index %q in %q is not a number", strings.TrimSpace(a), destination)
		}
		pt.Wildcards = append(pt.Wildcards, w)
	}
	return pt, true, nil
}
