package cg

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestIntersectPattern(t *testing.T) {
	for _, tc := range []struct{ a, b, want string }{
		{"a.b", "a.b", "a.b"},
		{"a.*", "a.b", "a.b"},
		{"*.b", "a.*", "a.b"},
		{"a.>", "a.b.c", "a.b.c"},
		{"a.>", "*.*.c", "a.*.c"},
		{">", "orders.*", "orders.*"},
		{"a.*.>", "a.>", "a.*.>"},
		{"*.>", "a.>", "a.>"},
		{">", ">", ">"},
		{"*", "*", "*"},
		{"a.b", "a.c", ""},
		{"a.>", "a", ""},
		{"a", "a.>", ""},
		{"*", "a.b", ""},
		{"a.*.>", "*.b", ""},
		{"*.orders.*", "orders.*", ""},
		{"orders.*", "payments.*", ""},
	} {
		got, ok := intersectPattern(tc.a, tc.b)
		if tc.want == "" && ok || tc.want != "" && (!ok || got != tc.want) {
			t.Errorf("intersect(%q, %q) = %q %v, want %q", tc.a, tc.b, got, ok, tc.want)
		}
		if got2, ok2 := intersectPattern(tc.b, tc.a); ok2 != ok || got2 != got {
			t.Errorf("intersect(%q, %q) = %q %v, not symmetric with %q %v", tc.b, tc.a, got2, ok2, got, ok)
		}
	}
}

// randomPattern draws a small pattern over a tiny alphabet so that
// collisions, near misses and '>' at every length all come up.
func randomPattern(r *rand.Rand, wild bool) string {
	n := 1 + r.IntN(4)
	toks := make([]string, n)
	for i := range toks {
		switch x := r.IntN(6); {
		case wild && x == 0:
			toks[i] = "*"
		case wild && x == 1 && i == n-1:
			toks[i] = ">"
		default:
			toks[i] = string(rune('a' + r.IntN(2)))
		}
	}
	return strings.Join(toks, ".")
}

// The server's own SubjectsCollide is the ground truth for whether two
// patterns intersect, and its SubjectMatchesFilter for what the
// intersection matches.
func TestIntersectPatternAgreesWithServer(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < 20000; i++ {
		a, b := randomPattern(r, true), randomPattern(r, true)
		in, ok := intersectPattern(a, b)
		if want := server.SubjectsCollide(a, b); ok != want {
			t.Fatalf("intersect(%q, %q): %v, server says %v", a, b, ok, want)
		}
		for j := 0; j < 20; j++ {
			s := randomPattern(r, false)
			both := server.SubjectMatchesFilter(s, a) && server.SubjectMatchesFilter(s, b)
			if got := ok && server.SubjectMatchesFilter(s, in); got != both {
				t.Fatalf("subject %q: matches intersect(%q, %q) = %q: %v, matches both: %v", s, a, b, in, got, both)
			}
		}
	}
}

// A real server refuses a stream whose subjects overlap another stream's:
// the same question asked of the server itself, for a few pairs. Memory
// storage: the overlap check is the same, and with file storage, deleting
// an account's last stream removes its streams directory in the
// background, so the next create here failed now and then (nats-server
// 2.15.2: "could not create storage directory", 10077 inside 10049).
func TestPatternsIntersectLikeServerStreams(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	for i, p := range [][2]string{
		{"x.a", "x.*"}, {"x.a.>", "x.*.b"}, {"x.a", "x.b"}, {"x.*", "x.a.b"}, {"x.*.>", "x.a"},
		{"x.>", "x.a.b.c"}, {"x.*.c", "x.b.*"}, {"x.*.c", "x.b.d"}, {"y.>", "x.>"}, {"x.a.*", "x.>"},
	} {
		a, b := p[0], p[1]
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("A%d", i), Subjects: []string{a}, Storage: jetstream.MemoryStorage}); err != nil {
			t.Fatal(err)
		}
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprintf("B%d", i), Subjects: []string{b}, Storage: jetstream.MemoryStorage})
		if serverSays := err != nil; serverSays != patternsIntersect(a, b) {
			t.Errorf("%q and %q: server refuses the second stream: %v (%v), patternsIntersect %v", a, b, serverSays, err, patternsIntersect(a, b))
		}
		_ = js.DeleteStream(ctx, fmt.Sprintf("A%d", i))
		_ = js.DeleteStream(ctx, fmt.Sprintf("B%d", i))
	}
}

