package cg

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/cg-dev/cg/pkg/cg/partition/partitiontest"
	"github.com/synadia-io/orbit.go/pcgroups"
)

// wantValidation asserts err is a *ValidationError whose message contains
// every one of want (the field, the offending value, the reason).
func wantValidation(t *testing.T, what string, err error, want []string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("%s: unexpected error %v", what, err)
		}
		return
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Errorf("%s: error %v (%T), want a *ValidationError mentioning %q", what, err, err, want)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not mention %q", what, err, w)
		}
	}
}

func TestConfigValidateName(t *testing.T) {
	long := strings.Repeat("x", 201)
	for _, c := range []struct {
		kind, name string
		want       []string // nil: valid
	}{
		{"stream", "ORDERS", nil},
		{"group", "ful-fill_ment=1", nil},
		{"member", "m1", nil},
		{"member", "wörker-日本", nil}, // members name consumers only
		{"member", strings.Repeat("x", 200), nil},
		{"member", "", []string{"member name", `""`, "must not be empty"}},
		{"stream", "", []string{"stream name", `""`, "must not be empty"}},
		{"stream", "a.b", []string{"stream name", `"a.b"`, "'.'"}},
		{"group", "g*", []string{"group name", `"g*"`, "wildcards"}},
		{"member", "m>", []string{"member name", `"m>"`, "wildcards"}},
		{"member", "m/1", []string{"member name", `"m/1"`, "'/'"}},
		{"group", `g\1`, []string{"group name", `"g\\1"`, "'/'"}},
		{"member", "m 1", []string{"member name", `"m 1"`, "white space"}},
		{"member", "m\t1", []string{"member name", `"m\t1"`, "white space"}},
		{"member", "m\x00", []string{"member name", `"m\x00"`, "control"}},
		{"member", "m\u200b", []string{"member name", `"m\u200b"`, "control"}},
		// Stream and group names are KV key parts.
		{"group", "grüppe", []string{"group name", `"grüppe"`, "KV key", `'ü'`}},
		{"stream", "S@1", []string{"stream name", `"S@1"`, "KV key", `'@'`}},
		{"group", "g:1", []string{"group name", `"g:1"`, `':'`}},
		{"member", long, []string{"member name", `"xxxxxxxxxxxxxxxxxxxx..."`, "too long"}},
	} {
		wantValidation(t, fmt.Sprintf("ValidateName(%q, %q)", c.kind, c.name), ValidateName(c.kind, c.name), c.want)
	}
}

func TestConfigValidateFilter(t *testing.T) {
	for _, c := range []struct {
		filter string
		want   []string
	}{
		{">", nil},
		{"*", nil},
		{"orders.*", nil},
		{"a.*.>", nil},
		{"日本.*", nil},
		{"", []string{"filter", `""`, "must not be empty"}},
		{"a..b", []string{"filter", `"a..b"`, "empty token"}},
		{".a", []string{"filter", `".a"`, "empty token"}},
		{"a.", []string{"filter", `"a."`, "empty token"}},
		{"a.>.b", []string{"filter", `"a.>.b"`, "'>' may only be the last token"}},
		{"a b", []string{"filter", `"a b"`, "white space"}},
		{"a.\fb", []string{"filter", `"a.\fb"`, "white space"}},
		{"a.b*", []string{"filter", `"a.b*"`, "stand alone"}},
		{"a.>x", []string{"filter", `"a.>x"`, "stand alone"}},
	} {
		wantValidation(t, fmt.Sprintf("ValidateFilter(%q)", c.filter), ValidateFilter(c.filter), c.want)
	}
}

// mapped builds member mappings from "m1:0,1" style entries.
func mapped(t *testing.T, entries ...string) []partition.MemberMapping {
	t.Helper()
	var out []partition.MemberMapping
	for _, e := range entries {
		name, parts, _ := strings.Cut(e, ":")
		mm := partition.MemberMapping{Member: name}
		if parts != "" {
			for _, p := range strings.Split(parts, ",") {
				var n int
				if _, err := fmt.Sscan(p, &n); err != nil {
					t.Fatalf("mapped(%q): %v", e, err)
				}
				mm.Partitions = append(mm.Partitions, n)
			}
		}
		out = append(out, mm)
	}
	return out
}

