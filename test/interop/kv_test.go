package interop_test

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
)

func (e *env) storedBytes(bucket, key string) []byte {
	e.t.Helper()
	ctx := ctxT(e.t, 5*time.Second)
	kv, err := e.js.KeyValue(ctx, bucket)
	if err != nil {
		e.t.Fatal(err)
	}
	en, err := kv.Get(ctx, key)
	if err != nil {
		e.t.Fatalf("%s %s: %v", bucket, key, err)
	}
	return en.Value()
}

// roundTrip decodes raw into a fresh *T and re-encodes it: the bytes must
// come back unchanged, so neither side loses or renames a field.
func roundTrip[T any](t *testing.T, who string, raw []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s cannot decode %s: %v", who, raw, err)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(raw) {
		t.Errorf("%s re-encodes\n  %s\nas\n  %s", who, raw, again)
	}
	return v
}

// Static values written by either side decode identically with the
// other's types, byte for byte.
func TestStoredStaticJSONBothWays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.staticStream(6)
	ctx := ctxT(t, 20*time.Second)
	c := cg.New(e.js)
	ours := map[string]cg.StaticConfig{
		"cgbal":    {MaxMembers: 6, Members: []string{"m2", "m1"}},
		"cgfilter": {MaxMembers: 6, Filters: []string{"orders.*"}, Members: []string{"a", "b", "c"}},
		"cgmap":    {MaxMembers: 6, MemberMappings: []partition.MemberMapping{{Member: "x", Partitions: []int{5, 0}}, {Member: "y", Partitions: []int{1, 2, 3, 4}}}},
	}
	for g, cfg := range ours {
		if _, err := c.CreateStatic(ctx, streamName, g, cfg); err != nil {
			t.Fatal(err)
		}
		raw := e.storedBytes(cg.StaticBucket, cg.Key(streamName, g))
		ref := roundTrip[pcgroups.StaticConsumerGroupConfig](t, "reference", raw)
		if !sameStatic(&ref, cfg) {
			t.Errorf("%s: reference decodes %s as %+v", g, raw, ref)
		}
		got, err := pcgroups.GetStaticConsumerGroupConfig(ctx, e.js, streamName, g)
		if err != nil || !sameStatic(got, cfg) {
			t.Errorf("%s: GetStaticConsumerGroupConfig = %+v, %v", g, got, err)
		}
	}
	theirs := map[string]pcgroups.StaticConsumerGroupConfig{
		"refbal":    {MaxMembers: 6, Members: []string{"m2", "m1", "m2"}},
		"reffilter": {MaxMembers: 6, Filters: []string{"orders.*"}, Members: []string{"a"}},
		"refmap":    {MaxMembers: 6, MemberMappings: []pcgroups.MemberMapping{{Member: "x", Partitions: []int{5, 0}}, {Member: "y", Partitions: []int{4, 3, 2, 1}}}},
	}
	for g, rc := range theirs {
		if _, err := pcgroups.CreateStatic(ctx, e.js, streamName, g, rc.MaxMembers, rc.Filters, rc.Members, rc.MemberMappings); err != nil {
			t.Fatal(err)
		}
		raw := e.storedBytes(cg.StaticBucket, cg.Key(streamName, g))
		got := roundTrip[cg.StaticConfig](t, "cg", raw)
		if !sameStatic(&rc, got) {
			t.Errorf("%s: cg decodes %s as %+v", g, raw, got)
		}
		read, err := c.StaticConfig(ctx, streamName, g)
		if err != nil || !sameStatic(&rc, read) {
			t.Errorf("%s: cg StaticConfig = %+v, %v", g, read, err)
		}
	}
	// Both list every group of the stream.
	refNames, err := pcgroups.ListStaticConsumerGroups(ctx, e.js, streamName)
	if err != nil {
		t.Fatal(err)
	}
	ourNames, err := c.List(ctx, cg.KindStatic, streamName)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(refNames)
	if !slices.Equal(refNames, ourNames) || len(ourNames) != 6 {
		t.Errorf("reference lists %v, cg lists %v", refNames, ourNames)
	}
}

