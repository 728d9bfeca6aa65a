package cg

import (
	"context"
	"slices"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// KeyReader returns what reads the partitioning key off the subject a
// member's handler sees (Msg.Subject, partition token stripped): the
// subject tokens the group hashes, in the order it hashes them, joined with
// "." (orders.k7 hashed on its second token gives k7; a group that hashes
// the whole subject gives the subject). ok is false when the key cannot be
// read from the subject: a subject no partitioning filter matches, or a
// static stream whose transform does not write the hashed tokens back.
//
// The key is for the handler (a worker that wants it without parsing the
// subject); the server hashes the same tokens concatenated with no
// separator, which is also what concurrent instances order by.
func (c *Client) KeyReader(ctx context.Context, k Kind, stream, group string) (func(subject string) (key string, ok bool), error) {
	var tokens func(string) ([]string, bool)
	if k.HasWorkStream() {
		cfg, err := c.ElasticConfig(ctx, stream, group)
		if err != nil {
			return nil, err
		}
		tokens = elasticKeyTokens(cfg.PartitioningFilters)
	} else {
		si, err := c.streamInfo(ctx, stream)
		if err != nil {
			return nil, err
		}
		pt, err := StreamPartitioning(si)
		if err != nil {
			return nil, err
		}
		tokens = staticKeyTokens(pt)
	}
	return joinedKey(tokens, "."), nil
}

// joinedKey joins the tokens tokens reads with sep.
func joinedKey(tokens func(string) ([]string, bool), sep string) func(string) (string, bool) {
	return func(subject string) (string, bool) {
		toks, ok := tokens(subject)
		if !ok {
			return "", false
		}
		return strings.Join(toks, sep), true
	}
}

// elasticKeyTokens reads the hashed tokens with the first partitioning
// filter the subject matches. With no partitioning filter the whole
// subject is hashed: it is then the one token.
func elasticKeyTokens(filters []PartitioningFilter) func(string) ([]string, bool) {
	filters = slices.Clone(filters)
	return func(subject string) ([]string, bool) {
		if len(filters) == 0 {
			return []string{subject}, true
		}
		for _, pf := range filters {
			f := pf.Filter
			if f == "" {
				f = ">"
			}
			if toks, err := partition.PartitionKeyTokens(subject, f, pf.PartitioningWildcards); err == nil {
				return toks, true
			}
		}
		return nil, false
	}
}

// staticKeyTokens reads the hashed tokens off a stored subject (partition
// token stripped) of a stream transformed by pt: the tokens at the
// destination's {{wildcard(w)}} for each hashed wildcard w. When the
// destination does not carry them all (or, with none listed, does not
// reproduce the source subject), the key cannot be read. A whole hashed
// subject is the one token.
func staticKeyTokens(pt partition.PartitionTransform) func(string) ([]string, bool) {
	rest := ""
	if i := strings.Index(pt.Destination, "}}"); i >= 0 {
		rest = strings.TrimPrefix(pt.Destination[i+2:], ".")
	}
	dtoks := strings.Split(rest, ".")
	if rest == "" {
		dtoks = nil
	}
	at := map[int]int{} // wildcard index -> destination token position
	for i, t := range dtoks {
		if w, ok := wildcardRef(t); ok {
			at[w] = i
		}
	}
	if len(pt.Wildcards) == 0 {
		// The whole source subject is hashed: readable only when the
		// destination writes the source back as it was.
		stoks := strings.Split(pt.Source, ".")
		same := len(stoks) == len(dtoks)
		k := 0
		for i := 0; same && i < len(stoks); i++ {
			switch stoks[i] {
			case "*":
				k++
				w, ok := wildcardRef(dtoks[i])
				same = ok && w == k
			default:
				same = stoks[i] == dtoks[i]
			}
		}
		return func(subject string) ([]string, bool) {
			if !same {
				return nil, false
			}
			return []string{subject}, true
		}
	}
	pos, ok := staticKeyPositions(pt.Wildcards, at)
	if !ok {
		return func(string) ([]string, bool) { return nil, false }
	}
	return func(subject string) ([]string, bool) {
		toks := strings.Split(subject, ".")
		out := make([]string, 0, len(pos))
		for _, i := range pos {
			if i >= len(toks) {
				return nil, false
			}
			out = append(out, toks[i])
		}
		return out, true
	}
}

// staticKeyPositions are the destination token positions of the hashed
// wildcards (at maps a wildcard to its position); ok is false when one is
// not written.
func staticKeyPositions(wildcards []int, at map[int]int) (pos []int, ok bool) {
	for _, w := range wildcards {
		i, ok := at[w]
		if !ok {
			return nil, false
		}
		pos = append(pos, i)
	}
	return pos, true
}

// oneTokenKey reads, for a transform hashing one wildcard that its
// destination writes back, the key as that token of the subject: a slice
// of it, where the general reader splits the subject and joins tokens for
// every message. ok is false for any other transform.
func oneTokenKey(pt partition.PartitionTransform) (func(string) (string, bool), bool) {
	if len(pt.Wildcards) != 1 {
		return nil, false
	}
	i := strings.Index(pt.Destination, "}}")
	if i < 0 {
		return nil, false
	}
	rest := strings.TrimPrefix(pt.Destination[i+2:], ".")
	if rest == "" {
		return nil, false
	}
	at := -1
	for n, t := range strings.Split(rest, ".") {
		if w, ok := wildcardRef(t); ok && w == pt.Wildcards[0] {
			at = n // the last one, as staticKeyTokens takes it
		}
	}
	if at < 0 {
		return nil, false
	}
	return func(subject string) (string, bool) {
		for range at {
			dot := strings.IndexByte(subject, '.')
			if dot < 0 {
				return "", false
			}
			subject = subject[dot+1:]
		}
		if dot := strings.IndexByte(subject, '.'); dot >= 0 {
			subject = subject[:dot]
		}
		return subject, true
	}, true
}
