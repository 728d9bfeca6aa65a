package cg

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// StaticConfig is the stored configuration of a static group, kept as JSON
// under key <stream>.<group> in the static-consumer-groups KV bucket. The
// field names and omitempty rules are the reference's, byte for byte.
type StaticConfig struct {
	MaxMembers     int                       `json:"max_members"`
	Filters        []string                  `json:"filters,omitempty"`
	Members        []string                  `json:"members,omitempty"`
	MemberMappings []partition.MemberMapping `json:"member_mappings,omitempty"`
	// Layout is LayoutMember when empty (the reference's format, and the
	// only one its bucket holds); LayoutPartition groups are stored in
	// StaticPartitionBucket.
	Layout Layout `json:"layout,omitempty"`
}

// ValidationError says which field of a configuration is wrong, with which
// value, and how to mend it.
type ValidationError struct {
	Field  string
	Value  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Field, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s", e.Field, e.Value, e.Reason)
}

func invalid(field, value, format string, args ...any) error {
	return &ValidationError{Field: field, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// ValidateName checks a stream, group or member name against what both the
// server (consumer and stream names) and the KV key scheme
// (<stream>.<group>) accept. Stream and group names (kind "stream" or
// "group") form the KV key, whose characters the KV API limits to
// A-Z a-z 0-9 - _ = (and '/', which names may not use); member names only
// name consumers and may use any other printable character.
func ValidateName(kind, name string) error {
	if name == "" {
		return invalid(kind+" name", `""`, "must not be empty")
	}
	inKey := kind == "stream" || kind == "group"
	for _, r := range name {
		switch {
		case kind == "member" && strings.ContainsRune(".*>/\\", r):
			return invalid(kind+" name", strconv.Quote(name), "%s", memberNameReason(r))
		case r == '.':
			return invalid(kind+" name", strconv.Quote(name), "must not contain '.' (it separates stream and group in the KV key)")
		case r == '*' || r == '>':
			return invalid(kind+" name", strconv.Quote(name), "must not contain the wildcards '*' or '>'")
		case r == '/' || r == '\\':
			return invalid(kind+" name", strconv.Quote(name), "must not contain '/' or '\\'")
		case unicode.IsSpace(r) || !unicode.IsPrint(r):
			return invalid(kind+" name", strconv.Quote(name), "must not contain white space or control characters")
		case inKey && !isKVKeyRune(r):
			return invalid(kind+" name", strconv.Quote(name), "may only use letters A-Z a-z, digits, '-', '_' and '=' (it is part of the KV key <stream>.<group>); %q is not allowed", r)
		}
	}
	if len(name) > 200 {
		return invalid(kind+" name", strconv.Quote(name[:20]+"..."), "is too long (at most 200 bytes)")
	}
	return nil
}

// isKVKeyRune reports whether r may appear in a JetStream KV key, apart from
// the '.' separator and '/'.
func isKVKeyRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '='
}

// ValidateFilter checks a subject filter used as a group filter.
func ValidateFilter(f string) error {
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
		case len(t) > 1 && strings.ContainsAny(t, "*>"):
			return invalid("filter", strconv.Quote(f), "wildcards '*' and '>' must stand alone as a token")
		}
	}
	return nil
}

// Validate checks a static configuration as strictly as cg writes one. It
// is used before anything is created; ValidateStored is the more tolerant
// check applied to values read from the server.
func (c StaticConfig) Validate() error {
	if err := checkLayout(c.Layout, c.MaxMembers); err != nil {
		return err
	}
	if err := checkStaticCeiling(c); err != nil {
		return err
	}
	if err := c.ValidateStored(); err != nil {
		return err
	}
	if len(c.Members) == 0 && len(c.MemberMappings) == 0 {
		return invalid("members", "", "at least one member is required")
	}
	seen := map[string]bool{}
	for _, m := range c.Members {
		if err := ValidateName("member", m); err != nil {
			return err
		}
		if seen[m] {
			return invalid("member", strconv.Quote(m), "is listed twice; list each member once")
		}
		seen[m] = true
	}
	if len(c.Members) > c.MaxMembers {
		return invalid("members", strconv.Itoa(len(c.Members)), "more members than partitions (max-members is %d); raise max-members or list fewer members", c.MaxMembers)
	}
	for _, mm := range c.MemberMappings {
		if err := ValidateName("member", mm.Member); err != nil {
			return err
		}
		if len(mm.Partitions) == 0 {
			return invalid("member mapping", strconv.Quote(mm.Member), "lists no partitions")
		}
	}
	for _, f := range c.Filters {
		if err := ValidateFilter(f); err != nil {
			return err
		}
	}
	// The server refuses a consumer one of whose filter subjects contains
	// another, and a member's filters are the group filters behind one
	// partition token, so such a group could never start a member.
	for i, a := range c.Filters {
		for j, b := range c.Filters {
			if i != j && subjectSubset(a, b) {
				return invalid("filter", strconv.Quote(a), "overlaps filter %q (every subject it matches, %q matches too); the server refuses a consumer whose filters overlap, so list each subject space once", b, b)
			}
		}
	}
	return nil
}