func sameElastic(ref *pcgroups.ElasticConsumerGroupConfig, c cg.ElasticConfig) bool {
	if int(ref.MaxMembers) != c.MaxMembers || ref.MaxBufferedMsgs != c.MaxBufferedMsgs || ref.MaxBufferedBytes != c.MaxBufferedBytes ||
		!slices.Equal(ref.Members, c.Members) || !reflect.DeepEqual(fromRef(ref.MemberMappings), c.MemberMappings) ||
		len(ref.PartitioningFilters) != len(c.PartitioningFilters) {
		return false
	}
	for i, pf := range ref.PartitioningFilters {
		if pf.Filter != c.PartitioningFilters[i].Filter || !slices.Equal(pf.PartitioningWildcards, c.PartitioningFilters[i].PartitioningWildcards) {
			return false
		}
	}
	return true
}

func refFilters(pfs []cg.PartitioningFilter) []pcgroups.PartitioningFilter {
	var out []pcgroups.PartitioningFilter
	for _, pf := range pfs {
		out = append(out, pcgroups.PartitioningFilter{Filter: pf.Filter, PartitioningWildcards: slices.Clone(pf.PartitioningWildcards)})
	}
	return out
}

// Elastic values, including max_buffered_msg (singular) and the member
// changes, decode identically both ways; the two implementations also
// build the same work-queue stream.
func TestStoredElasticJSONBothWays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	if _, err := e.js.CreateStream(ctxT(t, 5*time.Second), jetstream.StreamConfig{Name: "MULTI", Subjects: []string{"a.*.*", "b.>"}}); err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t, 20*time.Second)
	c := cg.New(e.js)
	pf := func(s string) cg.PartitioningFilter {
		p, err := cg.ParsePartitioningFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	type shape struct {
		stream  string
		filters []cg.PartitioningFilter
		msgs    int64
		bytes   int64
	}
	shapes := map[string]shape{
		"one":     {streamName, []cg.PartitioningFilter{pf("orders.*:1")}, 0, 0},
		"capped":  {streamName, []cg.PartitioningFilter{pf("orders.*:1")}, 1000, 1 << 20},
		"multi":   {"MULTI", []cg.PartitioningFilter{pf("a.*.*:2,1"), pf("b.>")}, 7, 0},
		"nofilts": {streamName, nil, 0, 0},
	}
	for g, sh := range shapes {
		cfg := cg.ElasticConfig{MaxMembers: 6, PartitioningFilters: sh.filters, MaxBufferedMsgs: sh.msgs, MaxBufferedBytes: sh.bytes}
		// The same group twice: "cg-<g>" by cg, "ref-<g>" by the reference.
		if _, err := c.CreateElastic(ctx, sh.stream, "cg-"+g, cfg); err != nil {
			t.Fatalf("cg create %s: %v", g, err)
		}
		if _, err := pcgroups.CreateElastic(ctx, e.js, sh.stream, "ref-"+g, 6, refFilters(sh.filters), sh.msgs, sh.bytes); err != nil {
			t.Fatalf("reference create %s: %v", g, err)
		}
		ourRaw := e.storedBytes(cg.ElasticBucket, cg.Key(sh.stream, "cg-"+g))
		refRaw := e.storedBytes(cg.ElasticBucket, cg.Key(sh.stream, "ref-"+g))
		if string(ourRaw) != string(refRaw) {
			t.Errorf("%s: cg stores %s, the reference %s", g, ourRaw, refRaw)
		}
		if sh.msgs != 0 && !strings.Contains(string(ourRaw), `"max_buffered_msg":`) {
			t.Errorf("%s: %s lacks max_buffered_msg", g, ourRaw)
		}
		ref := roundTrip[pcgroups.ElasticConsumerGroupConfig](t, "reference", ourRaw)
		if !sameElastic(&ref, cfg) {
			t.Errorf("%s: reference decodes %s as %+v", g, ourRaw, ref)
		}
		ours := roundTrip[cg.ElasticConfig](t, "cg", refRaw)
		if !sameElastic(&ref, ours) {
			t.Errorf("%s: cg decodes %s as %+v", g, refRaw, ours)
		}

		// The work-queue streams are built alike.
		ws := func(name string) jetstream.StreamConfig {
			s, err := e.js.Stream(ctx, cg.WorkStreamName(sh.stream, name))
			if err != nil {
				t.Fatalf("work stream of %s: %v", name, err)
			}
			sc := s.CachedInfo().Config
			sc.Name = ""
			// cg's ownership marks are additive: the rest must be alike.
			if sc.Metadata["cg.group"] != "cg-"+g && sc.Metadata["cg.group"] != "" {
				t.Errorf("work stream of %s marked for %q", name, sc.Metadata["cg.group"])
			}
			for _, k := range []string{cg.MarkKind, cg.MarkStream, cg.MarkGroup} {
				delete(sc.Metadata, k)
			}
			return sc
		}
		a, b := ws("cg-"+g), ws("ref-"+g)
		if !reflect.DeepEqual(a, b) {
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			t.Errorf("%s: work streams differ:\n cg  %s\n ref %s", g, ja, jb)
		}
	}

	// Membership written by each side, read back by the other.
	key := cg.Key(streamName, "cg-one")
	if _, err := c.AddMembers(ctx, streamName, "cg-one", []string{"m2", "m1", "m3"}); err != nil {
		t.Fatal(err)
	}
	raw := e.storedBytes(cg.ElasticBucket, key)
	ref := roundTrip[pcgroups.ElasticConsumerGroupConfig](t, "reference", raw)
	if !slices.Equal(sortedCopy(ref.Members), []string{"m1", "m2", "m3"}) {
		t.Errorf("reference reads members %v from %s", ref.Members, raw)
	}
	if _, err := pcgroups.AddMembers(ctx, e.js, streamName, "cg-one", []string{"m4"}); err != nil {
		t.Fatalf("reference add on cg's group: %v", err)
	}
	read, err := c.ElasticConfig(ctx, streamName, "cg-one")
	if err != nil || !slices.Equal(sortedCopy(read.Members), []string{"m1", "m2", "m3", "m4"}) {
		t.Errorf("cg reads %+v, %v after the reference's add", read, err)
	}
	roundTrip[cg.ElasticConfig](t, "cg", e.storedBytes(cg.ElasticBucket, key))
	mms := []partition.MemberMapping{{Member: "x", Partitions: []int{3, 0, 1}}, {Member: "y", Partitions: []int{2, 4, 5}}}
	if _, err := c.SetMappings(ctx, streamName, "cg-one", mms); err != nil {
		t.Fatal(err)
	}
	raw = e.storedBytes(cg.ElasticBucket, key)
	ref = roundTrip[pcgroups.ElasticConsumerGroupConfig](t, "reference", raw)
	if len(ref.Members) != 0 || !reflect.DeepEqual(fromRef(ref.MemberMappings), mms) {
		t.Errorf("reference reads %+v from %s", ref, raw)
	}
	if err := pcgroups.SetMemberMappings(ctx, e.js, streamName, "cg-one", toRef(mms[:1:1])); err == nil {
		t.Errorf("reference accepted a mapping leaving partitions unmapped")
	}
	if err := pcgroups.DeleteMemberMappings(ctx, e.js, streamName, "cg-one"); err != nil {
		t.Fatal(err)
	}
	raw = e.storedBytes(cg.ElasticBucket, key)
	ours := roundTrip[cg.ElasticConfig](t, "cg", raw)
	if len(ours.MemberMappings) != 0 || len(ours.Members) != 0 {
		t.Errorf("cg reads %+v from the reference's delete-mapping %s", ours, raw)
	}
	if _, err := c.ElasticConfig(ctx, streamName, "cg-one"); err != nil {
		t.Errorf("cg cannot read the memberless group the reference left: %v", err)
	}
	refNames, _ := pcgroups.ListElasticConsumerGroups(ctx, e.js, streamName)
	ourNames, _ := c.List(ctx, cg.KindElastic, streamName)
	slices.Sort(refNames)
	if !slices.Equal(refNames, ourNames) || len(ourNames) != 6 {
		t.Errorf("reference lists %v, cg lists %v", refNames, ourNames)
	}
}
