package cg

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// This file holds the checks that keep a group from being created, or an
// instance from starting, when it would consume nothing or only part of
// what it is meant to: filters that match none of the subjects the stream
// stores, stream subjects the partition transform leaves without a
// partition token, a partition count the stream does not stamp. They work
// on the stream's stored subject space: what its configured subjects
// become once its subject transform has run. A group reads stored
// subjects, never the configured ones: a static member's consumer filters
// them, an elastic work stream sources them.

// intersectPattern returns the subject pattern matching exactly the
// subjects that both patterns a and b match (NATS tokens: '*' one token,
// '>' one or more at the end), and false when no subject matches both.
func intersectPattern(a, b string) (string, bool) {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	out := make([]string, 0, max(len(at), len(bt)))
	for i := 0; ; i++ {
		switch {
		case i == len(at) && i == len(bt):
			return strings.Join(out, "."), true
		case i == len(at) || i == len(bt):
			// One pattern has run out of tokens while the other still
			// needs at least one (a '>' needs one too).
			return "", false
		}
		x, y := at[i], bt[i]
		switch {
		case x == ">":
			return strings.Join(append(out, bt[i:]...), "."), true
		case y == ">":
			return strings.Join(append(out, at[i:]...), "."), true
		case x == "*":
			out = append(out, y)
		case y == "*" || x == y:
			out = append(out, x)
		default:
			return "", false
		}
	}
}

// patternsIntersect reports whether some subject matches both patterns.
func patternsIntersect(a, b string) bool {
	_, ok := intersectPattern(a, b)
	return ok
}

// storedPart is one piece of a stream's stored subject space.
type storedPart struct {
	// Subject is the configured stream subject the piece comes from.
	Subject string
	// Pattern matches the piece's stored subjects. Where a transform
	// function other than partition() and wildcard() makes the tokens, the
	// pattern ends in '>' from there: a superset.
	Pattern string
	// Stamped: the piece went through the stream's partition transform, so
	// its first token is the partition number.
	Stamped bool
	// Except, for a piece the transform leaves alone: the subjects matching
	// it (the transform source) are not in the piece.
	Except string
	// keyWildcards are the 1-based indexes of Pattern's '*' that stand for
	// the configured subject's own wildcards (not the partition token).
	keyWildcards []int
	// partitionWildcard is the 1-based index of the partition token's '*'
	// in Pattern (0 when not stamped).
	partitionWildcard int
	// inputWildcards[k-1], for a transformed piece, is which '*' of the
	// transformed pattern (1-based) Pattern's k-th '*' copies; 0 for the
	// partition token.
	inputWildcards []int
}

// subjectSpace is what a stream stores.
type subjectSpace struct {
	stream string
	// known is false when the stream's configuration cannot tell: it lists
	// no subjects, or it mirrors or sources other streams.
	known bool
	parts []storedPart
	// partitions is N of the stream's partition transform, 0 when none.
	partitions int
	// source and dest are the transform's ("" when none).
	source, dest string
}

// storedSubjects works out the stream's stored subject space from its
// subjects and subject transform.
func storedSubjects(si *jetstream.StreamInfo) subjectSpace {
	cfg := si.Config
	sp := subjectSpace{stream: cfg.Name, known: len(cfg.Subjects) > 0 && cfg.Mirror == nil && len(cfg.Sources) == 0}
	var src, dest string
	if st := cfg.SubjectTransform; st != nil && st.Destination != "" {
		src, dest = st.Source, st.Destination
		if src == "" {
			src = ">" // the server's reading of an empty source
		}
		if pt, ok, err := partition.ParsePartitionTransform(src, dest); ok && err == nil {
			sp.partitions = pt.Partitions
		}
		sp.source, sp.dest = src, dest
	}
	for _, s := range cfg.Subjects {
		if src != "" {
			if in, ok := intersectPattern(s, src); ok {
				sp.parts = append(sp.parts, transformedPart(s, src, dest, in))
				if subjectSubset(s, src) {
					continue
				}
				sp.parts = append(sp.parts, storedPart{Subject: s, Pattern: s, Except: src, keyWildcards: allWildcards(s)})
				continue
			}
		}
		sp.parts = append(sp.parts, storedPart{Subject: s, Pattern: s, keyWildcards: allWildcards(s)})
	}
	return sp
}

