package cg

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// KeyLocation says where a partition key lands: what is hashed, its hash,
// and the partition among Partitions.
type KeyLocation struct {
	// Tokens are the subject tokens (or given key parts) concatenated,
	// in order, into Key.
	Tokens     []string
	Key        string
	Hash       uint32
	Partition  int
	Partitions int
	// Filter is the partitioning filter the subject matched ("" for a
	// key given directly).
	Filter PartitioningFilter
}

// LocateKey places key tokens, concatenated as the server concatenates
// the wildcard tokens, among n partitions (n at least 1).
func LocateKey(tokens []string, n int) KeyLocation {
	key := strings.Join(tokens, "")
	return KeyLocation{Tokens: tokens, Key: key, Hash: partition.Hash(key), Partition: partition.PartitionOfKey(key, n), Partitions: n}
}

// LocateSubject places subject among n partitions through the first of
// filters it matches; no filters hash the whole subject, as
// {{partition(n)}} does. It fails when the subject matches none.
func LocateSubject(subject string, n int, filters []PartitioningFilter) (KeyLocation, error) {
	if n < 1 {
		return KeyLocation{}, invalid("partitions", fmt.Sprint(n), "must be at least 1")
	}
	if err := literalSubject(subject); err != nil {
		return KeyLocation{}, err
	}
	if len(filters) == 0 {
		filters = []PartitioningFilter{{Filter: ">"}}
	}
	var tried []string
	for _, pf := range filters {
		tokens, err := partition.PartitionKeyTokens(subject, pf.Filter, pf.PartitioningWildcards)
		if err != nil {
			tried = append(tried, pf.String())
			continue
		}
		loc := LocateKey(tokens, n)
		loc.Filter = pf
		return loc, nil
	}
	return KeyLocation{}, invalid("subject", strconv.Quote(subject), "matches none of the partitioning filters %s", strings.Join(tried, ", "))
}

// StaticPartitioning returns the partitioning of a static group's stream:
// its {{partition(N,...)}} subject transform as a partitioning filter
// (the transform's source, ">" when it has none) and N.
func (c *Client) StaticPartitioning(ctx context.Context, stream string) (PartitioningFilter, int, error) {
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return PartitioningFilter{}, 0, err
	}
	pt, err := StreamPartitioning(si)
	if err != nil {
		return PartitioningFilter{}, 0, err
	}
	src := pt.Source
	if src == "" {
		src = ">"
	}
	return PartitioningFilter{Filter: src, PartitioningWildcards: pt.Wildcards}, pt.Partitions, nil
}

// literalSubject checks a subject a message could be published to.
func literalSubject(s string) error {
	for _, t := range strings.Split(s, ".") {
		if t == "" || t == "*" || t == ">" || strings.ContainsAny(t, " \t\r\n") {
			return invalid("subject", strconv.Quote(s), "must be a literal subject: non-empty tokens, no wildcards or white space")
		}
	}
	return nil
}