func streamInfoOf(subjects []string, src, dest string) *jetstream.StreamInfo {
	si := &jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S", Subjects: subjects}}
	if dest != "" {
		si.Config.SubjectTransform = &jetstream.SubjectTransformConfig{Source: src, Destination: dest}
	}
	return si
}

func TestStoredSubjectsAndDefaultFilters(t *testing.T) {
	for _, tc := range []struct {
		name          string
		subjects      []string
		src, dest     string
		describe      string
		defaults      string // "" : an error
		matches, none []string
	}{
		{"plain", []string{"orders.*"}, "", "", "orders.*", "orders.*:1", []string{"orders.*", "orders.alice", ">"}, []string{"1.orders.*", "orders.a.b"}},
		{"seed ORDERS", []string{"orders.*"}, "orders.*", "{{partition(10,1)}}.orders.{{wildcard(1)}}", "<p>.orders.*", "*.orders.*:2",
			[]string{"*.orders.*", "3.orders.alice", "9.>", ">", "*.*.*"}, []string{"orders.*", "orders.>", "10.orders.*", "03.orders.*", "x.orders.*"}},
		{"two wildcards swapped", []string{"ev.*.*"}, "ev.*.*", "{{Partition(4,2,1)}}.x.{{wildcard(2)}}.{{wildcard(1)}}", "<p>.x.*.*", "*.x.*.*:2,3",
			[]string{"*.x.*.*"}, []string{"ev.*.*", "*.ev.*.*"}},
		{"partial cover", []string{"orders.*", "payments.*"}, "orders.*", "{{partition(10,1)}}.orders.{{wildcard(1)}}", "<p>.orders.* payments.*", "*.orders.*:2 payments.*:1",
			[]string{"payments.x", "*.orders.*"}, []string{"orders.*"}},
		{"everything, part covered", []string{">"}, "orders.*", "{{partition(10,1)}}.orders.{{wildcard(1)}}", "<p>.orders.* >", "",
			[]string{"orders.a.b", "payments.x", "1.orders.a"}, []string{"orders.a"}},
		{"empty source", []string{"a.*"}, "", "{{partition(3)}}.>", "", "", nil, nil},
		{"literal in a wildcard", []string{"orders.eu"}, "orders.*", "{{partition(10,1)}}.orders.{{wildcard(1)}}", "<p>.orders.eu", "*.orders.eu:1",
			[]string{"*.orders.eu"}, []string{"*.orders.us"}},
		{"tail passes through", []string{"o.>"}, "o.>", "{{partition(5)}}.o.>", "<p>.o.>", "*.o.>",
			[]string{"2.o.a.b"}, []string{"o.a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si := streamInfoOf(tc.subjects, tc.src, tc.dest)
			sp := storedSubjects(si)
			if tc.describe != "" && sp.describe() != tc.describe {
				t.Errorf("stored %q, want %q", sp.describe(), tc.describe)
			}
			pfs, err := DefaultElasticFilters(si)
			got := strings.Join(filterStrings(pfs), " ")
			switch {
			case tc.name == "empty source":
				// Source "" is '>' to the server, but '>' -> {{partition(3)}}.>
				// still needs a subject to test; only that it is read.
				if err != nil || sp.source != ">" {
					t.Errorf("empty source: %v %q", err, sp.source)
				}
			case tc.defaults == "" && err == nil:
				t.Errorf("defaults %q, want an error", got)
			case tc.defaults != "" && (err != nil || got != tc.defaults):
				t.Errorf("defaults %q (%v), want %q", got, err, tc.defaults)
			}
			for _, f := range tc.matches {
				if !sp.matches(f) {
					t.Errorf("%q should match what %s stores", f, sp.describe())
				}
			}
			for _, f := range tc.none {
				if sp.matches(f) {
					t.Errorf("%q should match nothing %s stores", f, sp.describe())
				}
			}
		})
	}
	if sp := storedSubjects(&jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "M", Sources: []*jetstream.StreamSource{{Name: "O"}}}}); sp.known || !sp.matches("anything") {
		t.Errorf("a sourcing stream's stored subjects cannot be told: %+v", sp)
	}
}

