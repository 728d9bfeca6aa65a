package elastic_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

type env struct {
	t   *testing.T
	js  jetstream.JetStream
	env func(string) string
}

// newEnv starts a server with two plain streams: ORDERS (orders.*) and
// EVENTS (events.*.*), neither partition-stamped.
func newEnv(t *testing.T) *env {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	for name, subject := range map[string]string{"ORDERS": "orders.*", "EVENTS": "events.*.*"} {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
			t.Fatal(err)
		}
	}
	return &env{t: t, js: js, env: clitest.Env("NATS_URL=" + s.ClientURL())}
}

func (e *env) run(args ...string) clitest.Result {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.env, args...)
}

// mustRun runs args and fails the test unless they exit 0.
func (e *env) mustRun(args ...string) clitest.Result {
	e.t.Helper()
	r := e.run(args...)
	if r.Code != 0 {
		e.t.Fatalf("cg %v: exit %d, stderr %q", args, r.Code, r.Err)
	}
	return r
}

// publish sends one message per subject and returns the subjects in order.
func (e *env) publish(n int, keys ...string) []string {
	e.t.Helper()
	var subjects []string
	for i := 0; i < n; i++ {
		subj := "orders." + keys[i%len(keys)]
		if _, err := e.js.Publish(context.Background(), subj, []byte(fmt.Sprint(i))); err != nil {
			e.t.Fatal(err)
		}
		subjects = append(subjects, subj)
	}
	return subjects
}

// stored returns the raw KV value of an elastic group, or nil.
func (e *env) stored(stream, group string) []byte {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), cg.ElasticBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := kv.Get(context.Background(), cg.Key(stream, group))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return v.Value()
}