// subjectSubset reports whether every subject filter a matches is matched by
// filter b too, the test the server applies to a consumer's filters.
func subjectSubset(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i, t := range bt {
		if i >= len(at) {
			return false
		}
		if t == ">" {
			return true
		}
		switch {
		case at[i] == ">":
			return false
		case at[i] == "*":
			if t != "*" {
				return false
			}
		case t != "*" && t != at[i]:
			return false
		}
	}
	return len(at) == len(bt)
}

// ValidateStored applies the rules every implementation relies on: the
// ones the reference enforces on a stored value. A member treats a value
// failing them as unusable and stops with an error naming the key.
func (c StaticConfig) ValidateStored() error {
	if c.MaxMembers < 1 {
		return invalid("max_members", strconv.Itoa(c.MaxMembers), "must be at least 1")
	}
	if c.MaxMembers > maxStoredPartitions {
		return invalid("max_members", strconv.Itoa(c.MaxMembers), "is more than cg can read (%d partitions)", maxStoredPartitions)
	}
	if len(c.Members) != 0 && len(c.MemberMappings) != 0 {
		return invalid("members", "", "a group has either a member list or member mappings, not both")
	}
	if err := validateStoredFilters(c.Filters, false); err != nil {
		return err
	}
	return validateMappings(c.MemberMappings, c.MaxMembers)
}

func validateMappings(mms []partition.MemberMapping, n int) error {
	if len(mms) == 0 {
		return nil
	}
	if len(mms) > n {
		return invalid("member_mappings", strconv.Itoa(len(mms)), "more mapping entries than partitions (%d)", n)
	}
	members := map[string]bool{}
	owner := map[int]string{}
	for _, mm := range mms {
		if members[mm.Member] {
			return invalid("member mapping", strconv.Quote(mm.Member), "member appears in more than one mapping; give each member one entry")
		}
		members[mm.Member] = true
		for _, p := range mm.Partitions {
			if p < 0 || p >= n {
				return invalid("member mapping", fmt.Sprintf("%q partition %d", mm.Member, p), "out of range: partitions are 0 to %d", n-1)
			}
			if prev, dup := owner[p]; dup {
				return invalid("member mapping", fmt.Sprintf("%q partition %d", mm.Member, p), "partition %d is already mapped to %q; map each partition once", p, prev)
			}
			owner[p] = mm.Member
		}
	}
	if len(owner) != n {
		var missing []string
		for p := 0; p < n && len(missing) < 10; p++ {
			if _, ok := owner[p]; !ok {
				missing = append(missing, strconv.Itoa(p))
			}
		}
		return invalid("member_mappings", "", "partitions %s are not mapped; every partition 0 to %d must be mapped exactly once", strings.Join(missing, ","), n-1)
	}
	return nil
}

// Assignment returns which member owns each partition.
func (c StaticConfig) Assignment() partition.Assignment {
	if len(c.Members) > 0 {
		return partition.BalancedAssignment(c.Members, c.MaxMembers)
	}
	return partition.MappedAssignment(c.MemberMappings, c.MaxMembers)
}

// IsMember reports whether name is in the group's membership.
func (c StaticConfig) IsMember(name string) bool {
	if len(c.Members) > 0 {
		return slices.Contains(c.Members, name)
	}
	return slices.ContainsFunc(c.MemberMappings, func(m partition.MemberMapping) bool { return m.Member == name })
}