// The stored space must hold what the server really stores: publish
// subjects through real transforms and look at the stored subjects.
func TestStoredSubjectsAgainstServer(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, tc := range []struct {
		subjects  []string
		src, dest string
		publish   []string
	}{
		{[]string{"orders.*"}, "orders.*", "{{partition(10,1)}}.orders.{{wildcard(1)}}", []string{"orders.alice", "orders.bob"}},
		{[]string{"ev.*.*"}, "ev.*.*", "{{Partition(4,2,1)}}.x.{{wildcard(2)}}.{{wildcard(1)}}", []string{"ev.a.b", "ev.c.d"}},
		{[]string{"orders.*", "payments.*"}, "orders.*", "{{partition(3,1)}}.orders.{{wildcard(1)}}", []string{"orders.a", "payments.b"}},
		{[]string{"q.>"}, "q.*", "{{partition(3,1)}}.q.{{wildcard(1)}}", []string{"q.a", "q.a.b"}},
		{[]string{"o.>"}, "o.>", "{{partition(5)}}.o.>", []string{"o.a", "o.a.b.c"}},
		{[]string{"r.*"}, "r.*", "renamed.{{wildcard(1)}}", []string{"r.a"}},
		{[]string{"s.*.*"}, "s.*.*", "{{partition(3,2)}}.s.{{split(1,-)}}", []string{"s.a-b.c"}},
	} {
		name := fmt.Sprintf("T%d", i)
		// Memory streams: nats-server 2.15.2 removes an account's streams
		// directory in the background when its last file stream is deleted,
		// racing the next create (10049 "error creating store").
		cfg := jetstream.StreamConfig{Name: name, Storage: jetstream.MemoryStorage, Subjects: tc.subjects, SubjectTransform: &jetstream.SubjectTransformConfig{Source: tc.src, Destination: tc.dest}}
		st, err := js.CreateStream(ctx, cfg)
		if err != nil {
			t.Fatalf("%v: %v", tc.dest, err)
		}
		for _, subj := range tc.publish {
			if _, err := js.Publish(ctx, subj, nil); err != nil {
				t.Fatal(err)
			}
		}
		sp := storedSubjects(st.CachedInfo())
		for seq := uint64(1); seq <= uint64(len(tc.publish)); seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range sp.parts {
				if server.SubjectMatchesFilter(m.Subject, p.Pattern) && sp.selects(m.Subject, p) {
					found = true
					if _, part := partition.StripPartition(m.Subject); p.Stamped != (part >= 0) {
						t.Errorf("%s: stored %q falls in piece %+v, stamped wrong", name, m.Subject, p)
					}
				}
			}
			if !found {
				t.Errorf("%s: stored subject %q is in none of %s", name, m.Subject, sp.describe())
			}
		}
		_ = js.DeleteStream(ctx, name)
	}
}

func TestStoredFormOfAFilter(t *testing.T) {
	sp := storedSubjects(streamInfoOf([]string{"ev.*.*"}, "ev.*.*", "{{partition(4,1,2)}}.ev.{{wildcard(2)}}.{{wildcard(1)}}"))
	for in, want := range map[string]string{"ev.*.*:1": "*.ev.*.*:3", "ev.*.*:2,1": "*.ev.*.*:2,3", "ev.a.*": "*.ev.*.a:2"} {
		pf, err := ParsePartitioningFilter(in)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := sp.storedForm(pf)
		if !ok || got.String() != want {
			t.Errorf("stored form of %s = %s %v, want %s", in, got.String(), ok, want)
		}
	}
}