func (e *env) kvKeys() []string {
	e.t.Helper()
	kv, err := e.js.KeyValue(context.Background(), cg.ElasticBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	keys, _ := kv.Keys(context.Background())
	return keys
}

func (e *env) streams() []string {
	e.t.Helper()
	var names []string
	l := e.js.StreamNames(context.Background())
	for n := range l.Name() {
		if !strings.HasPrefix(n, "KV_") {
			names = append(names, n)
		}
	}
	if err := l.Err(); err != nil {
		e.t.Fatal(err)
	}
	sort.Strings(names)
	return names
}

func (e *env) config(stream, group string) cg.ElasticConfig {
	e.t.Helper()
	cfg, err := cg.New(e.js).ElasticConfig(context.Background(), stream, group)
	if err != nil {
		e.t.Fatal(err)
	}
	return cfg
}

// has reports whether out holds want, comparing runs of spaces as one
// space, so column alignment does not matter.
func has(out, want string) bool {
	squash := func(s string) string { return spaces.ReplaceAllString(s, " ") }
	return strings.Contains(squash(out), squash(want))
}

var spaces = regexp.MustCompile(` +`)

func TestCreateWithFilters(t *testing.T) {
	e := newEnv(t)
	r := e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1", "--max-buffered-msgs", "1000", "--max-buffered-bytes", "1048576")
	for _, want := range []string{"Work stream:", "ORDERS-g", "orders.* -> {{Partition(10,1)}}.orders.{{Wildcard(1)}}", "1000 messages, 1048576 bytes", "Members:"} {
		if !has(r.Out, want) {
			t.Errorf("create stdout lacks %q:\n%s", want, r.Out)
		}
	}
	if !strings.Contains(r.Err, "created elastic group g on ORDERS with 10 partitions") || strings.Contains(r.Err, "no --filter given") {
		t.Errorf("create stderr: %q", r.Err)
	}
	want := `{"max_members":10,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}],"max_buffered_msg":1000,"max_buffered_bytes":1048576}`
	if got := string(e.stored("ORDERS", "g")); got != want {
		t.Fatalf("stored value\n got %s\nwant %s", got, want)
	}

	s, err := e.js.Stream(context.Background(), "ORDERS-g")
	if err != nil {
		t.Fatal(err)
	}
	sc := s.CachedInfo().Config
	if sc.Retention != jetstream.WorkQueuePolicy || sc.Discard != jetstream.DiscardNew || sc.MaxMsgs != 1000 || sc.MaxBytes != 1048576 {
		t.Fatalf("work stream config: retention %v discard %v max msgs %d max bytes %d", sc.Retention, sc.Discard, sc.MaxMsgs, sc.MaxBytes)
	}
	if len(sc.Sources) != 1 || sc.Sources[0].Name != "ORDERS" || len(sc.Sources[0].SubjectTransforms) != 1 {
		t.Fatalf("work stream sources: %+v", sc.Sources)
	}
	if tr := sc.Sources[0].SubjectTransforms[0]; tr.Source != "orders.*" || tr.Destination != "{{Partition(10,1)}}.orders.{{Wildcard(1)}}" {
		t.Fatalf("work stream transform: %+v", tr)
	}

	// Identical: success, said so; JSON says it too.
	r = e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1", "--max-buffered-msgs", "1000", "--max-buffered-bytes", "1048576")
	if !strings.Contains(r.Err, "already exists, identical") {
		t.Fatalf("identical re-create stderr: %q", r.Err)
	}
	r = e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1", "--max-buffered-msgs", "1000", "--max-buffered-bytes", "1048576", "--json")
	var out struct {
		Created        bool                `json:"created"`
		DefaultFilters bool                `json:"default_filters"`
		WorkStream     string              `json:"work_stream"`
		Transforms     []map[string]string `json:"transforms"`
	}
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil {
		t.Fatalf("create --json: %v: %q", err, r.Out)
	}
	if out.Created || out.DefaultFilters || out.WorkStream != "ORDERS-g" || len(out.Transforms) != 1 ||
		out.Transforms[0]["destination"] != "{{Partition(10,1)}}.orders.{{Wildcard(1)}}" {
		t.Fatalf("create --json: %+v", out)
	}

	// Different: refused, nothing changed.
	for _, args := range [][]string{
		{"8", "--filter", "orders.*:1", "--max-buffered-msgs", "1000", "--max-buffered-bytes", "1048576"},
		{"10", "--filter", "orders.>", "--max-buffered-msgs", "1000", "--max-buffered-bytes", "1048576"},
		{"10", "--filter", "orders.*:1"},
	} {
		r = e.run(append([]string{"elastic", "create", "ORDERS", "g"}, args...)...)
		if r.Code != 1 || !strings.Contains(r.Err, "delete and recreate") || strings.Count(r.Err, "\n") != 1 {
			t.Errorf("different create %v: code %d stderr %q", args, r.Code, r.Err)
		}
	}
	if got := string(e.stored("ORDERS", "g")); got != want {
		t.Fatalf("stored value changed by a refused create: %s", got)
	}
}

func TestCreateWithDefaultFilters(t *testing.T) {
	e := newEnv(t)
	r := e.mustRun("elastic", "create", "ORDERS", "d", "4")
	if !strings.Contains(r.Err, "no --filter given: using stream ORDERS's subjects") || !strings.Contains(r.Err, "--filter 'orders.*:1'") {
		t.Fatalf("default choice not printed: %q", r.Err)
	}
	want := `{"max_members":4,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}]}`
	if got := string(e.stored("ORDERS", "d")); got != want {
		t.Fatalf("stored value\n got %s\nwant %s", got, want)
	}
	// Defaults equal the explicit form: an identical create.
	r = e.mustRun("elastic", "create", "ORDERS", "d", "4", "--filter", "orders.*:1")
	if !strings.Contains(r.Err, "already exists, identical") {
		t.Fatalf("explicit form of the defaults: %q", r.Err)
	}

	// Two wildcards: both hashed, in order.
	r = e.mustRun("elastic", "create", "EVENTS", "e", "6", "--json")
	if !strings.Contains(r.Err, "--filter 'events.*.*:1,2'") {
		t.Fatalf("default choice not printed: %q", r.Err)
	}
	var out struct {
		DefaultFilters bool                `json:"default_filters"`
		Transforms     []map[string]string `json:"transforms"`
	}
	if err := json.Unmarshal([]byte(r.Out), &out); err != nil || !out.DefaultFilters || len(out.Transforms) != 1 ||
		out.Transforms[0]["source"] != "events.*.*" || out.Transforms[0]["destination"] != "{{Partition(6,1,2)}}.events.{{Wildcard(1)}}.{{Wildcard(2)}}" {
		t.Fatalf("create --json: %v %+v %q", err, out, r.Out)
	}
	s, err := e.js.Stream(context.Background(), "EVENTS-e")
	if err != nil {
		t.Fatal(err)
	}
	if tr := s.CachedInfo().Config.Sources[0].SubjectTransforms; len(tr) != 1 || tr[0].Destination != "{{Partition(6,1,2)}}.events.{{Wildcard(1)}}.{{Wildcard(2)}}" {
		t.Fatalf("work stream transforms: %+v", tr)
	}
}

func TestCreateRefusesBadInputCreatingNothing(t *testing.T) {
	e := newEnv(t)
	// A literal subject has no token to hash: the defaults cannot be used.
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "AUDIT", Subjects: []string{"audit"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ORDERS", "g", "10", "--filter", "orders..x"}, 2, "empty token"},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.*:x"}, 2, `wildcard index "x" is not a number`},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.*:2"}, 2, "wildcard index 2 out of range: the filter has 1 '*' wildcard(s)"},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.*:0"}, 2, "wildcard index 0 out of range"},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.*:1,1"}, 2, "listed twice"},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.new"}, 2, "needs a '*' wildcard"},
		{[]string{"ORDERS", "g", "10", "--filter", "orders.*", "--filter", "orders.>"}, 2, "overlap"},
		{[]string{"ORDERS", "g", "10", "--max-buffered-msgs", "-1"}, 2, `invalid argument "-1" for "--max-buffered-msgs" flag: -1 is negative`},
		{[]string{"ORDERS", "g", "10", "--max-buffered-bytes=-5"}, 2, `invalid argument "-5" for "--max-buffered-bytes" flag: -5 is negative`},
		{[]string{"ORDERS", "g", "10", "--max-buffered-msgs", "lots"}, 2, `"lots" is not a whole number`},
		{[]string{"ORDERS", "a.b", "10"}, 2, `group name "a.b": must not contain '.'`},
		{[]string{"OR>DERS", "g", "10"}, 2, `stream name "OR>DERS"`},
		{[]string{"ORDERS", "", "10"}, 2, `group name "": must not be empty`},
		{[]string{"ORDERS", "g", "0"}, 2, `max-members "0"`},
		{[]string{"ORDERS", "g", "ten"}, 2, `max-members "ten"`},
		{[]string{"ORDERS", "g", "2000000"}, 2, "max-members 2000000: is above cg's ceiling of 4096 partitions"},
		{[]string{"AUDIT", "g", "2000000"}, 2, "max-members 2000000: is above cg's ceiling of 4096 partitions"},
		{[]string{"ORDERS", "g"}, 2, "missing <max-members>"},
		{[]string{"ORDERS", "g", "10", "m1"}, 2, "too many arguments"},
		{[]string{"NOPE", "g", "10"}, 1, `stream not found: "NOPE"`},
		{[]string{"NOPE", "g", "10", "--filter", "orders.*:1"}, 1, `stream not found: "NOPE"`},
		{[]string{"AUDIT", "g", "10"}, 1, "stream AUDIT's subjects audit cannot serve as partitioning filters"},
	} {
		r := e.run(append([]string{"elastic", "create"}, tc.args...)...)
		if r.Code != tc.code || !strings.Contains(r.Err, tc.want) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, r.Code, tc.code, r.Err, tc.want)
		}
		if lines := strings.Count(strings.TrimSpace(r.Err), "\n"); lines > 1 {
			t.Errorf("%v: error spans %d lines: %q", tc.args, lines+1, r.Err)
		}
		if tc.code == 2 && !strings.Contains(r.Err, "Run 'cg elastic create --help' for usage.") {
			t.Errorf("%v: no usage hint: %q", tc.args, r.Err)
		}
	}
	if keys := e.kvKeys(); len(keys) != 0 {
		t.Fatalf("refused creates stored %v", keys)
	}
	if s := e.streams(); !slices.Equal(s, []string{"AUDIT", "EVENTS", "ORDERS"}) {
		t.Fatalf("refused creates left streams %v", s)
	}
}