func TestConfigValidateStored(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  StaticConfig
		want []string
	}{
		{"balanced", StaticConfig{MaxMembers: 10, Members: []string{"m1", "m2"}}, nil},
		{"mapped", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,3", "m2:2,1")}, nil},
		// The reference tolerates these in a stored value, so must we.
		{"duplicate members", StaticConfig{MaxMembers: 2, Members: []string{"m1", "m1"}}, nil},
		{"more members than N", StaticConfig{MaxMembers: 1, Members: []string{"m1", "m2"}}, nil},
		{"no members", StaticConfig{MaxMembers: 1}, nil},
		// A literal to the server, though cg would not write it.
		{"wildcard inside a token", StaticConfig{MaxMembers: 1, Filters: []string{"a*.b"}}, nil},
		{"mapping with no partitions", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "m1:0,1", "m2:")}, nil},
		{"mapping with empty member", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, ":0,1")}, nil},

		{"zero partitions", StaticConfig{MaxMembers: 0, Members: []string{"m1"}}, []string{"max_members 0", "at least 1"}},
		{"negative partitions", StaticConfig{MaxMembers: -5}, []string{"max_members -5", "at least 1"}},
		{"both", StaticConfig{MaxMembers: 2, Members: []string{"m1"}, MemberMappings: mapped(t, "m1:0,1")}, []string{"members", "not both"}},
		{"too many entries", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "m1:0", "m2:1", "m3:1")}, []string{"member_mappings 3", "more mapping entries than partitions (2)"}},
		{"duplicate member", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,1", "m1:2,3")}, []string{"member mapping", `"m1"`, "more than one mapping"}},
		{"out of range", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,1,2", "m2:4")}, []string{"member mapping", `"m2" partition 4`, "out of range", "0 to 3"}},
		{"negative partition", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:-1,0,1,2,3")}, []string{`"m1" partition -1`, "out of range"}},
		{"mapped twice", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,1", "m2:1,2,3")}, []string{"member mapping", `"m2" partition 1`, `already mapped to "m1"`}},
		{"mapped twice, one member", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "m1:0,0,1")}, []string{`"m1" partition 0`, `already mapped to "m1"`}},
		{"gaps", StaticConfig{MaxMembers: 5, MemberMappings: mapped(t, "m1:0", "m2:3")}, []string{"member_mappings", "partitions 1,2,4 are not mapped", "0 to 4"}},
		// No member could create its consumer on these: the server would
		// answer 10052 (a bad subject) or 10138 (overlapping filters).
		{"bad filter", StaticConfig{MaxMembers: 1, Filters: []string{"a..b"}}, []string{"filter", `"a..b"`, "empty token"}},
		{"overlapping filters", StaticConfig{MaxMembers: 1, Filters: []string{"a.*", "a.b"}}, []string{"filter", `"a.b"`, "overlaps"}},
	} {
		wantValidation(t, "ValidateStored "+c.name, c.cfg.ValidateStored(), c.want)
		if c.want != nil {
			// Validate applies every stored rule too.
			wantValidation(t, "Validate "+c.name, c.cfg.Validate(), c.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  StaticConfig
		want []string
	}{
		{"balanced", StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"m1", "m2"}}, nil},
		{"as many members as partitions", StaticConfig{MaxMembers: 2, Members: []string{"m2", "m1"}}, nil},
		{"mapped", StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,3", "m2:2,1")}, nil},
		{"disjoint filters", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"a.>", "b.>", "c.*"}}, nil},
		// Overlapping without either containing the other: the server
		// accepts these in one consumer.
		{"crossing filters", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"a.*.c", "a.b.*"}}, nil},

		{"no members", StaticConfig{MaxMembers: 3}, []string{"members", "at least one member"}},
		{"bad member name", StaticConfig{MaxMembers: 3, Members: []string{"m1", "a.b"}}, []string{"member name", `"a.b"`}},
		{"empty member name", StaticConfig{MaxMembers: 3, Members: []string{""}}, []string{"member name", `""`}},
		{"spaced member name", StaticConfig{MaxMembers: 3, Members: []string{"m 1"}}, []string{"member name", `"m 1"`}},
		{"wildcard member name", StaticConfig{MaxMembers: 3, Members: []string{"m*"}}, []string{"member name", `"m*"`}},
		{"duplicate member", StaticConfig{MaxMembers: 3, Members: []string{"m1", "m2", "m1"}}, []string{"member", `"m1"`, "listed twice"}},
		{"more members than partitions", StaticConfig{MaxMembers: 2, Members: []string{"m1", "m2", "m3"}}, []string{"members 3", "more members than partitions", "max-members is 2"}},
		{"bad mapped member name", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "a b:0,1")}, []string{"member name", `"a b"`}},
		{"empty mapped member name", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, ":0,1")}, []string{"member name", `""`}},
		{"mapping with no partitions", StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "m1:0,1", "m2:")}, []string{"member mapping", `"m2"`, "lists no partitions"}},
		{"bad filter", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"a..b"}}, []string{"filter", `"a..b"`, "empty token"}},
		{"filter inside another", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"a.b", "a.>"}}, []string{"filter", `"a.b"`, `"a.>"`, "overlaps"}},
		{"duplicate filter", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"x.*", "x.*"}}, []string{"filter", `"x.*"`, "overlaps"}},
		{"everything and more", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{">", "a"}}, []string{"filter", `"a"`, `">"`, "overlaps"}},
		{"wildcard over literal", StaticConfig{MaxMembers: 1, Members: []string{"m"}, Filters: []string{"a.*", "a.b"}}, []string{"filter", `"a.b"`, `"a.*"`}},
	} {
		wantValidation(t, "Validate "+c.name, c.cfg.Validate(), c.want)
	}
}