func TestValidateStoredFilters(t *testing.T) {
	for _, tc := range []struct {
		cfg  health.GroupConfig
		want string // "" : valid
	}{
		{StaticConfig{MaxMembers: 2, Filters: []string{"a b"}, Members: []string{"m"}}, "white space"},
		{StaticConfig{MaxMembers: 2, Filters: []string{"a..b"}, Members: []string{"m"}}, "empty token"},
		{StaticConfig{MaxMembers: 2, Filters: []string{">.a"}, Members: []string{"m"}}, "'>' may only be the last token"},
		{StaticConfig{MaxMembers: 2, Filters: []string{"a.*", "a.>"}, Members: []string{"m"}}, "overlaps"},
		{StaticConfig{MaxMembers: 2, Filters: []string{"orders.a*"}, Members: []string{"m"}}, ""}, // a literal to the server
		{ElasticConfig{MaxMembers: 2, PartitioningFilters: []PartitioningFilter{{Filter: "a.*", PartitioningWildcards: []int{1}}, {Filter: "a.>"}}}, "overlap"},
		{ElasticConfig{MaxMembers: 2, PartitioningFilters: []PartitioningFilter{{Filter: "a .*", PartitioningWildcards: []int{1}}}}, "white space"},
		{ElasticConfig{MaxMembers: 2}, ""},
	} {
		var err error
		switch c := tc.cfg.(type) {
		case StaticConfig:
			err = c.ValidateStored()
		case ElasticConfig:
			err = c.ValidateStored()
		}
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

// preflightEnv: a server with the seed's ORDERS (partition-stamped), a
// stream MIXED whose transform covers only shop.*, not payments.*, and a
// plain one.
func preflightEnv(t *testing.T) (*Client, jetstream.JetStream, context.Context) {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	for _, cfg := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}},
		{Name: "MIXED", Subjects: []string{"shop.*", "payments.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{Source: "shop.*", Destination: "{{partition(4,1)}}.shop.{{wildcard(1)}}"}},
		{Name: "PLAIN", Subjects: []string{"plain.*"}},
	} {
		if _, err := js.CreateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return New(js), js, ctx
}

func kvHas(t *testing.T, js jetstream.JetStream, bucket, key string) bool {
	t.Helper()
	kv, err := js.KeyValue(context.Background(), bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	_, err = kv.Get(context.Background(), key)
	return err == nil
}

func noCritical(t *testing.T, c *Client, ctx context.Context, stream, group string) {
	t.Helper()
	rep, err := c.Check(ctx, CheckScope{Stream: stream, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rep.Findings {
		if f.Severity == health.SeverityCritical {
			t.Errorf("create accepted %s/%s, but check calls it critical: %s: %s", stream, group, f.Code, f.Message)
		}
	}
}

func TestCreateRefusesWhatConsumesNothing(t *testing.T) {
	c, js, ctx := preflightEnv(t)
	pf := func(s string) PartitioningFilter {
		p, err := ParsePartitioningFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		stream, group string
		static        *StaticConfig
		elastic       *ElasticConfig
		want          error
		words         string
	}{
		{"ORDERS", "e1", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{pf("orders.*:1")}}, ErrNoMatchingSubjects, "give the stored form '*.orders.*:2'"},
		{"PLAIN", "e2", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{pf("nothere.*")}}, ErrNoMatchingSubjects, `"nothere.*" matches none of the subjects stream PLAIN stores (plain.*)`},
		{"ORDERS", "e3", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{pf("9.orders.*")}}, ErrNoMatchingSubjects, "<p>.orders.*"},
		{"ORDERS", "s1", &StaticConfig{MaxMembers: 4, Filters: []string{"payments.*"}, Members: []string{"m1"}}, nil, ErrNoMatchingSubjects, `filter "payments.*" matches none of the subjects stream ORDERS stores after the partition token`},
		{"ORDERS", "s2", &StaticConfig{MaxMembers: 4, Filters: []string{"orders.*.*"}, Members: []string{"m1"}}, nil, ErrNoMatchingSubjects, "such as 'orders.*'"},
		{"MIXED", "s3", &StaticConfig{MaxMembers: 4, Members: []string{"m1"}}, nil, ErrStreamNotReady, "stores payments.* without a partition token"},
		{"MIXED", "s4", &StaticConfig{MaxMembers: 4, Filters: []string{"payments.*"}, Members: []string{"m1"}}, nil, ErrNoMatchingSubjects, "matches none"},
		{"MIXED", "s5", &StaticConfig{MaxMembers: 4, Filters: []string{"*.x"}, Members: []string{"m1"}}, nil, ErrStreamNotReady, "such as 'shop.*'"},
	} {
		var err error
		bucket := StaticBucket
		if tc.static != nil {
			_, err = c.CreateStatic(ctx, tc.stream, tc.group, *tc.static)
		} else {
			bucket = ElasticBucket
			_, err = c.CreateElastic(ctx, tc.stream, tc.group, *tc.elastic)
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s/%s: got %v, want %v saying %q on one line", tc.stream, tc.group, err, tc.want, tc.words)
			continue
		}
		if kvHas(t, js, bucket, Key(tc.stream, tc.group)) {
			t.Errorf("%s/%s: refused, but the group was stored", tc.stream, tc.group)
		}
		if _, err := js.Stream(ctx, WorkStreamName(tc.stream, tc.group)); !errors.Is(err, jetstream.ErrStreamNotFound) {
			t.Errorf("%s/%s: refused, but a work stream exists (%v)", tc.stream, tc.group, err)
		}
	}
}

// Whatever create accepts, check must not call critical.
func TestAcceptedCreatesCheckWithoutCritical(t *testing.T) {
	c, js, ctx := preflightEnv(t)
	pf := func(s string) PartitioningFilter {
		p, err := ParsePartitioningFilter(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	ordersInfo, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	derived, err := DefaultElasticFilters(ordersInfo.CachedInfo())
	if err != nil {
		t.Fatal(err)
	}
	mixedInfo, _ := js.Stream(ctx, "MIXED")
	mixedDerived, err := DefaultElasticFilters(mixedInfo.CachedInfo())
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		stream  string
		static  *StaticConfig
		elastic *ElasticConfig
	}{
		{"ORDERS", &StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2"}}, nil},
		{"ORDERS", &StaticConfig{MaxMembers: 4, Filters: []string{">"}, Members: []string{"m1"}}, nil},
		{"ORDERS", &StaticConfig{MaxMembers: 4, Filters: []string{"orders.alice"}, Members: []string{"m1"}}, nil},
		{"MIXED", &StaticConfig{MaxMembers: 4, Filters: []string{"shop.*"}, Members: []string{"m1"}}, nil},
		{"ORDERS", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: derived}},
		{"ORDERS", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{pf("*.orders.*:2")}}},
		{"ORDERS", nil, &ElasticConfig{MaxMembers: 4}},
		{"MIXED", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: mixedDerived}},
		{"PLAIN", nil, &ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{pf("plain.*:1")}}},
	} {
		group := fmt.Sprintf("g%d", i)
		if tc.static != nil {
			_, err = c.CreateStatic(ctx, tc.stream, group, *tc.static)
		} else {
			_, err = c.CreateElastic(ctx, tc.stream, group, *tc.elastic)
		}
		if err != nil {
			t.Errorf("%s/%s: create refused: %v", tc.stream, group, err)
			continue
		}
		noCritical(t, c, ctx, tc.stream, group)
	}
}

