package cg

import "github.com/cg-dev/cg/pkg/cg/partition"

// The partition math (hashing, balanced and mapped assignment, minimal
// moves, the move plan) lives in package partition, which imports no
// NATS. These aliases and wrappers keep every name package cg exported
// before compiling and behaving as it did; new code may import
// github.com/cg-dev/cg/pkg/cg/partition directly.

// Assignment maps every partition 0..N-1 to the member owning it.
type Assignment = partition.Assignment

// MemberMapping hands an explicit set of partitions to one member. Its JSON
// form is part of the on-server contract shared with the reference.
type MemberMapping = partition.MemberMapping

// Move is one partition changing owner ("" for none).
type Move = partition.Move

// PartitionTransform describes a stream subject transform whose destination
// starts with a {{partition(N, ...)}} token.
type PartitionTransform = partition.PartitionTransform

// Hash is the FNV-1a 32-bit hash the server's {{partition()}} transform uses.
func Hash(key string) uint32 { return partition.Hash(key) }

// PartitionOfKey returns the partition a hashed key lands in among n
// partitions. n must be at least 1.
func PartitionOfKey(key string, n int) int { return partition.PartitionOfKey(key, n) }

// PartitionKey returns the string the server hashes for subject; see
// partition.PartitionKey.
func PartitionKey(subject, filter string, wildcards []int) (string, error) {
	return partition.PartitionKey(subject, filter, wildcards)
}

// PartitionKeyTokens returns the tokens PartitionKey concatenates; see
// partition.PartitionKeyTokens.
func PartitionKeyTokens(subject, filter string, wildcards []int) ([]string, error) {
	return partition.PartitionKeyTokens(subject, filter, wildcards)
}

// PartitionOfSubject is the partition the server's transform
// {{partition(n, wildcards...)}} over source filter assigns to subject.
func PartitionOfSubject(subject, filter string, n int, wildcards []int) (int, error) {
	return partition.PartitionOfSubject(subject, filter, n, wildcards)
}

// BalancedMembers normalises a member list: first occurrence wins, sorted
// by byte order, at most n kept.
func BalancedMembers(members []string, n int) []string { return partition.BalancedMembers(members, n) }

// BalancedOwner returns the index of the member owning partition p among n
// partitions and m members; see partition.BalancedOwner.
func BalancedOwner(p, n, m int) int { return partition.BalancedOwner(p, n, m) }

// BalancedAssignment assigns n partitions to members as the reference does.
func BalancedAssignment(members []string, n int) Assignment {
	return partition.BalancedAssignment(members, n)
}

// MappedAssignment assigns partitions from explicit mappings.
func MappedAssignment(mappings []MemberMapping, n int) Assignment {
	return partition.MappedAssignment(mappings, n)
}

// PartitionFilters returns a member's consumer filter subjects: `<p>.<f>`
// for each owned partition p and each group filter f (">" when none).
func PartitionFilters(partitions []int, filters []string) []string {
	return partition.PartitionFilters(partitions, filters)
}

// StripPartition removes the leading partition token from a subject and
// returns the partition it named (-1 when the first token is not a number).
func StripPartition(subject string) (string, int) { return partition.StripPartition(subject) }

// ElasticTransformDestination is the subject transform destination the
// work-queue stream of an elastic group applies to a partitioning filter.
func ElasticTransformDestination(n int, filter string, wildcards []int) string {
	return partition.ElasticTransformDestination(n, filter, wildcards)
}

// ParsePartitionTransform reads the partition count and wildcard indexes of
// a destination whose first token is {{partition(N,...)}}.
func ParsePartitionTransform(source, destination string) (PartitionTransform, bool, error) {
	return partition.ParsePartitionTransform(source, destination)
}

// FormatMappings renders mappings as the command line writes them.
func FormatMappings(mms []MemberMapping) string { return partition.FormatMappings(mms) }

// Ranges renders partitions compactly: 0-4,7,9 (a run of two as 3,4).
func Ranges(ps []int) string { return partition.Ranges(ps) }

// Moves lists the partitions whose owner differs between two assignments.
func Moves(before, after Assignment) []Move { return partition.Moves(before, after) }

// MinimalMappings returns even-share mappings over members that move no
// more partitions than MinimumBalancedMoves; see partition.MinimalMappings.
func MinimalMappings(before Assignment, members []string) []MemberMapping {
	return partition.MinimalMappings(before, members)
}

// MinimumBalancedMoves is the fewest partitions that must change owner to
// go from before to any balanced assignment over members.
func MinimumBalancedMoves(before Assignment, members []string) int {
	return partition.MinimumBalancedMoves(before, members)
}

// MinimumMoves is the fewest partitions that must change owner to go from
// before to an assignment giving each member as many partitions as after.
func MinimumMoves(before, after Assignment) int { return partition.MinimumMoves(before, after) }

// OtherSplit returns a different split of the tokens' concatenation into
// as many non-empty tokens, which therefore hashes alike.
func OtherSplit(tokens []string) (split []string, ok bool) { return partition.OtherSplit(tokens) }