func TestAddDrop(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1")

	r := e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2")
	if !strings.Contains(r.Err, "added m1 m2 to elastic group g on ORDERS") || !has(r.Out, "m1=0-4  m2=5-9 (balanced)") ||
		!has(r.Out, "Moved:     10 of 10 partitions") {
		t.Fatalf("add: out %q err %q", r.Out, r.Err)
	}
	if !has(r.Out, "PARTITIONS  FROM  TO") || !has(r.Out, "0-4         -     m1") || !has(r.Out, "5-9         -     m2") {
		t.Fatalf("add moves table:\n%s", r.Out)
	}

	// m2 is already in: left alone and said so; the JSON is the change.
	r = e.mustRun("elastic", "add", "ORDERS", "g", "m2", "m3", "--json")
	var mc cg.MembershipChange
	if err := json.Unmarshal([]byte(r.Out), &mc); err != nil {
		t.Fatalf("add --json: %v: %q", err, r.Out)
	}
	wantMoves := partition.Moves(partition.BalancedAssignment([]string{"m1", "m2"}, 10), partition.BalancedAssignment([]string{"m1", "m2", "m3"}, 10))
	if !slices.Equal(mc.Changed, []string{"m3"}) || !slices.Equal(mc.Unchanged, []string{"m2"}) || !slices.Equal(mc.Moves, wantMoves) ||
		!slices.Equal(mc.Config.Members, []string{"m1", "m2", "m3"}) || mc.Revision == 0 || len(mc.Moves) == 0 {
		t.Fatalf("add --json: %+v (want moves %+v)", mc, wantMoves)
	}
	rev := mc.Revision
	r = e.mustRun("elastic", "add", "ORDERS", "g", "m3")
	if !strings.Contains(r.Err, "m3: already a member") || !has(r.Out, "Moved:     none") {
		t.Fatalf("add of a member: out %q err %q", r.Out, r.Err)
	}
	// ... and writes nothing: a new revision would wake every member.
	if !has(r.Out, fmt.Sprintf("Revision:  %d", rev)) || strings.Contains(r.Err, "added") {
		t.Fatalf("add of a member wrote a new revision (was %d): out %q err %q", rev, r.Out, r.Err)
	}

	// Dropping only non-members fails and says so; a mix drops the members.
	r = e.run("elastic", "drop", "ORDERS", "g", "m9")
	if r.Code != 1 || !strings.Contains(r.Err, "none of [m9] is a member") || !strings.Contains(r.Err, "cg elastic info ORDERS g") {
		t.Fatalf("drop of a non-member: %d %q", r.Code, r.Err)
	}
	r = e.mustRun("elastic", "drop", "ORDERS", "g", "m3", "m9")
	if !strings.Contains(r.Err, "dropped m3 from elastic group g on ORDERS") || !strings.Contains(r.Err, "m9: not a member") ||
		!has(r.Out, "m1=0-4  m2=5-9 (balanced)") {
		t.Fatalf("drop: out %q err %q", r.Out, r.Err)
	}
	r = e.mustRun("elastic", "drop", "ORDERS", "g", "m1", "--json")
	if err := json.Unmarshal([]byte(r.Out), &mc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mc.Changed, []string{"m1"}) || mc.Unchanged == nil || len(mc.Moves) != 5 || mc.Moves[0] != (partition.Move{Partition: 0, From: "m1", To: "m2"}) {
		t.Fatalf("drop --json: %+v", mc)
	}
	r = e.mustRun("elastic", "drop", "ORDERS", "g", "m2")
	if !strings.Contains(r.Err, "has no members now") || !has(r.Out, "none (messages wait") {
		t.Fatalf("drop of the last member: out %q err %q", r.Out, r.Err)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"add", "ORDERS", "g"}, 2, "missing <member>: cg elastic add takes <stream> <group> <member>..."},
		{[]string{"add", "ORDERS", "g", "m.1"}, 2, `member name "m.1"`},
		{[]string{"drop", "ORDERS", "g", "ok", "m*"}, 2, `member name "m*"`},
		{[]string{"add", "ORDERS", "nope", "m1"}, 1, "list groups with 'cg elastic ls ORDERS'"},
		{[]string{"add", "ORDERS", "g", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, 2, "more members than partitions"},
	} {
		r := e.run(append([]string{"elastic"}, tc.args...)...)
		if r.Code != tc.code || !strings.Contains(r.Err, tc.want) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, r.Code, tc.code, r.Err, tc.want)
		}
	}
	if cfg := e.config("ORDERS", "g"); len(cfg.Members) != 0 {
		t.Fatalf("refused adds changed members: %v", cfg.Members)
	}
}