// MemberNames lists the configured members: the normalised member list or
// the mapping entries in stored order.
func (c StaticConfig) MemberNames() []string {
	if len(c.Members) > 0 {
		return partition.BalancedMembers(c.Members, c.MaxMembers)
	}
	out := make([]string, 0, len(c.MemberMappings))
	for _, mm := range c.MemberMappings {
		out = append(out, mm.Member)
	}
	return out
}

// MemberFilters returns the consumer filter subjects for member, in the
// reference's order: a mapped member's partitions as its mapping lists them
// (see PartitionFilters for why the order matters).
func (c StaticConfig) MemberFilters(member string) []string {
	if len(c.Members) == 0 {
		for _, mm := range c.MemberMappings {
			if mm.Member == member {
				return partition.PartitionFilters(mm.Partitions, c.Filters)
			}
		}
		return partition.PartitionFilters(nil, c.Filters)
	}
	return partition.PartitionFilters(c.Assignment().MemberPartitions(member), c.Filters)
}

// Equal reports whether two configurations describe the same group.
func (c StaticConfig) Equal(o StaticConfig) bool {
	a, _ := json.Marshal(c)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// Diff names the fields that differ between two configurations, for a
// "the group exists with another configuration" error.
func (c StaticConfig) Diff(o StaticConfig) []string {
	var out []string
	if c.MaxMembers != o.MaxMembers {
		out = append(out, fmt.Sprintf("max-members %d (asked %d)", c.MaxMembers, o.MaxMembers))
	}
	if !slices.Equal(c.Filters, o.Filters) {
		out = append(out, fmt.Sprintf("filters %v (asked %v)", c.Filters, o.Filters))
	}
	if !slices.Equal(c.Members, o.Members) {
		out = append(out, fmt.Sprintf("members %v (asked %v)", c.Members, o.Members))
	}
	a, _ := json.Marshal(c.MemberMappings)
	b, _ := json.Marshal(o.MemberMappings)
	if string(a) != string(b) {
		out = append(out, fmt.Sprintf("mappings %s (asked %s)", partition.FormatMappings(c.MemberMappings), partition.FormatMappings(o.MemberMappings)))
	}
	return out
}

// maxMappingRange bounds one range of a command-line mapping entry. A
// consumer's filter list that long would not fit in a request anyway.
const maxMappingRange = 1 << 20

// ParseMapping reads one command-line mapping entry `member:p1,p2,...`;
// ranges such as 0-4 are accepted too.
func ParseMapping(s string) (partition.MemberMapping, error) {
	name, parts, ok := strings.Cut(s, ":")
	if !ok {
		return partition.MemberMapping{}, invalid("mapping", strconv.Quote(s), "has no ':'; write member:p1,p2,... such as m1:0,1,2")
	}
	if err := ValidateName("member", name); err != nil {
		return partition.MemberMapping{}, invalid("mapping", strconv.Quote(s), "bad member name: %s", err.(*ValidationError).Reason)
	}
	if parts == "" {
		return partition.MemberMapping{}, invalid("mapping", strconv.Quote(s), "lists no partitions; write member:p1,p2,... such as m1:0,1,2")
	}
	mm := partition.MemberMapping{Member: name}
	for _, part := range strings.Split(parts, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, errA := strconv.Atoi(lo)
		b := a
		var errB error
		if isRange {
			b, errB = strconv.Atoi(hi)
		}
		if errA != nil || errB != nil || a < 0 || b < a {
			return partition.MemberMapping{}, invalid("mapping", strconv.Quote(s), "partition %q is not a number or range; write m1:0,1,2 or m1:0-2", part)
		}
		// Expanding a typo such as 0-99999999999 would exhaust memory
		// before validation could say it is out of range.
		if b-a >= maxMappingRange {
			return partition.MemberMapping{}, invalid("mapping", strconv.Quote(s), "range %q spans more than %d partitions", part, maxMappingRange)
		}
		for p := a; p <= b; p++ {
			mm.Partitions = append(mm.Partitions, p)
		}
	}
	return mm, nil
}

// changedFrom names what a stored static configuration changed, new value
// first: "members [m1 m2] (was [m1])".
func changedFrom(old, cur StaticConfig) []string {
	out := cur.Diff(old)
	for i, d := range out {
		out[i] = strings.Replace(d, " (asked ", " (was ", 1)
	}
	return out
}