func allWildcards(pattern string) []int {
	out := []int{}
	k := 0
	for _, t := range strings.Split(pattern, ".") {
		if t == "*" {
			k++
			out = append(out, k)
		}
	}
	return out
}

// transformedPart is what the transform src -> dest makes of the
// subjects matching in (a pattern within src).
func transformedPart(subject, src, dest, in string) storedPart {
	p := storedPart{Subject: subject, keyWildcards: []int{}}
	stoks, itoks := strings.Split(src, "."), strings.Split(in, ".")
	var starAt []int // subject token index of src's k-th '*'
	for i, t := range stoks {
		if t == "*" {
			starAt = append(starAt, i)
		}
	}
	// inStar[i] is the 1-based index of in's '*' at token i (0: literal).
	inStar := make([]int, len(itoks))
	for i, k := 0, 0; i < len(itoks); i++ {
		if itoks[i] == "*" {
			k++
			inStar[i] = k
		}
	}
	var out []string
	stars := 0
	copyIn := func(i int) {
		out = append(out, itoks[i])
		if itoks[i] == "*" {
			stars++
			p.keyWildcards = append(p.keyWildcards, stars)
			p.inputWildcards = append(p.inputWildcards, inStar[i])
		}
	}
	dtoks := strings.Split(dest, ".")
build:
	for i, dt := range dtoks {
		fn, args, isFn := transformFunction(dt)
		switch {
		case !isFn && dt == ">":
			// The source's '>' passes through: the tokens the
			// intersection has from there.
			if n := len(stoks) - 1; stoks[n] == ">" && n < len(itoks) {
				for j := n; j < len(itoks); j++ {
					copyIn(j)
				}
			} else {
				out = append(out, ">")
			}
			break build
		case !isFn:
			out = append(out, dt)
		case fn == "wildcard" && len(args) == 1 && args[0] >= 1 && args[0] <= len(starAt) && starAt[args[0]-1] < len(itoks):
			copyIn(starAt[args[0]-1])
		case fn == "partition":
			out = append(out, "*")
			stars++
			p.inputWildcards = append(p.inputWildcards, 0)
			if i == 0 {
				p.Stamped = true
				p.partitionWildcard = stars
			}
		default:
			out = append(out, ">")
			break build
		}
	}
	p.Pattern = strings.Join(out, ".")
	return p
}

// transformFunction reads a destination token that is a mapping function,
// {{name(args)}} (any case, spaces allowed) or the legacy $N for
// wildcard(N). Arguments that are not numbers make it unknown (name "").
func transformFunction(tok string) (name string, args []int, ok bool) {
	if n, err := strconv.Atoi(strings.TrimPrefix(tok, "$")); strings.HasPrefix(tok, "$") && err == nil {
		return "wildcard", []int{n}, true
	}
	if !strings.Contains(tok, "{{") {
		return "", nil, false
	}
	t := strings.TrimSpace(tok)
	if !strings.HasPrefix(t, "{{") || !strings.HasSuffix(t, "}}") {
		return "", nil, true
	}
	inner := strings.TrimSpace(t[2 : len(t)-2])
	open := strings.IndexByte(inner, '(')
	if open < 0 || !strings.HasSuffix(inner, ")") {
		return "", nil, true
	}
	name = strings.ToLower(strings.TrimSpace(inner[:open]))
	for _, a := range strings.Split(inner[open+1:len(inner)-1], ",") {
		n, err := strconv.Atoi(strings.TrimSpace(a))
		if err != nil {
			return "", nil, true
		}
		args = append(args, n)
	}
	return name, args, true
}

// partitionTokenOK reports whether tok, a pattern's first token, can
// match a partition number 0..n-1.
func partitionTokenOK(tok string, n int) bool {
	if tok == "*" || tok == ">" || n <= 0 {
		return true
	}
	p, err := strconv.Atoi(tok)
	return err == nil && p >= 0 && p < n && strconv.Itoa(p) == tok
}