func TestConfigSubjectSubset(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"a", "a", true},
		{"a.b", "a.*", true},
		{"a.*", "a.b", false},
		{"a.b.c", "a.>", true},
		{"a", "a.>", false},
		{"a.>", "a.>", true},
		{"a.>", "a.*", false},
		{"a.*", "a.>", true},
		{"a.*.c", "a.b.*", false},
		{"x", ">", true},
		{">", "x", false},
		{"a.b", "a.b.c", false},
		{"*", "*", true},
	} {
		if got := subjectSubset(c.a, c.b); got != c.want {
			t.Errorf("subjectSubset(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestConfigParseMapping(t *testing.T) {
	for _, c := range []struct {
		in         string
		member     string
		partitions []int
		want       []string // error substrings; nil: valid
	}{
		{"m1:0,1,2", "m1", []int{0, 1, 2}, nil},
		{"m1:0-2,7", "m1", []int{0, 1, 2, 7}, nil},
		{"m1:3-3", "m1", []int{3}, nil},
		{"m1:2,1", "m1", []int{2, 1}, nil},
		{"wörker:5", "wörker", []int{5}, nil},
		{"m1", "", nil, []string{"mapping", `"m1"`, "no ':'"}},
		{"a.b:1", "", nil, []string{"mapping", `"a.b:1"`, "bad member name", "'.'"}},
		{":1", "", nil, []string{"mapping", `":1"`, "bad member name", "must not be empty"}},
		{"m 1:1", "", nil, []string{"mapping", `"m 1:1"`, "bad member name", "white space"}},
		{"m1:", "", nil, []string{"mapping", `"m1:"`, "lists no partitions"}},
		{"m1:0,x", "", nil, []string{"mapping", `"m1:0,x"`, `partition "x"`}},
		{"m1:0,,1", "", nil, []string{"mapping", `"m1:0,,1"`, `partition ""`}},
		{"m1:-1", "", nil, []string{"mapping", `"m1:-1"`, `partition "-1"`}},
		{"m1:4-2", "", nil, []string{"mapping", `"m1:4-2"`, `partition "4-2"`}},
		{"m1:1-", "", nil, []string{"mapping", `"m1:1-"`, `partition "1-"`}},
		{"m1: 1", "", nil, []string{"mapping", `"m1: 1"`, `partition " 1"`}},
		{"m1:1:2", "", nil, []string{"mapping", `"m1:1:2"`, `partition "1:2"`}},
		{"m1:0-99999999999", "", nil, []string{"mapping", `"m1:0-99999999999"`, `range "0-99999999999"`, "spans more than"}},
	} {
		mm, err := ParseMapping(c.in)
		wantValidation(t, fmt.Sprintf("ParseMapping(%q)", c.in), err, c.want)
		if c.want == nil && (mm.Member != c.member || !slices.Equal(mm.Partitions, c.partitions)) {
			t.Errorf("ParseMapping(%q) = %+v, want %s %v", c.in, mm, c.member, c.partitions)
		}
	}
}

func FuzzConfigParseMapping(f *testing.F) {
	for _, s := range []string{"m1:0,1,2", "m1:0-4", "m:3-3,1", "m1", ":", "m1:", "a.b:1", "m1:-1", "m1:4-2", "m1:0,,1", "日本:7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		mm, err := ParseMapping(s)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), "mapping") {
				t.Fatalf("ParseMapping(%q): %v", s, err)
			}
			return
		}
		if ValidateName("member", mm.Member) != nil || len(mm.Partitions) == 0 {
			t.Fatalf("ParseMapping(%q) = %+v", s, mm)
		}
		back, err := ParseMapping(partition.FormatMappings([]partition.MemberMapping{mm}))
		if err != nil || back.Member != mm.Member || !slices.Equal(back.Partitions, mm.Partitions) {
			t.Fatalf("ParseMapping(%q) = %+v, round trip %+v, %v", s, mm, back, err)
		}
	})
}