func TestConcurrentAdds(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "c", "32")
	const n = 20
	var wg sync.WaitGroup
	results := make([]clitest.Result, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = clitest.Run(t, cmd.Run, e.env, "elastic", "add", "ORDERS", "c", fmt.Sprintf("w%02d", i))
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Code != 0 {
			t.Errorf("add w%02d: exit %d, %q", i, r.Code, r.Err)
		}
	}
	cfg := e.config("ORDERS", "c")
	got := slices.Sorted(slices.Values(cfg.Members))
	var want []string
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("w%02d", i))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after %d concurrent adds members are %v", n, got)
	}
}

func TestMappings(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "10")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2")

	r := e.mustRun("elastic", "create-mapping", "ORDERS", "g", "m1:0-3", "m2:4-8", "whale:9")
	if !has(r.Out, "m1=0-3  m2=4-8  whale=9 (mapped)") || !strings.Contains(r.Err, "mapped the 10 partitions of elastic group g on ORDERS to m1 m2 whale") {
		t.Fatalf("create-mapping: out %q err %q", r.Out, r.Err)
	}
	if !has(r.Out, "9           m2    whale") {
		t.Fatalf("create-mapping moves:\n%s", r.Out)
	}
	want := `{"max_members":10,"partitioning_filters":[{"filter":"orders.*","partitioning_wildcards":[1]}],"member_mappings":[{"member":"m1","partitions":[0,1,2,3]},{"member":"m2","partitions":[4,5,6,7,8]},{"member":"whale","partitions":[9]}]}`
	if got := string(e.stored("ORDERS", "g")); got != want {
		t.Fatalf("stored value\n got %s\nwant %s", got, want)
	}

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"cm", "ORDERS", "g", "m1:0-4", "m2:5-8"}, 2, "partitions 9 are not mapped"},
		{[]string{"cm", "ORDERS", "g", "m1:0-9", "m2:10"}, 2, `"m2" partition 10: out of range`},
		{[]string{"cm", "ORDERS", "g", "m1:0-5", "m2:5-9"}, 2, "already mapped"},
		{[]string{"createmapping", "ORDERS", "g", "m1"}, 2, `mapping "m1": has no ':'`},
		{[]string{"cm", "ORDERS", "g", "m1:0-4", "m2:5,x"}, 2, `partition "x"`},
		{[]string{"cm", "ORDERS", "g"}, 2, "missing <member:p,p,...>"},
		{[]string{"cm", "ORDERS", "nope", "m1:0-9"}, 1, "group not found"},
		{[]string{"add", "ORDERS", "g", "m3"}, 1, "uses member mappings"},
		{[]string{"drop", "ORDERS", "g", "m1"}, 1, "uses member mappings"},
		{[]string{"dm", "ORDERS", "g", "a.b"}, 2, `member name "a.b"`},
		{[]string{"dm", "ORDERS", "g", "a", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k"}, 2, "more members than partitions"},
	} {
		r := e.run(append([]string{"elastic"}, tc.args...)...)
		if r.Code != tc.code || !strings.Contains(r.Err, tc.want) {
			t.Errorf("%v: code %d (want %d), stderr %q (want %q)", tc.args, r.Code, tc.code, r.Err, tc.want)
		}
		if lines := strings.Count(strings.TrimSpace(r.Err), "\n"); lines > 1 {
			t.Errorf("%v: error spans %d lines: %q", tc.args, lines+1, r.Err)
		}
	}
	if got := string(e.stored("ORDERS", "g")); got != want {
		t.Fatalf("refused changes altered the stored value: %s", got)
	}

	// Back to a member list: by default the mapped members.
	r = e.mustRun("elastic", "delete-mapping", "ORDERS", "g")
	if !strings.Contains(r.Err, "split over the members the mappings named: m1 m2 whale") || !has(r.Out, "m1=0-2,9  m2=3-5  whale=6-8 (balanced)") {
		t.Fatalf("delete-mapping: out %q err %q", r.Out, r.Err)
	}
	if cfg := e.config("ORDERS", "g"); !slices.Equal(cfg.Members, []string{"m1", "m2", "whale"}) || len(cfg.MemberMappings) != 0 {
		t.Fatalf("after delete-mapping: %+v", cfg)
	}
	r = e.run("elastic", "dm", "ORDERS", "g")
	if r.Code != 1 || !strings.Contains(r.Err, "has no member mappings") {
		t.Fatalf("delete-mapping of a balanced group: %d %q", r.Code, r.Err)
	}

	// Round trip with the other aliases and given members.
	e.mustRun("elastic", "createmapping", "ORDERS", "g", "x:0,2,4,6,8", "y:1,3,5,7,9")
	r = e.mustRun("elastic", "deletemapping", "ORDERS", "g", "a", "b", "--json")
	var mc cg.MembershipChange
	if err := json.Unmarshal([]byte(r.Out), &mc); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(mc.Config.Members, []string{"a", "b"}) || len(mc.Config.MemberMappings) != 0 || len(mc.Moves) != 10 {
		t.Fatalf("deletemapping --json: %+v", mc)
	}
}