// selects reports whether filter f, over stored subjects, matches some
// subject of the piece.
func (sp subjectSpace) selects(f string, p storedPart) bool {
	in, ok := intersectPattern(f, p.Pattern)
	if !ok {
		return false
	}
	if p.Except != "" && subjectSubset(in, p.Except) {
		return false // all of it is transformed into another piece
	}
	if p.Stamped {
		first, _, _ := strings.Cut(in, ".")
		return partitionTokenOK(first, sp.partitions)
	}
	return true
}

// matches reports whether filter f, over stored subjects, matches
// anything the stream stores (true when that cannot be told).
func (sp subjectSpace) matches(f string) bool {
	if !sp.known {
		return true
	}
	return slices.ContainsFunc(sp.parts, func(p storedPart) bool { return sp.selects(f, p) })
}

// describe lists the stored forms, the partition token written <p>.
func (sp subjectSpace) describe() string {
	var out []string
	for _, p := range sp.parts {
		s := p.Pattern
		if p.Stamped {
			toks := strings.Split(s, ".")
			toks[p.partitionWildcard-1] = "<p>"
			s = strings.Join(toks, ".")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, " ")
}

// stamped reports whether some subject is stored with a partition token.
func (sp subjectSpace) stamped() bool {
	return slices.ContainsFunc(sp.parts, func(p storedPart) bool { return p.Stamped })
}

// filters are the partitioning filters that take in exactly the stored
// pieces, each hashed on the configured subject's own wildcards (a
// stamped piece with none: on its partition token, which the stream
// hashed from the key; a piece ending in '>' with none: the whole
// subject, as DefaultPartitioningFilters does).
func (sp subjectSpace) filters() []PartitioningFilter {
	out := make([]PartitioningFilter, 0, len(sp.parts))
	for _, p := range sp.parts {
		pf := PartitioningFilter{Filter: p.Pattern, PartitioningWildcards: slices.Clone(p.keyWildcards)}
		if len(pf.PartitioningWildcards) == 0 && p.Stamped && !strings.HasSuffix(p.Pattern, ">") {
			pf.PartitioningWildcards = []int{p.partitionWildcard}
		}
		out = append(out, pf)
	}
	return out
}

// DefaultElasticFilters are the partitioning filters an elastic group over
// the stream gets when none are given. The work stream sources what the
// stream stores, so they are the stored subjects: for a stream with no
// subject transform, its subjects (DefaultPartitioningFilters); for a
// partition-stamped stream such as the seed's ORDERS (orders.* stored as
// <p>.orders.*), the stored form '*.orders.*', hashed on the customer's
// token ('*.orders.*:2'), so that the group takes in every message and
// keeps each key in one partition. It fails when the stored forms overlap
// as filters: then the filters must be named.
func DefaultElasticFilters(si *jetstream.StreamInfo) ([]PartitioningFilter, error) {
	sp := storedSubjects(si)
	if sp.source == "" || !sp.known {
		return DefaultPartitioningFilters(si.Config.Subjects), nil
	}
	pfs := sp.filters()
	for i := range pfs {
		for j := i + 1; j < len(pfs); j++ {
			if patternsIntersect(pfs[i].Filter, pfs[j].Filter) {
				return nil, fmt.Errorf("stream %s stores subjects as %s (its subject transform %s -> %s), and the stored forms %q and %q overlap as filters, so no default can be made of them",
					sp.stream, sp.describe(), sp.source, sp.dest, pfs[i].Filter, pfs[j].Filter)
			}
		}
	}
	if err := (ElasticConfig{MaxMembers: 1, PartitioningFilters: pfs}).Validate(); err != nil {
		return nil, fmt.Errorf("stream %s's stored subjects %s cannot serve as partitioning filters: %w", sp.stream, sp.describe(), err)
	}
	return pfs, nil
}

// storedForm is what the stream's partition transform makes of a
// partitioning filter written on the configured subjects, hashed on the
// same tokens: 'orders.*:1' on the seed's ORDERS is '*.orders.*:2'.
func (sp subjectSpace) storedForm(pf PartitioningFilter) (PartitioningFilter, bool) {
	if sp.source == "" || !subjectSubset(pf.Filter, sp.source) {
		return pf, false
	}
	part := transformedPart(pf.Filter, sp.source, sp.dest, pf.Filter)
	if !part.Stamped {
		return pf, false
	}
	out := PartitioningFilter{Filter: part.Pattern, PartitioningWildcards: []int{}}
	for _, w := range pf.PartitioningWildcards {
		k := slices.Index(part.inputWildcards, w)
		if k < 0 {
			return pf, false // the transform drops that token
		}
		out.PartitioningWildcards = append(out.PartitioningWildcards, k+1)
	}
	return out, out.validate() == nil
}

// elasticPreflight refuses partitioning filters that match none of the
// subjects the stream stores: the work stream would source nothing
// through them.
func elasticPreflight(si *jetstream.StreamInfo, cfg ElasticConfig) error {
	sp := storedSubjects(si)
	for _, pf := range cfg.PartitioningFilters {
		if sp.matches(pf.Filter) {
			continue
		}
		hint := "give a partitioning filter within them"
		if d, ok := sp.storedForm(pf); ok {
			hint = fmt.Sprintf("the stream's subject transform puts the partition token first: give the stored form '%s'", d.String())
		} else if pfs, err := DefaultElasticFilters(si); err == nil && len(pfs) > 0 {
			hint = "give a filter on the stored subjects, such as " + quoteFilters(pfs)
		}
		return described{fmt.Sprintf("partitioning filter %q matches none of the subjects stream %s stores (%s): the group would take in nothing; %s", pf.Filter, sp.stream, sp.describe(), hint), ErrNoMatchingSubjects}
	}
	return nil
}

func quoteFilters(pfs []PartitioningFilter) string {
	out := make([]string, len(pfs))
	for i, pf := range pfs {
		out[i] = "'" + pf.String() + "'"
	}
	return strings.Join(out, " and ")
}

// staticPreflight checks a static group's filters against what the stream
// stores: each must match some subject stored with the partition token
// (members filter <p>.<filter>), and none may select subjects the stream
// stores without one, which no member ever sees. With join it also checks
// what create checks first: the stream is partitioned into max_members.
func staticPreflight(si *jetstream.StreamInfo, cfg StaticConfig, join bool) error {
	pt, err := StreamPartitioning(si)
	if err != nil {
		if join {
			return err
		}
		return nil // create says so next, in its own words
	}
	if join && pt.Partitions != cfg.MaxMembers {
		return fmt.Errorf("%w: stream %q partitions into %d ({{partition(%d,...)}}) but the group has max_members %d: members would serve only some of the partitions, the rest never; restore {{partition(%d,...)}} in the stream's subject transform, or delete the group and create it again with %d partitions",
			ErrStreamNotReady, si.Config.Name, pt.Partitions, pt.Partitions, cfg.MaxMembers, cfg.MaxMembers, pt.Partitions)
	}
	sp := storedSubjects(si)
	if !sp.known {
		return nil
	}
	for _, f := range cfg.SubjectFilters() {
		if !sp.stampedMatches(f) {
			return described{fmt.Sprintf("filter %q matches none of the subjects stream %s stores after the partition token (%s): members would receive nothing; give a filter within them, such as %s",
				f, sp.stream, sp.describe(), sp.stampedHint()), ErrNoMatchingSubjects}
		}
		if un := sp.uncovered(f); len(un) > 0 {
			return fmt.Errorf("%w: stream %s stores %s without a partition token (its subject transform source %q does not cover them), so no member would ever see them; widen the transform source to cover every subject of the stream, or create the group with filters on the covered part only, such as %s",
				ErrStreamNotReady, sp.stream, strings.Join(un, " "), sp.source, sp.stampedHint())
		}
	}
	return nil
}

// stampedMatches reports whether group filter f, behind the partition
// token, matches some stamped subject.
func (sp subjectSpace) stampedMatches(f string) bool {
	for _, p := range sp.parts {
		if !p.Stamped || p.partitionWildcard != 1 {
			continue
		}
		_, rest, ok := strings.Cut(p.Pattern, ".")
		if ok && patternsIntersect(f, rest) {
			return true
		}
	}
	return false
}

// uncovered lists the configured subjects whose unstamped part group
// filter f selects.
func (sp subjectSpace) uncovered(f string) []string {
	var out []string
	for _, p := range sp.parts {
		if !p.Stamped && sp.selects(f, p) {
			out = append(out, p.Subject)
		}
	}
	return out
}

// stampedHint names the filters behind the partition token.
func (sp subjectSpace) stampedHint() string {
	var out []string
	for _, p := range sp.parts {
		if _, rest, ok := strings.Cut(p.Pattern, "."); ok && p.Stamped && p.partitionWildcard == 1 {
			out = append(out, "'"+rest+"'")
		}
	}
	if len(out) == 0 {
		return "none (the transform leaves no token after the partition)"
	}
	return strings.Join(out, " and ")
}

// joinStaticPreflight is staticPreflight for an instance about to start,
// over the stream info its join read.
func joinStaticPreflight(si *jetstream.StreamInfo, cfg StaticConfig) error {
	return staticPreflight(si, cfg, true)
}

// joinElasticPreflight is elasticPreflight for an instance about to start.
func joinElasticPreflight(si *jetstream.StreamInfo, cfg ElasticConfig) error {
	return elasticPreflight(si, cfg)
}

// storedFilterProblem checks a stored filter as the server checks a
// consumer filter subject, which is more tolerant than what cg writes
// (ValidateFilter): a token such as 'a*' is a literal to the server.
func storedFilterProblem(f string) error {
	if f == "" {
		return invalid("filter", `""`, "must not be empty; use '>' for everything")
	}
	toks := strings.Split(f, ".")
	for i, t := range toks {
		switch {
		case t == "":
			return invalid("filter", strconv.Quote(f), "has an empty token (check for leading, trailing or doubled '.')")
		case t == ">" && i != len(toks)-1:
			return invalid("filter", strconv.Quote(f), "'>' may only be the last token")
		case strings.ContainsAny(t, " \t\r\n\f"):
			return invalid("filter", strconv.Quote(f), "must not contain white space")
		}
	}
	return nil
}

// validateStoredFilters checks stored group filters as the server will
// when a member creates its consumer with <p>.<filter> for each: each a
// valid subject, none inside another (API errors 10052 and 10138 were what
// a member saw of such a value before). elastic words the overlap as
// Validate does for partitioning filters.
func validateStoredFilters(fs []string, elastic bool) error {
	for _, f := range fs {
		if err := storedFilterProblem(f); err != nil {
			return err
		}
	}
	for i, a := range fs {
		for j, b := range fs {
			if i == j || !subjectSubset(a, b) {
				continue
			}
			if elastic {
				return invalid("partitioning filters", strconv.Quote(a)+" and "+strconv.Quote(b), "overlap; a member's consumer cannot have overlapping filters")
			}
			return invalid("filter", strconv.Quote(a), "overlaps filter %q (every subject it matches, %q matches too); the server refuses a consumer whose filters overlap, so list each subject space once", b, b)
		}
	}
	return nil
}

// streamSubjectFindings are check's findings on a group's filters against
// what the stream stores; nil when they fit, when it cannot be told, or
// when have already says a filter matches nothing.
func streamSubjectFindings(t checkTarget, si *jetstream.StreamInfo, cfg health.GroupConfig, have []health.Finding) []health.Finding {
	if slices.ContainsFunc(have, func(f health.Finding) bool { return f.Code == health.CodeStreamFilterMismatch }) {
		return nil
	}
	var err error
	switch c := cfg.(type) {
	case StaticConfig:
		err = staticPreflight(si, c, false)
	case ElasticConfig:
		err = elasticPreflight(si, c)
	}
	if err == nil {
		return nil
	}
	f := health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamFilterMismatch, Message: sentinelDetail(err, ErrNoMatchingSubjects), Cause: err,
		Hint:   "delete the group and create it again with filters on what the stream stores",
		Remedy: t.recreate("", " with filters on what the stream stores")}
	if errors.Is(err, ErrStreamNotReady) {
		f.Code = health.CodeStreamSubjectsUnstamped
		f.Message = sentinelDetail(err, ErrStreamNotReady)
		f.Hint = "widen the stream's subject transform source to cover every subject, or delete the group and create it again with filters on the covered part"
		f.Remedy = nil
	}
	return []health.Finding{f}
}