// Without filters, an elastic group over the seed's ORDERS takes in every
// message and a member receives them.
func TestDerivedElasticFiltersDeliver(t *testing.T) {
	c, js, ctx := preflightEnv(t)
	s, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	pfs, err := DefaultElasticFilters(s.CachedInfo())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "ORDERS", "g", ElasticConfig{MaxMembers: 3, PartitioningFilters: pfs, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	var got atomic.Int64
	m, err := c.JoinElastic(ctx, "ORDERS", "g", "m1", func(ctx context.Context, msg *Msg) {
		// The work stream holds the stored subject: the origin's
		// partition token first, then orders.<key>.
		if _, p := partition.StripPartition(msg.Subject()); p >= 0 && p < 4 && msg.DoubleAck(ctx) == nil {
			got.Add(1)
		}
	}, JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	const n = 40
	for i := 0; i < n; i++ {
		if _, err := js.Publish(ctx, fmt.Sprintf("orders.c%d", i%7), nil); err != nil {
			t.Fatal(err)
		}
	}
	natstest.Eventually(t, 10*time.Second, fmt.Sprintf("%d messages handled", n), func() bool { return got.Load() == n })
}

// A group stored by someone else (the reference, say) that cg's create
// would refuse: consume refuses it too, and check calls it critical.
func TestJoinRefusesStoredGroupsThatMissMessages(t *testing.T) {
	c, js, ctx := preflightEnv(t)
	put := func(bucket, key, value string) {
		t.Helper()
		kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
			t.Fatal(err)
		}
	}
	h := func(context.Context, *Msg) {}
	for _, tc := range []struct {
		kind, stream, group, value string
		want                       error
		words, code                string
	}{
		{"static", "ORDERS", "n6", `{"max_members":6,"members":["m1"]}`, ErrStreamNotReady, "partitions into 4 ({{partition(4,...)}}) but the group has max_members 6", health.CodeStreamPartitionsMismatch},
		{"static", "MIXED", "all", `{"max_members":4,"filters":[">"],"members":["m1"]}`, ErrStreamNotReady, "stores payments.* without a partition token", health.CodeStreamSubjectsUnstamped},
		{"static", "ORDERS", "pay", `{"max_members":4,"filters":["payments.*"],"members":["m1"]}`, ErrNoMatchingSubjects, "matches none", health.CodeStreamFilterMismatch},
		{"static", "ORDERS", "bad", `{"max_members":4,"filters":["orders. x"],"members":["m1"]}`, ErrInvalidConfig, "key ORDERS.bad in bucket static-consumer-groups: filter \"orders. x\": must not contain white space", health.CodeConfigInvalid},
		{"static", "ORDERS", "ovl", `{"max_members":4,"filters":["orders.*","orders.>"],"members":["m1"]}`, ErrInvalidConfig, "key ORDERS.ovl", health.CodeConfigInvalid},
		{"elastic", "ORDERS", "ref", `{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}],"members":["m1"]}`, ErrNoMatchingSubjects, "'*.orders.*:2'", health.CodeStreamFilterMismatch},
		{"elastic", "PLAIN", "bad", `{"max_members":4,"partitioning_filters":[{"filter":"plain..*","partitioning_wildcards":[1]}],"members":["m1"]}`, ErrInvalidConfig, "key PLAIN.bad in bucket elastic-consumer-groups", health.CodeConfigInvalid},
	} {
		var err error
		if tc.kind == "static" {
			put(StaticBucket, Key(tc.stream, tc.group), tc.value)
			_, err = c.JoinStatic(ctx, tc.stream, tc.group, "m1", h, JoinOptions{})
		} else {
			put(ElasticBucket, Key(tc.stream, tc.group), tc.value)
			if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: WorkStreamName(tc.stream, tc.group), Retention: jetstream.WorkQueuePolicy}); err != nil {
				t.Fatal(err)
			}
			_, err = c.JoinElastic(ctx, tc.stream, tc.group, "m1", h, JoinOptions{})
		}
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.words) {
			t.Errorf("%s %s/%s: join: %v, want %v saying %q", tc.kind, tc.stream, tc.group, err, tc.want, tc.words)
		}
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) {
			t.Errorf("%s %s/%s: a raw server error: %v", tc.kind, tc.stream, tc.group, err)
		}
		if tc.kind == "static" {
			if ci, _ := c.consumerInfo(ctx, tc.stream, StaticConsumerName(tc.group, "m1")); ci != nil {
				t.Errorf("%s/%s: join refused, but it made consumer %s", tc.stream, tc.group, ci.Name)
			}
		}
		rep, err := c.Check(ctx, CheckScope{Stream: tc.stream, Group: tc.group, Kind: Kind(tc.kind)})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, f := range rep.Findings {
			if f.Code == tc.code && f.Severity == health.SeverityCritical && f.Hint != "" {
				found = true
			}
		}
		if !found {
			t.Errorf("%s %s/%s: check found no critical %s with a hint: %+v", tc.kind, tc.stream, tc.group, tc.code, rep.Findings)
		}
	}
}

// A transform that renames without a partition token: the stored form is
// still what an elastic group must filter on.
func TestDefaultFiltersThroughARenamingTransform(t *testing.T) {
	pfs, err := DefaultElasticFilters(streamInfoOf([]string{"orders.*"}, "orders.*", "shop.{{wildcard(1)}}"))
	if err != nil || len(pfs) != 1 || pfs[0].String() != "shop.*:1" {
		t.Fatalf("defaults %v %v, want shop.*:1", pfs, err)
	}
}
