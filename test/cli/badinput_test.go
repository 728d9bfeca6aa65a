// Package cli runs cg from outside, as a process of the test binary.
//
// The bad-input tests feed cg wrong input of every kind through the command
// line and checks that each is refused with a one-line message saying what
// was wrong, the right exit code (2 usage, 1 operation failed), and that
// nothing on the server was created or changed.
package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

// Stored values no implementation can use, under keys cg will be asked about.
const (
	garbageStatic  = "{not json"
	invalidStatic  = `{"max_members":0,"members":["m1"]}`
	garbageElastic = "]["
	invalidElastic = `{"max_members":4,"partitioning_filters":[{"filter":"plain.*","partitioning_wildcards":[7]}]}`
)

// world starts a server holding:
//
//	ORDERS  orders.*, partition-stamped into 10; static group sg (m1 m2)
//	PLAIN   plain.*; elastic groups eg (4 partitions, a b), emap (4, mapped
//	        a:0-1 b:2-3), efull (2 partitions, full: x y) and orphan (a),
//	        whose work stream is gone
//	static keys ORDERS.broken (not JSON) and ORDERS.zero (max_members 0)
//	elastic keys PLAIN.broken (not JSON) and PLAIN.badwc (wildcard 7 of 1)
func world(t *testing.T) (url string, js jetstream.JetStream) {
	t.Helper()
	s, js, _ := clitest.Server(t)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"},
	}))
	must(js.CreateStream(ctx, jetstream.StreamConfig{Name: "PLAIN", Subjects: []string{"plain.*"}}))
	c := cg.New(js)
	must(c.CreateStatic(ctx, "ORDERS", "sg", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1", "m2"}}))
	byFirst := []cg.PartitioningFilter{{Filter: "plain.*", PartitioningWildcards: []int{1}}}
	for _, g := range []struct {
		name string
		n    int
	}{{"eg", 4}, {"emap", 4}, {"efull", 2}} {
		must(c.CreateElastic(ctx, "PLAIN", g.name, cg.ElasticConfig{MaxMembers: g.n, PartitioningFilters: byFirst}))
	}
	must(c.AddMembers(ctx, "PLAIN", "eg", []string{"a", "b"}))
	must(c.SetMappings(ctx, "PLAIN", "emap", []partition.MemberMapping{{Member: "a", Partitions: []int{0, 1}}, {Member: "b", Partitions: []int{2, 3}}}))
	must(c.AddMembers(ctx, "PLAIN", "efull", []string{"x", "y"}))
	must(c.CreateElastic(ctx, "PLAIN", "orphan", cg.ElasticConfig{MaxMembers: 4, PartitioningFilters: byFirst}))
	must(c.AddMembers(ctx, "PLAIN", "orphan", []string{"a"}))
	must(nil, js.DeleteStream(ctx, cg.WorkStreamName("PLAIN", "orphan")))
	skv, err := js.KeyValue(ctx, cg.StaticBucket)
	must(nil, err)
	must(skv.PutString(ctx, "ORDERS.broken", garbageStatic))
	must(skv.PutString(ctx, "ORDERS.zero", invalidStatic))
	ekv, err := js.KeyValue(ctx, cg.ElasticBucket)
	must(nil, err)
	must(ekv.PutString(ctx, "PLAIN.broken", garbageElastic))
	must(ekv.PutString(ctx, "PLAIN.badwc", invalidElastic))
	return s.ClientURL(), js
}

type badCase struct {
	name string
	args []string
	// env is added to NATS_URL=<the server>; a NATS_URL here wins.
	env  []string
	code int
	// want are substrings of the error line, together saying what was
	// wrong (of stderr when code is 0).
	want []string
	// not are substrings the error line must not hold.
	not []string
	// out, for the few refusals that succeed (ls marks unreadable groups;
	// adding a member already there is a no-op): substrings of stdout.
	// Otherwise stdout must be empty.
	out []string
}

func cases(t *testing.T, url string) []badCase {
	long := strings.Repeat("g", 201)
	down := closedPort(t)
	old := versionProxy(t, strings.TrimPrefix(url, "nats://"), "2.10.22")
	old211 := versionProxy(t, strings.TrimPrefix(url, "nats://"), "2.11.4")
	return []badCase{
		// Names.
		{name: "group name with a dot", args: []string{"static", "create", "balanced", "ORDERS", "a.b", "10", "m1"}, code: 2,
			want: []string{`group name "a.b": must not contain '.'`}},
		{name: "group name with a wildcard", args: []string{"static", "create", "balanced", "ORDERS", "g*", "10", "m1"}, code: 2,
			want: []string{`group name "g*": must not contain the wildcards`}},
		{name: "member name with a space", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m 1"}, code: 2,
			want: []string{`member name "m 1": must not contain white space`}},
		{name: "empty group name", args: []string{"static", "info", "ORDERS", ""}, code: 2,
			want: []string{`group name "": must not be empty`}},
		{name: "empty stream name", args: []string{"elastic", "ls", ""}, code: 2,
			want: []string{`stream name "": must not be empty`}},
		{name: "group name too long", args: []string{"static", "create", "balanced", "ORDERS", long, "10", "m1"}, code: 2,
			want: []string{"group name", "is too long (at most 200 bytes)"}},
		{name: "consumer name too long", args: []string{"static", "create", "balanced", "ORDERS", strings.Repeat("g", 100), "10", strings.Repeat("m", 190)}, code: 2,
			want: []string{"member name", "the server allows 255"}},
		{name: "stream name with a wildcard", args: []string{"elastic", "create", "PL>AIN", "g", "4"}, code: 2,
			want: []string{`stream name "PL>AIN": must not contain the wildcards`}},
		{name: "group name with a colon", args: []string{"elastic", "create", "PLAIN", "g:1", "4"}, code: 2,
			want: []string{`group name "g:1": may only use letters`}},
		{name: "member name with a dot", args: []string{"elastic", "add", "PLAIN", "eg", "m.1"}, code: 2,
			want: []string{`member name "m.1": must not contain '.'`}},
		{name: "group name with a slash", args: []string{"static", "member-info", "ORDERS", "s/g", "m1"}, code: 2,
			want: []string{`group name "s/g": must not contain '/'`}},

		// Numbers.
		{name: "max-members zero", args: []string{"static", "create", "balanced", "ORDERS", "g", "0", "m1"}, code: 2,
			want: []string{`max-members "0" must be a whole number of partitions, at least 1`}},
		{name: "max-members negative", args: []string{"elastic", "create", "PLAIN", "g", "--", "-3"}, code: 2,
			want: []string{`max-members "-3"`}},
		{name: "max-members negative, read as a flag", args: []string{"elastic", "create", "PLAIN", "g", "-3"}, code: 2,
			want: []string{"-3"}},
		{name: "max-members not a number", args: []string{"elastic", "create", "PLAIN", "g", "ten"}, code: 2,
			want: []string{`max-members "ten"`}},
		{name: "max-members overflows", args: []string{"static", "create", "balanced", "ORDERS", "g", "99999999999999999999", "m1"}, code: 2,
			want: []string{`max-members "99999999999999999999"`}},
		{name: "max-members huge, static", args: []string{"static", "create", "balanced", "ORDERS", "g", "2000000", "m1"}, code: 2,
			want: []string{"max-members 2000000", "above cg's ceiling of 4096 partitions"}},
		{name: "max-members huge, elastic with filter", args: []string{"elastic", "create", "PLAIN", "g", "2000000", "--filter", "plain.*:1"}, code: 2,
			want: []string{"max-members 2000000", "above cg's ceiling of 4096 partitions"}},
		{name: "max-members huge, elastic with default filters", args: []string{"elastic", "create", "PLAIN", "g", "2000000"}, code: 2,
			want: []string{"max-members 2000000", "above cg's ceiling of 4096 partitions"}},
		{name: "member listed twice", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "m1"}, code: 2,
			want: []string{`member "m1": is listed twice`}},
		{name: "more members than partitions", args: []string{"static", "create", "balanced", "ORDERS", "g", "2", "m1", "m2", "m3"}, code: 2,
			want: []string{"more members than partitions (max-members is 2)"}},
		{name: "buffer cap negative", args: []string{"elastic", "create", "PLAIN", "g", "4", "--max-buffered-msgs=-1"}, code: 2,
			want: []string{`"--max-buffered-msgs"`, "-1 is negative"}},
		{name: "buffer cap not a number", args: []string{"elastic", "create", "PLAIN", "g", "4", "--max-buffered-bytes", "1GB"}, code: 2,
			want: []string{`"--max-buffered-bytes"`, `"1GB" is not a whole number`}},
		{name: "max-ack-pending zero", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--max-ack-pending", "0"}, code: 2,
			want: []string{`"--max-ack-pending"`, "below the minimum 1"}},
		{name: "count negative", args: []string{"elastic", "consume", "PLAIN", "eg", "a", "--count=-3"}, code: 2,
			want: []string{`"--count"`, "below the minimum 0"}},

		// Layouts.
		{name: "layout unknown, static", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "--layout", "partitions"}, code: 2,
			want: []string{`--layout "partitions" is not a layout: use member (the default) or partition`}},
		{name: "layout unknown, elastic", args: []string{"elastic", "create", "PLAIN", "g", "4", "--layout", "consumer"}, code: 2,
			want: []string{`--layout "consumer" is not a layout`}},
		{name: "layout partition above its ceiling", args: []string{"elastic", "create", "PLAIN", "g", "2000", "--filter", "plain.*:1", "--layout", "partition"}, code: 2,
			want: []string{"2000 partitions is more than the partition layout allows (256"}},
		{name: "layout partition over a member-layout name", args: []string{"static", "create", "balanced", "ORDERS", "sg", "10", "m1", "m2", "--layout", "partition"}, code: 1,
			want: []string{`static group "sg" on "ORDERS" exists with the member layout`}},

		// Durations.
		{name: "sleep without unit", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--sleep", "5"}, code: 2,
			want: []string{`"--sleep"`, `"5" has no unit`}},
		{name: "sleep negative", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--sleep=-1s"}, code: 2,
			want: []string{`"--sleep"`, `"-1s" is negative`}},
		{name: "sleep garbage", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--sleep", "a-bit"}, code: 2,
			want: []string{`"--sleep"`, `"a-bit" is not a duration`}},
		{name: "ack-wait without unit", args: []string{"elastic", "consume", "PLAIN", "eg", "a", "--ack-wait", "30"}, code: 2,
			want: []string{`"--ack-wait"`, `"30" has no unit`}},
		{name: "ack-wait negative", args: []string{"static", "join", "ORDERS", "sg", "m1", "--ack-wait=-5s"}, code: 2,
			want: []string{`"--ack-wait"`, `"-5s" is negative`}},
		{name: "ack-wait garbage", args: []string{"elastic", "consume", "PLAIN", "eg", "a", "--ack-wait", "soon"}, code: 2,
			want: []string{`"--ack-wait"`, `"soon" is not a duration`}},
		{name: "timeout without unit", args: []string{"static", "ls", "ORDERS", "--timeout", "2"}, code: 2,
			want: []string{`"--timeout"`, "missing a unit"}},
		{name: "timeout negative", args: []string{"static", "ls", "ORDERS", "--timeout=-1s"}, code: 2,
			want: []string{`"--timeout"`, "must be a positive duration"}},
		{name: "timeout garbage", args: []string{"static", "ls", "ORDERS", "--timeout", "later"}, code: 2,
			want: []string{`"--timeout"`, "not a duration"}},
		{name: "NATS_TIMEOUT garbage", args: []string{"static", "ls", "ORDERS"}, env: []string{"NATS_TIMEOUT=forever"}, code: 2,
			want: []string{`NATS_TIMEOUT="forever"`, "not a duration"}},

		// Mappings.
		{name: "mapping without colon", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1"}, code: 2,
			want: []string{`mapping "m1": has no ':'`}},
		{name: "mapping with a bad partition", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-4", "m2:5,6,x"}, code: 2,
			want: []string{`mapping "m2:5,6,x": partition "x" is not a number`}},
		{name: "mapping range reversed", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:4-0", "m2:5-9"}, code: 2,
			want: []string{`mapping "m1:4-0"`, `"4-0"`}},
		{name: "mapping duplicate partition", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-5", "m2:5-9"}, code: 2,
			want: []string{`"m2" partition 5: partition 5 is already mapped to "m1"`}},
		{name: "mapping out of range", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-9", "m2:10"}, code: 2,
			want: []string{`"m2" partition 10: out of range: partitions are 0 to 9`}},
		{name: "mapping with a gap", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-4", "m2:6-9"}, code: 2,
			want: []string{"partitions 5 are not mapped"}},
		{name: "mapping range huge", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-99999999999"}, code: 2,
			want: []string{`mapping "m1:0-99999999999": range "0-99999999999" spans more than`}},
		{name: "elastic mapping duplicate member", args: []string{"elastic", "cm", "PLAIN", "eg", "a:0-1", "a:2-3"}, code: 2,
			want: []string{`"a": member appears in more than one mapping`}},
		{name: "mapping duplicate member", args: []string{"static", "create", "mapped", "ORDERS", "g", "10", "m1:0-4", "m1:5-9"}, code: 2,
			want: []string{`"m1": member appears in more than one mapping`}},
		{name: "mapping lists no partitions", args: []string{"elastic", "create-mapping", "PLAIN", "eg", "a:", "b:0-3"}, code: 2,
			want: []string{`mapping "a:": lists no partitions`}},
		{name: "elastic mapping with a gap", args: []string{"elastic", "cm", "PLAIN", "eg", "a:0-1", "b:3"}, code: 2,
			want: []string{"partitions 2 are not mapped"}},
		{name: "elastic mapping out of range", args: []string{"elastic", "cm", "PLAIN", "eg", "a:0-3", "b:4"}, code: 2,
			want: []string{`"b" partition 4: out of range: partitions are 0 to 3`}},
		{name: "create-mapping on a static group", args: []string{"static", "create-mapping", "ORDERS", "sg", "m1:0-9"}, code: 2,
			want: []string{`unknown command "create-mapping" for "cg static"`}},
		{name: "create-mapping naming a static group", args: []string{"elastic", "create-mapping", "ORDERS", "sg", "m1:0-9"}, code: 1,
			want: []string{`no elastic group "sg" on stream "ORDERS"`, "cg elastic ls ORDERS"}},

		// Filters.
		{name: "filter with an empty token", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "--filter", "orders..x"}, code: 2,
			want: []string{`filter "orders..x": has an empty token`}},
		{name: "filter with '>' inside", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "--filter", "orders.>.x"}, code: 2,
			want: []string{`filter "orders.>.x": '>' may only be the last token`}},
		{name: "filter with a wildcard inside a token", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "--filter", "orders.a*"}, code: 2,
			want: []string{`filter "orders.a*": wildcards '*' and '>' must stand alone`}},
		{name: "static filters overlap", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1", "--filter", "orders.*", "--filter", "orders.>"}, code: 2,
			want: []string{`filter "orders.*": overlaps filter "orders.>"`}},
		{name: "empty filter", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", ""}, code: 2,
			want: []string{`partitioning filter ""`, "must not be empty"}},
		{name: "wildcard index out of range", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.*:2"}, code: 2,
			want: []string{"wildcard index 2 out of range: the filter has 1 '*' wildcard(s)"}},
		{name: "wildcard index twice", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.*.*:1,1"}, code: 2,
			want: []string{"wildcard index 1 listed twice"}},
		{name: "wildcard index not a number", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.*:one"}, code: 2,
			want: []string{`wildcard index "one" is not a number`}},
		{name: "filter with no wildcard", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.x"}, code: 2,
			want: []string{`partitioning filter "plain.x": needs a '*' wildcard`}},
		{name: "elastic filters overlap", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.*", "--filter", "plain.>"}, code: 2,
			want: []string{`"plain.*" and "plain.>": overlap`}},

		// Unknown streams, groups and members.
		{name: "unknown stream, ls", args: []string{"static", "ls", "NOPE"}, code: 1,
			want: []string{`stream not found: "NOPE"`}},
		{name: "unknown stream, create", args: []string{"static", "create", "balanced", "NOPE", "g", "10", "m1"}, code: 1,
			want: []string{`stream not found: "NOPE"`}},
		{name: "unknown stream, elastic create", args: []string{"elastic", "create", "NOPE", "g", "4"}, code: 1,
			want: []string{`stream not found: "NOPE"`}},
		{name: "unknown group, info", args: []string{"static", "info", "ORDERS", "nosuch"}, code: 1,
			want: []string{`no static group "nosuch" on stream "ORDERS"`, "cg static ls ORDERS"}},
		{name: "unknown group, elastic add", args: []string{"elastic", "add", "PLAIN", "nosuch", "a"}, code: 1,
			want: []string{`no elastic group "nosuch" on stream "PLAIN"`}},
		{name: "unknown group, delete", args: []string{"static", "delete", "ORDERS", "nosuch", "--force"}, code: 1,
			want: []string{`no static group "nosuch" on stream "ORDERS"`}},
		{name: "unknown member, member-info", args: []string{"static", "member-info", "ORDERS", "sg", "zz"}, code: 1,
			want: []string{`"zz" is not a member`, "cg static info ORDERS sg"}},
		{name: "unknown member, consume", args: []string{"static", "consume", "ORDERS", "sg", "zz"}, code: 1,
			want: []string{`"zz" is not a member`}},
		{name: "unknown member, step-down", args: []string{"elastic", "step-down", "PLAIN", "eg", "zz"}, code: 1,
			want: []string{`"zz" is not a member of elastic group "eg"`}},
		{name: "unknown stream, consume", args: []string{"elastic", "consume", "NOPE", "g", "a"}, code: 1,
			want: []string{`stream not found: "NOPE"`}},
		{name: "unknown group, --json", args: []string{"elastic", "info", "PLAIN", "nosuch", "--json"}, code: 1,
			want: []string{`no elastic group "nosuch" on stream "PLAIN"`}},
		// Nothing pinned is what a step-down asks for: it says so, exit 0.
		{name: "step-down of a member that never joined", args: []string{"static", "step-down", "ORDERS", "sg", "m1"}, code: 0,
			want: []string{`nothing to step down: member "m1" has no consumer sg-m1: no instance is running`}},
		{name: "work stream gone, info", args: []string{"elastic", "info", "PLAIN", "orphan"}, code: 1,
			want: []string{"work stream PLAIN-orphan", "missing", "re-run the group's create"}},
		{name: "work stream gone, consume", args: []string{"elastic", "consume", "PLAIN", "orphan", "a"}, code: 1,
			want: []string{"work stream PLAIN-orphan", "delete and recreate"}},
		{name: "unstamped stream for a static group", args: []string{"static", "create", "balanced", "PLAIN", "g", "10", "m1"}, code: 1,
			want: []string{`stream "PLAIN" has no subject transform`}},
		{name: "partition count differs from the stream's", args: []string{"static", "create", "balanced", "ORDERS", "g", "8", "m1"}, code: 1,
			want: []string{"partitions into 10", "max-members is 8"}},

		// The wrong kind of group.
		{name: "static info on an elastic group", args: []string{"static", "info", "PLAIN", "eg"}, code: 1,
			want: []string{`no static group "eg" on stream "PLAIN"`}},
		{name: "static consume on an elastic group", args: []string{"static", "consume", "PLAIN", "eg", "a"}, code: 1,
			want: []string{`no static group "eg" on stream "PLAIN"`}},
		{name: "static delete on an elastic group", args: []string{"static", "delete", "PLAIN", "eg", "--force"}, code: 1,
			want: []string{`no static group "eg" on stream "PLAIN"`}},
		{name: "elastic info on a static group", args: []string{"elastic", "info", "ORDERS", "sg"}, code: 1,
			want: []string{`no elastic group "sg" on stream "ORDERS"`}},
		{name: "elastic add on a static group", args: []string{"elastic", "add", "ORDERS", "sg", "m3"}, code: 1,
			want: []string{`no elastic group "sg" on stream "ORDERS"`}},
		{name: "elastic delete on a static group", args: []string{"elastic", "rm", "ORDERS", "sg", "--force"}, code: 1,
			want: []string{`no elastic group "sg" on stream "ORDERS"`}},
		{name: "elastic consume on a static group", args: []string{"elastic", "consume", "ORDERS", "sg", "m1"}, code: 1,
			want: []string{`no elastic group "sg" on stream "ORDERS"`}},

		// Existing groups asked for something else.
		{name: "static create differing from the stored group", args: []string{"static", "create", "balanced", "ORDERS", "sg", "10", "m1", "m3"}, code: 1,
			want: []string{"group exists with a different configuration", "members [m1 m2] (asked [m1 m3])"}},
		{name: "elastic create differing from the stored group", args: []string{"elastic", "create", "PLAIN", "eg", "8", "--filter", "plain.*:1"}, code: 1,
			want: []string{"group exists with a different configuration", "max-members 4 (asked 8)"}},
		{name: "drop a non-member", args: []string{"elastic", "drop", "PLAIN", "eg", "zz"}, code: 1,
			want: []string{"none of [zz] is a member of elastic group \"eg\""}},
		{name: "drop from a mapped group", args: []string{"elastic", "drop", "PLAIN", "emap", "a"}, code: 1,
			want: []string{`elastic group "emap" uses member mappings`}},
		{name: "add beyond max-members", args: []string{"elastic", "add", "PLAIN", "efull", "z"}, code: 2,
			want: []string{"more members than partitions (max-members is 2)"}},
		{name: "dynamic join of a full group", args: []string{"elastic", "consume", "PLAIN", "efull", "z", "--dynamic"}, code: 2,
			want: []string{`elastic group "efull" has 2 partitions and as many members already`}},
		{name: "dynamic with a session timeout below the refresh's", args: []string{"elastic", "consume", "PLAIN", "eg", "c", "--dynamic", "--session-timeout", "1s"}, code: 2,
			want: []string{"--session-timeout 1s is too short", "use 2s or more"}},
		{name: "session timeout without dynamic", args: []string{"elastic", "consume", "PLAIN", "eg", "c", "--session-timeout", "5s"}, code: 2,
			want: []string{"--session-timeout applies only with --dynamic"}},
		{name: "dynamic on a static group", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--dynamic"}, code: 2,
			want: []string{"static group sg has a fixed membership"}},
		{name: "dynamic with a member name the group refuses", args: []string{"elastic", "consume", "PLAIN", "eg", "bad.name", "--dynamic"}, code: 2,
			want: []string{"member name"}},
		{name: "add a member already there", args: []string{"elastic", "add", "PLAIN", "eg", "a"}, code: 0,
			want: []string{"a: already a member"}, out: []string{"a=0,1  b=2,3", "Moved:    none"}},
		{name: "add to a mapped group", args: []string{"elastic", "add", "PLAIN", "emap", "c"}, code: 1,
			want: []string{`elastic group "emap" uses member mappings`}},
		{name: "delete-mapping of an unmapped group", args: []string{"elastic", "dm", "PLAIN", "eg"}, code: 1,
			want: []string{`elastic group "eg" has no member mappings`}},

		// Unreadable stored configurations.
		{name: "static info, garbage JSON", args: []string{"static", "info", "ORDERS", "broken"}, code: 1,
			want: []string{"key ORDERS.broken in bucket static-consumer-groups is not valid JSON"}},
		{name: "static consume, garbage JSON", args: []string{"static", "consume", "ORDERS", "broken", "m1"}, code: 1,
			want: []string{"key ORDERS.broken in bucket static-consumer-groups is not valid JSON"}},
		{name: "static member-info, garbage JSON", args: []string{"static", "minfo", "ORDERS", "broken", "m1"}, code: 1,
			want: []string{"key ORDERS.broken in bucket static-consumer-groups is not valid JSON"}},
		{name: "static info, invalid config", args: []string{"static", "info", "ORDERS", "zero"}, code: 1,
			want: []string{"key ORDERS.zero in bucket static-consumer-groups", "max_members 0: must be at least 1"}},
		{name: "static create over garbage JSON", args: []string{"static", "create", "balanced", "ORDERS", "broken", "10", "m1"}, code: 1,
			want: []string{"key ORDERS.broken in bucket static-consumer-groups is not valid JSON"}},
		{name: "static ls, unreadable rows", args: []string{"static", "ls", "ORDERS"}, code: 0,
			out: []string{"broken", "unreadable", "key ORDERS.broken", "zero", "key ORDERS.zero", "sg", "m1 m2"}},
		{name: "static ls --json, unreadable rows", args: []string{"static", "ls", "ORDERS", "--json"}, code: 0,
			out: []string{`"group": "broken"`, `"error": "stored group configuration is invalid: key ORDERS.broken`}},
		{name: "elastic info, garbage JSON", args: []string{"elastic", "info", "PLAIN", "broken"}, code: 1,
			want: []string{"key PLAIN.broken in bucket elastic-consumer-groups is not valid JSON"}},
		{name: "elastic consume, garbage JSON", args: []string{"elastic", "consume", "PLAIN", "broken", "a"}, code: 1,
			want: []string{"key PLAIN.broken in bucket elastic-consumer-groups is not valid JSON"}},
		{name: "elastic consume, invalid config", args: []string{"elastic", "consume", "PLAIN", "badwc", "a"}, code: 1,
			want: []string{"key PLAIN.badwc in bucket elastic-consumer-groups", "wildcard index 7 out of range"}},
		{name: "elastic add, garbage JSON", args: []string{"elastic", "add", "PLAIN", "broken", "a"}, code: 1,
			want: []string{"key PLAIN.broken in bucket elastic-consumer-groups is not valid JSON"}},
		{name: "elastic create over garbage JSON", args: []string{"elastic", "create", "PLAIN", "broken", "4", "--filter", "plain.*:1"}, code: 1,
			want: []string{"key PLAIN.broken in bucket elastic-consumer-groups is not valid JSON"}},
		{name: "elastic ls, unreadable rows", args: []string{"elastic", "ls", "PLAIN"}, code: 0,
			out: []string{"broken", "unreadable", "key PLAIN.broken", "badwc", "key PLAIN.badwc", "eg", "a b"}},

		// Arguments, flags and commands.
		{name: "missing group", args: []string{"static", "info", "ORDERS"}, code: 2,
			want: []string{"missing <group>: cg static info takes <stream> <group>"}},
		{name: "missing member", args: []string{"static", "create", "balanced", "ORDERS", "g", "10"}, code: 2,
			want: []string{"missing <member>"}},
		{name: "missing members to add", args: []string{"elastic", "add", "PLAIN", "eg"}, code: 2,
			want: []string{"missing <member>"}},
		{name: "too many arguments", args: []string{"static", "info", "ORDERS", "sg", "extra"}, code: 2,
			want: []string{"too many arguments (3): cg static info takes <stream> <group>"}},
		{name: "unknown flag", args: []string{"static", "info", "ORDERS", "sg", "--bogus"}, code: 2,
			want: []string{"unknown flag: --bogus"}},
		{name: "unknown shorthand flag", args: []string{"elastic", "ls", "PLAIN", "-z"}, code: 2,
			want: []string{"unknown shorthand flag: 'z' in -z"}},
		{name: "flag without its value", args: []string{"static", "consume", "ORDERS", "sg", "m1", "--sleep"}, code: 2,
			want: []string{"flag needs an argument: --sleep"}},
		{name: "bad boolean flag", args: []string{"static", "info", "ORDERS", "sg", "--no-color=maybe"}, code: 2,
			want: []string{`invalid argument "maybe" for "--no-color" flag`}, not: []string{"strconv."}},
		{name: "help on an unknown command", args: []string{"help", "nosuch"}, code: 2,
			want: []string{`unknown command "nosuch" for "cg"`}},
		{name: "unknown command", args: []string{"elastic", "grow", "PLAIN", "eg"}, code: 2,
			want: []string{`unknown command "grow" for "cg elastic"`}},
		{name: "unknown kind", args: []string{"dynamic", "ls", "ORDERS"}, code: 2,
			want: []string{`unknown command "dynamic" for "cg"`}},
		{name: "static delete off a terminal", args: []string{"static", "delete", "ORDERS", "sg"}, code: 2,
			want: []string{"refusing to delete static group sg on ORDERS without confirmation", "add --force"}},
		{name: "elastic delete off a terminal", args: []string{"elastic", "delete", "PLAIN", "eg"}, code: 2,
			want: []string{"refusing to delete elastic group eg on PLAIN without confirmation", "add --force"}},

		// Servers that cannot serve.
		{name: "server down", args: []string{"static", "ls", "ORDERS"}, env: []string{"NATS_URL=nats://" + down}, code: 1,
			want: []string{"cannot connect to NATS at nats://" + down, "connection refused"}},
		{name: "server down, --server", args: []string{"elastic", "info", "PLAIN", "eg", "--server", down}, code: 1,
			want: []string{"cannot connect to NATS at " + down, "connection refused"}},
		{name: "unknown JetStream domain", args: []string{"static", "ls", "ORDERS", "--js-domain", "nowhere"}, code: 1,
			want: []string{`no JetStream answers for domain "nowhere"`, "--js-domain"}},
		{name: "unknown NATS context", args: []string{"static", "ls", "ORDERS", "--context", "nosuch"}, code: 1,
			want: []string{`unknown NATS context "nosuch"`}},
		{name: "server too old, static create", args: []string{"static", "create", "balanced", "ORDERS", "g", "10", "m1"}, env: []string{"NATS_URL=" + old}, code: 1,
			want: []string{"server too old: server is 2.10.22, pinned consumers need nats-server 2.11 or later"}},
		{name: "server too old, elastic create", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.*:1"}, env: []string{"NATS_URL=" + old}, code: 1,
			want: []string{"server too old: server is 2.10.22"}},
		{name: "server too old, consume", args: []string{"static", "consume", "ORDERS", "sg", "m1"}, env: []string{"NATS_URL=" + old}, code: 1,
			want: []string{"server too old: server is 2.10.22"}},
		{name: "server too old for whole-subject partitions", args: []string{"elastic", "create", "PLAIN", "g", "4", "--filter", "plain.>"}, env: []string{"NATS_URL=" + old211}, code: 1,
			want: []string{"server too old: server is 2.11.4", "{{partition(N)}} without token indexes needs nats-server 2.12"}},
	}
}