func TestConfigFormatMappings(t *testing.T) {
	got := partition.FormatMappings(mapped(t, "m1:0,3", "m2:2,1"))
	if got != "m1:0,3 m2:2,1" {
		t.Errorf("FormatMappings = %q", got)
	}
}

func TestConfigMemberFilters(t *testing.T) {
	balanced := StaticConfig{MaxMembers: 4, Filters: []string{"a.>", "b.*"}, Members: []string{"m2", "m1"}}
	if got, want := balanced.MemberFilters("m1"), []string{"0.a.>", "1.a.>", "0.b.*", "1.b.*"}; !slices.Equal(got, want) {
		t.Errorf("balanced m1: %q, want %q", got, want)
	}
	// A mapped member's filters follow its mapping's order, as the
	// reference writes them.
	m := StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:3,0", "m2:2,1")}
	if got, want := m.MemberFilters("m1"), []string{"3.>", "0.>"}; !slices.Equal(got, want) {
		t.Errorf("mapped m1: %q, want %q", got, want)
	}
	if got := m.MemberFilters("nobody"); len(got) != 0 {
		t.Errorf("mapped stranger: %q", got)
	}
	mf := StaticConfig{MaxMembers: 2, Filters: []string{"x.*"}, MemberMappings: mapped(t, "m1:1,0")}
	if got, want := mf.MemberFilters("m1"), []string{"1.x.*", "0.x.*"}; !slices.Equal(got, want) {
		t.Errorf("mapped with filter: %q, want %q", got, want)
	}
}

func TestConfigMembership(t *testing.T) {
	b := StaticConfig{MaxMembers: 2, Members: []string{"m3", "m1", "m2", "m1"}}
	if got := b.MemberNames(); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("MemberNames = %q", got)
	}
	if !b.IsMember("m3") || b.IsMember("m4") {
		t.Errorf("IsMember on %v", b.Members)
	}
	m := StaticConfig{MaxMembers: 2, MemberMappings: mapped(t, "m2:1", "m1:0")}
	if got := m.MemberNames(); !slices.Equal(got, []string{"m2", "m1"}) {
		t.Errorf("mapped MemberNames = %q", got)
	}
	if !m.IsMember("m1") || m.IsMember("m3") {
		t.Errorf("mapped IsMember")
	}
	if !b.Equal(b) || b.Equal(m) {
		t.Errorf("Equal")
	}
	if d := b.Diff(m); len(d) != 2 {
		t.Errorf("Diff = %q", d)
	}
}