func TestInfoShowsBacklogAndSourcingLag(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2")

	keys := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy", "mallory"}
	subjects := e.publish(97, keys...)
	want := make([]uint64, 10)
	for _, s := range subjects {
		p, err := partition.PartitionOfSubject(s, "orders.*", 10, []int{1})
		if err != nil {
			t.Fatal(err)
		}
		want[p]++
	}

	var gi struct {
		Kind        string                `json:"kind"`
		WorkStream  string                `json:"work_stream"`
		Backlog     []uint64              `json:"backlog"`
		SourcingLag *uint64               `json:"sourcing_lag"`
		Members     []health.MemberStatus `json:"members"`
	}
	natstest.Eventually(t, 20*time.Second, "the backlog to match the published subjects", func() bool {
		r := e.run("elastic", "info", "ORDERS", "g", "--json")
		if r.Code != 0 {
			t.Fatalf("info --json: %d %q", r.Code, r.Err)
		}
		if err := json.Unmarshal([]byte(r.Out), &gi); err != nil {
			t.Fatalf("info --json: %v: %q", err, r.Out)
		}
		return slices.Equal(gi.Backlog, want) && gi.SourcingLag != nil && *gi.SourcingLag == 0
	})
	if gi.Kind != "elastic" || gi.WorkStream != "ORDERS-g" || len(gi.Members) != 2 || gi.Members[0].ConsumerExists {
		t.Fatalf("info --json: %+v", gi)
	}

	r := e.mustRun("elastic", "info", "ORDERS", "g")
	t.Logf("cg elastic info ORDERS g:\n%s", r.Out)
	var m1, m2 uint64
	for p, n := range want {
		if p < 5 {
			m1 += n
		} else {
			m2 += n
		}
	}
	for _, w := range []string{
		"Work stream:   ORDERS-g",
		"Filters:       orders.*:1",
		"Ownership:     m1=0-4  m2=5-9",
		fmt.Sprintf("Backlog:       %d messages in ", len(subjects)),
		"Sourcing lag:  0 messages",
		"BACKLOG",
	} {
		if !has(r.Out, w) {
			t.Errorf("info lacks %q:\n%s", w, r.Out)
		}
	}
	for p, n := range want {
		if n > 0 && !has(r.Out, fmt.Sprintf(" %d:%d", p, n)) {
			t.Errorf("info lacks partition %d's backlog %d:\n%s", p, n, r.Out)
		}
	}
	for _, row := range []struct {
		member string
		sum    uint64
	}{{"m1", m1}, {"m2", m2}} {
		found := false
		for _, l := range strings.Split(r.Out, "\n") {
			f := strings.Fields(l)
			if len(f) > 0 && f[0] == row.member && f[len(f)-1] == fmt.Sprint(row.sum) && strings.Contains(l, "not running") {
				found = true
			}
		}
		if !found {
			t.Errorf("no row for %s with backlog %d:\n%s", row.member, row.sum, r.Out)
		}
	}

	r = e.mustRun("elastic", "member-info", "ORDERS", "g", "m2")
	if !has(r.Out, "Consumer:       m2 on ORDERS-g") || !has(r.Out, "not running") {
		t.Fatalf("member-info:\n%s", r.Out)
	}
	r = e.mustRun("elastic", "ls", "ORDERS", "--json")
	var ls []struct {
		Group   string   `json:"group"`
		Mode    string   `json:"mode"`
		Members []string `json:"members"`
	}
	if json.Unmarshal([]byte(r.Out), &ls) != nil || len(ls) != 1 || ls[0].Group != "g" || ls[0].Mode != "balanced" || len(ls[0].Members) != 2 {
		t.Fatalf("ls --json: %q", r.Out)
	}
	// Nothing pinned is the state a step-down asks for: it says so and succeeds.
	if r = e.run("elastic", "sd", "ORDERS", "g", "m1"); r.Code != 0 || !strings.Contains(r.Err, "nothing to step down") {
		t.Fatalf("step-down of a member never started: %d %q", r.Code, r.Err)
	}
	if r = e.run("elastic", "minfo", "ORDERS", "g", "zz"); r.Code != 1 || !strings.Contains(r.Err, `"zz" is not a member`) {
		t.Fatalf("member-info of a non-member: %d %q", r.Code, r.Err)
	}
	if r = e.run("elastic", "info", "ORDERS", "nope"); r.Code != 1 || !strings.Contains(r.Err, "cg elastic ls ORDERS") {
		t.Fatalf("info unknown: %d %q", r.Code, r.Err)
	}
}