func TestBadInputIsRefusedChangingNothing(t *testing.T) {
	url, js := world(t)
	before := takeSnapshot(t, js)
	all := cases(t, url)
	if len(all) < 40 {
		t.Fatalf("only %d cases", len(all))
	}
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, append([]string{"NATS_URL=" + url}, tc.env...), tc.args...)
			if r.Code != tc.code {
				t.Errorf("exit %d, want %d\n%s", r.Code, tc.code, r)
			}
			// Nothing here should wait on a timeout: a refusal is prompt.
			if r.Took > 4*time.Second {
				t.Errorf("took %s to refuse\n%s", r.Took, r)
			}
			if tc.code == 0 {
				for _, w := range tc.out {
					if !strings.Contains(r.Out, w) {
						t.Errorf("stdout lacks %q\n%s", w, r)
					}
				}
				for _, w := range tc.want {
					if !strings.Contains(r.Err, w) {
						t.Errorf("stderr lacks %q\n%s", w, r)
					}
				}
				if strings.Contains(r.Err, "error:") {
					t.Errorf("an error on success\n%s", r)
				}
			} else {
				checkErrorLine(t, r, tc.code, tc.want, tc.not)
			}
			if diff := before.diff(takeSnapshot(t, js)); len(diff) > 0 {
				t.Errorf("cg %q changed the server:\n%s", tc.args, strings.Join(diff, "\n"))
				before = takeSnapshot(t, js) // report each change once
			}
		})
	}
}

// checkErrorLine checks that a refusal printed nothing on stdout and one
// error line on stderr (plus the usage hint for usage errors) holding
// every wanted substring and none of the unwanted.
func checkErrorLine(t *testing.T, r result, code int, want, not []string) {
	t.Helper()
	if r.Out != "" {
		t.Errorf("a refusal printed on stdout\n%s", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.Err, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "error: ") {
		t.Errorf("stderr does not start with one error line\n%s", r)
	}
	switch {
	case len(lines) > 2:
		t.Errorf("error spans %d lines\n%s", len(lines), r)
	case len(lines) == 2 && !usageHint.MatchString(lines[1]):
		t.Errorf("second line is not the usage hint\n%s", r)
	case code == 2 && len(lines) != 2:
		t.Errorf("usage error without the usage hint\n%s", r)
	case code != 2 && len(lines) != 1:
		t.Errorf("operation failure with more than one line\n%s", r)
	}
	for _, w := range want {
		if !strings.Contains(lines[0], w) {
			t.Errorf("error line lacks %q\n%s", w, r)
		}
	}
	for _, w := range not {
		if strings.Contains(lines[0], w) {
			t.Errorf("error line holds %q\n%s", w, r)
		}
	}
}