// specJSON encodes v without HTML escaping: the form the on-server
// contract writes.
func specJSON(t *testing.T, v any) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// The contract writes the stored value with a bare '>'. json.Marshal, which the
// reference uses to store it, escapes '>' (and '<', '&') as \u003e; both
// spellings decode to the same value in both implementations, so stored
// values must be compared decoded, never as bytes.
func TestConfigJSONExact(t *testing.T) {
	for _, c := range []struct {
		cfg  StaticConfig
		want string // the contract's form
	}{
		{StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"m1", "m2"}},
			`{"max_members":10,"filters":[">"],"members":["m1","m2"]}`},
		{StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,1", "m2:2,3")},
			`{"max_members":4,"member_mappings":[{"member":"m1","partitions":[0,1]},{"member":"m2","partitions":[2,3]}]}`},
		{StaticConfig{MaxMembers: 4, Filters: []string{"orders.*"}, MemberMappings: mapped(t, "m1:3,2,1,0")},
			`{"max_members":4,"filters":["orders.*"],"member_mappings":[{"member":"m1","partitions":[3,2,1,0]}]}`},
		// Empty fields are omitted, nil or not.
		{StaticConfig{MaxMembers: 3}, `{"max_members":3}`},
		{StaticConfig{MaxMembers: 3, Filters: []string{}, Members: []string{}, MemberMappings: []partition.MemberMapping{}}, `{"max_members":3}`},
	} {
		if got := specJSON(t, c.cfg); got != c.want {
			t.Errorf("%+v encodes as %s, want %s", c.cfg, got, c.want)
		}
		escaped := strings.ReplaceAll(c.want, ">", `\u003e`)
		if b, err := json.Marshal(c.cfg); err != nil || string(b) != escaped {
			t.Errorf("json.Marshal(%+v) = %s, %v; want %s", c.cfg, b, err, escaped)
		}
		for _, form := range []string{c.want, escaped} {
			var ours StaticConfig
			if err := json.Unmarshal([]byte(form), &ours); err != nil {
				t.Fatal(err)
			}
			if got := specJSON(t, ours); got != c.want {
				t.Errorf("%s read back as %s", form, got)
			}
			var ref pcgroups.StaticConsumerGroupConfig
			if err := json.Unmarshal([]byte(form), &ref); err != nil {
				t.Fatal(err)
			}
			if got := specJSON(t, ref); got != c.want {
				t.Errorf("reference read %s back as %s", form, got)
			}
			if b, _ := json.Marshal(ref); string(b) != escaped {
				t.Errorf("reference stores %s as %s, we store %s", form, b, escaped)
			}
		}
	}
	// The contract's example value (members and mappings together, which
	// ValidateStored refuses) still parses field by field.
	const spec = `{"max_members":10,"filters":[">"],"members":["m1","m2"],"member_mappings":[{"member":"m1","partitions":[0,1]}]}`
	var c StaticConfig
	if err := json.Unmarshal([]byte(spec), &c); err != nil {
		t.Fatal(err)
	}
	if got := specJSON(t, c); got != spec {
		t.Errorf("the contract's example re-encoded as %s", got)
	}
	if err := c.ValidateStored(); err == nil {
		t.Errorf("the contract's example with members and mappings validated")
	}
}