func TestDeleteRemovesGroupAndWorkStreamOnly(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "10")
	e.mustRun("elastic", "create", "ORDERS", "h", "10")
	e.mustRun("elastic", "create", "EVENTS", "g", "4")
	e.publish(5, "alice", "bob")

	if r := e.run("elastic", "delete", "ORDERS", "g"); r.Code != 2 || !strings.Contains(r.Err, "--force") {
		t.Fatalf("delete without --force off a terminal: %d %q", r.Code, r.Err)
	}
	if e.stored("ORDERS", "g") == nil {
		t.Fatal("delete without --force deleted")
	}
	r := e.mustRun("elastic", "rm", "ORDERS", "g", "--force")
	if !strings.Contains(r.Err, "deleted elastic group g on ORDERS (key ORDERS.g, work stream ORDERS-g)") {
		t.Fatalf("delete: %q", r.Err)
	}
	if e.stored("ORDERS", "g") != nil {
		t.Fatal("KV entry survived delete")
	}
	if s := e.streams(); !slices.Equal(s, []string{"EVENTS", "EVENTS-g", "ORDERS", "ORDERS-h"}) {
		t.Fatalf("streams after delete: %v", s)
	}
	if e.stored("ORDERS", "h") == nil || e.stored("EVENTS", "g") == nil {
		t.Fatal("delete removed another group's entry")
	}
	s, err := e.js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if si, err := s.Info(context.Background()); err != nil || si.State.Msgs != 5 {
		t.Fatalf("origin stream after delete: %v %+v", err, si)
	}

	r = e.mustRun("elastic", "delete", "ORDERS", "h", "--force", "--json")
	var res cg.DeleteResult
	if err := json.Unmarshal([]byte(r.Out), &res); err != nil || res.Key != "ORDERS.h" || res.WorkStream != "ORDERS-h" {
		t.Fatalf("delete --json: %v %q", err, r.Out)
	}
	if r = e.run("elastic", "delete", "ORDERS", "g", "--force"); r.Code != 1 || !strings.Contains(r.Err, "group not found") {
		t.Fatalf("delete unknown: %d %q", r.Code, r.Err)
	}
	if r = e.run("elastic", "ls", "ORDERS"); r.Code != 0 || !strings.Contains(r.Err, "no elastic groups on stream ORDERS") {
		t.Fatalf("ls after delete: %d %q %q", r.Code, r.Out, r.Err)
	}
}

func TestConsumeGetsExactlyItsPartitions(t *testing.T) {
	e := newEnv(t)

	e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2")
	keys := []string{"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"}
	subjects := e.publish(60, keys...)
	var mine []string
	for _, s := range subjects {
		if p, _ := partition.PartitionOfSubject(s, "orders.*", 10, []int{1}); p < 5 {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 || len(mine) == len(subjects) {
		t.Fatalf("keys do not split over both members: %d of %d for m1", len(mine), len(subjects))
	}

	r := e.run("elastic", "consume", "ORDERS", "g", "m1", "--sleep", "0s", "--count", fmt.Sprint(len(mine)), "--json")
	if r.Code != 0 {
		t.Fatalf("consume: %d %s", r.Code, r.Err)
	}
	var got []string
	var summary map[string]any
	for _, l := range clitest.Lines(t, r.Out) {
		switch l["type"] {
		case "msg":
			p := int(l["partition"].(float64))
			s := l["subject"].(string)
			if p > 4 {
				t.Errorf("m1 got partition %d (%s)", p, s)
			}
			if want, _ := partition.PartitionOfSubject(s, "orders.*", 10, []int{1}); !strings.HasPrefix(s, "orders.") || want != p {
				t.Errorf("subject %q (partition %d) not stripped or in the wrong partition", s, p)
			}
			if l["acked"] != true {
				t.Errorf("not acked: %v", l)
			}
			got = append(got, s)
		case "summary":
			summary = l
		}
	}
	if summary == nil || summary["reason"] != "count reached" || int(summary["handled"].(float64)) != len(mine) {
		t.Fatalf("summary %v", summary)
	}
	if !slices.Equal(got, mine) {
		t.Fatalf("m1 handled\n %v\nwant (in order)\n %v", got, mine)
	}
	// What is left in the work stream is exactly m2's share.
	natstest.Eventually(t, 20*time.Second, "m1's backlog drained", func() bool {
		gi, err := cg.New(e.js).Info(context.Background(), cg.KindElastic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		var m1, m2 uint64
		for p, n := range gi.Backlog {
			if p < 5 {
				m1 += n
			} else {
				m2 += n
			}
		}
		return m1 == 0 && m2 == uint64(len(subjects)-len(mine))
	})
}

func TestConsumeFollowsMembershipLive(t *testing.T) {
	e := newEnv(t)
	e.mustRun("elastic", "create", "ORDERS", "g", "10", "--filter", "orders.*:1")
	e.mustRun("elastic", "add", "ORDERS", "g", "m1", "m2")
	a := clitest.Start(cmd.Run, e.env, "elastic", "join", "ORDERS", "g", "m1", "--sleep", "0s", "--json")
	defer a.Stop(t)
	natstest.Eventually(t, 20*time.Second, "m1 pulling partitions 0-4", func() bool {
		return strings.Contains(a.Out.String(), `"event":"rebalanced"`) && strings.Contains(a.Out.String(), `"partitions":[0,1,2,3,4]`)
	})

	// Dropping m2 hands its partitions to the running m1.
	e.mustRun("elastic", "drop", "ORDERS", "g", "m2")
	natstest.Eventually(t, 20*time.Second, "m1 pulling all partitions", func() bool {
		return strings.Contains(a.Out.String(), `"partitions":[0,1,2,3,4,5,6,7,8,9]`)
	})
	subjects := e.publish(30, "alice", "bob", "carol", "dave", "erin", "frank")
	natstest.Eventually(t, 20*time.Second, "m1 handling every message", func() bool {
		return strings.Count(a.Out.String(), `"type":"msg"`) == len(subjects)
	})
	r := e.mustRun("elastic", "info", "ORDERS", "g", "--json")
	var gi struct {
		Members []health.MemberStatus `json:"members"`
		Backlog []uint64              `json:"backlog"`
	}
	if err := json.Unmarshal([]byte(r.Out), &gi); err != nil {
		t.Fatal(err)
	}
	if len(gi.Members) != 1 || !gi.Members[0].Active || !gi.Members[0].Pinned || slices.Max(gi.Backlog) != 0 {
		t.Fatalf("info while m1 runs: %+v backlog %v", gi.Members, gi.Backlog)
	}
	r = e.mustRun("elastic", "info", "ORDERS", "g")
	if !has(r.Out, "m1 0-9 active") {
		t.Fatalf("info text:\n%s", r.Out)
	}

	// Deleting the group stops the instance cleanly.
	e.mustRun("elastic", "delete", "ORDERS", "g", "--force")
	if code := a.Wait(t); code != 0 {
		t.Fatalf("consume after delete exited %d: %s", code, a.Err.String())
	}
	if !strings.Contains(a.Out.String(), `"reason":"group deleted"`) {
		t.Fatalf("consume summary: %s", a.Out.String())
	}
}

func TestHelpAndAliases(t *testing.T) {
	// No server: --help never dials.
	env := clitest.Env("NATS_URL=nats://127.0.0.1:1")
	for _, args := range [][]string{
		{"elastic"}, {"elastic", "--help"}, {"elastic", "create", "--help"}, {"elastic", "add", "--help"}, {"elastic", "drop", "--help"},
		{"elastic", "cm", "--help"}, {"elastic", "createmapping", "--help"}, {"elastic", "dm", "--help"}, {"elastic", "deletemapping", "--help"},
		{"elastic", "list", "--help"}, {"elastic", "minfo", "--help"}, {"elastic", "sd", "--help"}, {"elastic", "rm", "--help"}, {"elastic", "join", "--help"},
	} {
		r := clitest.Run(t, cmd.Run, env, args...)
		if r.Code != 0 || r.Err != "" || !has(r.Out, "Usage:") {
			t.Errorf("cg %v: code %d stderr %q", args, r.Code, r.Err)
		}
	}
	r := clitest.Run(t, cmd.Run, env, "elastic", "create", "--help")
	for _, w := range []string{"filter[:w1,w2,...]", "'orders.*:1'", "--max-buffered-msgs", "the subjects the stream", "'*.orders.*:2'"} {
		if !has(r.Out, w) {
			t.Errorf("create --help lacks %q", w)
		}
	}
	r = clitest.Run(t, cmd.Run, env, "elastic", "bogus")
	if r.Code != 2 || !strings.Contains(r.Err, `unknown command "bogus" for "cg elastic"`) {
		t.Fatalf("unknown subcommand: %d %q", r.Code, r.Err)
	}
}