// Our stored value is the reference's, byte for byte, both ways.
func TestConfigJSONReference(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	var cfgs []StaticConfig
	cfgs = append(cfgs,
		StaticConfig{MaxMembers: 10, Filters: []string{">"}, Members: []string{"m1", "m2"}},
		StaticConfig{MaxMembers: 4, MemberMappings: mapped(t, "m1:0,1", "m2:2,3")},
		StaticConfig{MaxMembers: 1},
	)
	for i := 0; i < 300; i++ {
		c := StaticConfig{MaxMembers: 1 + r.IntN(1024)}
		for k := r.IntN(3); k > 0; k-- {
			c.Filters = append(c.Filters, partitiontest.Filter(r, r.IntN(3), partitiontest.Literal(r)))
		}
		if r.IntN(2) == 0 {
			c.Members = partitiontest.Members(r, 8)
		} else {
			for k := r.IntN(4); k > 0; k-- {
				mm := partition.MemberMapping{Member: partitiontest.Token(r)}
				for p := r.IntN(4); p > 0; p-- {
					mm.Partitions = append(mm.Partitions, r.IntN(c.MaxMembers))
				}
				c.MemberMappings = append(c.MemberMappings, mm)
			}
		}
		cfgs = append(cfgs, c)
	}
	for _, c := range cfgs {
		ours, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		var ref pcgroups.StaticConsumerGroupConfig
		if err := json.Unmarshal(ours, &ref); err != nil {
			t.Fatalf("reference cannot read %s: %v", ours, err)
		}
		if int(ref.MaxMembers) != c.MaxMembers || !slices.Equal(ref.Filters, c.Filters) || !slices.Equal(ref.Members, c.Members) || len(ref.MemberMappings) != len(c.MemberMappings) {
			t.Fatalf("reference read %s as %+v", ours, ref)
		}
		refBytes, err := json.Marshal(ref)
		if err != nil {
			t.Fatal(err)
		}
		if string(refBytes) != string(ours) {
			t.Fatalf("reference writes %s, we write %s", refBytes, ours)
		}
		var back StaticConfig
		if err := json.Unmarshal(refBytes, &back); err != nil {
			t.Fatal(err)
		}
		if again, _ := json.Marshal(back); string(again) != string(ours) {
			t.Fatalf("reference's %s read back as %s", refBytes, again)
		}
	}
	t.Logf("%d configurations round-trip through pcgroups.StaticConsumerGroupConfig byte for byte", len(cfgs))
}

// A member stopped by a changed static config names the new value first
// and what it was, not the create-time "(asked …)" wording reversed.
func TestChangedFromNamesNewThenOld(t *testing.T) {
	old := StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2"}}
	cur := StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2", "m3"}}
	got := strings.Join(changedFrom(old, cur), "; ")
	if got != "members [m1 m2 m3] (was [m1 m2])" {
		t.Fatalf("changedFrom = %q", got)
	}
}

// A cg member and a reference member of one group must put the same
// filters on their consumers, or they would share (or both skip) a
// partition: MemberFilters matches the reference library's own function
// for random balanced groups with filters and random mapped groups.
func TestMemberFiltersMatchReference(t *testing.T) {
	r := partitiontest.Rand(partitiontest.Seed(t))
	reference := func(cfg StaticConfig, member string) []string {
		var mms []pcgroups.MemberMapping
		for _, mm := range cfg.MemberMappings {
			mms = append(mms, pcgroups.MemberMapping{Member: mm.Member, Partitions: mm.Partitions})
		}
		filters := cfg.Filters
		if len(filters) == 0 {
			filters = []string{">"}
		}
		var out []string
		for _, f := range filters {
			out = append(out, pcgroups.GeneratePartitionFilters(cfg.Members, uint(cfg.MaxMembers), mms, member, f)...)
		}
		return out
	}
	for i := 0; i < 500; i++ {
		n := 1 + r.IntN(100)
		cfg := StaticConfig{MaxMembers: n}
		if i%2 == 0 {
			cfg.Members = partitiontest.Members(r, 1+r.IntN(20))
			if len(cfg.Members) == 0 {
				cfg.Members = []string{"m1"}
			}
			for k := r.IntN(3); k > 0; k-- {
				cfg.Filters = append(cfg.Filters, partitiontest.Filter(r, r.IntN(3), partitiontest.Literal(r)))
			}
		} else {
			m := 1 + r.IntN(n)
			for k := 0; k < m; k++ {
				cfg.MemberMappings = append(cfg.MemberMappings, partition.MemberMapping{Member: fmt.Sprintf("m%d", k)})
			}
			for _, p := range r.Perm(n) {
				k := r.IntN(m)
				if p < m {
					k = p // every entry gets at least one partition
				}
				cfg.MemberMappings[k].Partitions = append(cfg.MemberMappings[k].Partitions, p)
			}
			if err := cfg.Validate(); err != nil {
				t.Fatalf("%+v: %v", cfg, err)
			}
		}
		for _, m := range append(cfg.MemberNames(), "stranger") {
			if got, want := cfg.MemberFilters(m), reference(cfg, m); !slices.Equal(got, want) {
				t.Fatalf("%+v member %q: MemberFilters = %q, reference %q", cfg, m, got, want)
			}
		}
	}
}
