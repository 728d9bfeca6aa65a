package hints

import (
	"errors"
	"fmt"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// The CLI's wording of each remedy, as cg printed it when the engine
// still held it.
func TestRemedyWordsTheCLI(t *testing.T) {
	in := func(code health.RemedyCode) *health.Remedy {
		return &health.Remedy{Code: code, Kind: "elastic", Stream: "S", Group: "g", Member: "m1", MaxMembers: 4}
	}
	withTail := in(health.RemedyDeleteAndCreate)
	withTail.Lead, withTail.Tail = "these cannot change in place: ", " with fewer partitions or filters"
	upgrade := &health.Remedy{Code: health.RemedyUpgradeServer, Server: "2.11"}
	for _, tc := range []struct {
		r    *health.Remedy
		want string
	}{
		{in(health.RemedyListGroups), "list the groups with 'cg static ls S' and 'cg elastic ls S'"},
		{in(health.RemedyRecreateStreamOrDelete), "recreate the stream, or remove the group with 'cg elastic delete S g --force'"},
		{in(health.RemedyRecreateInvalidConfig), "delete it with 'cg elastic delete S g --force' and create the group again"},
		{in(health.RemedyRecreateElastic), "delete and recreate the group ('cg elastic delete S g --force', then 'cg elastic create ...')"},
		{in(health.RemedyRepairWorkStreamSources), "re-run the group's 'cg elastic create S g 4 ...' (it repairs the work stream's sources), or delete and recreate the group ('cg elastic delete S g --force', then 'cg elastic create ...')"},
		{in(health.RemedyPartitionLayout), "recreate the group with the partition layout, one single-filter consumer per partition ('cg elastic delete S g --force', then 'cg elastic create ... --layout partition'; docs/layouts.md)"},
		{in(health.RemedyAddMembers), "add members with 'cg elastic add S g <member>...'"},
		{in(health.RemedyStaticNoMembers), "static membership never changes: delete and recreate the group with members ('cg static delete S g --force')"},
		{in(health.RemedyStartMember), "start an instance: cg elastic consume S g m1"},
		{withTail, "these cannot change in place: delete the group ('cg elastic delete S g --force') and create it again with fewer partitions or filters"},
		{in(health.RemedyRemakeWorkStream), "run the group's 'cg elastic create S g 4 ...' again (it remakes a lost work stream), or delete and recreate the group"},
		{in(health.RemedyWorkStreamNotOwned), "delete the group ('cg elastic delete S g --force', which keeps the stream) and create it under another name, or remove the stream if it is not needed and re-run the group's create"},
		{in(health.RemedyRepairWorkStreamSettings), "re-run the group's create ('cg elastic create S g 4 ...' with its filters and caps): it repairs them in place"},
		{upgrade, fmt.Sprintf("upgrade the server to %d.%d or later; on 2.11, delete the group and create it again naming the wildcards to hash (elastic: --filter 'orders.*:1'; static: a stream transform {{partition(N,1)}}), since the same create fails on this server", cg.MinWholeSubjectPartition.Major, cg.MinWholeSubjectPartition.Minor)},
		{in(cg.RemedyReleaseParked), "fix what makes the handler fail, then retry the parked messages with 'cg elastic release S g m1', or dead-letter them with 'cg elastic release S g m1 --skip'"},
		{in(cg.RemedyStartDynamicOrDrop), "start a dynamic instance of any member ('cg elastic consume S g <member> --dynamic'), which drops m1 and hands its partitions to the running members, or drop it: cg elastic drop S g m1"},
		{nil, "engine"},
		{&health.Remedy{Code: "unknown"}, "engine"},
	} {
		if got := Remedy(tc.r, "engine"); got != tc.want {
			t.Errorf("%v:\n got %s\nwant %s", tc.r, got, tc.want)
		}
	}
}

// An engine error keeps its text around the fix, however it is wrapped;
// only the fix is worded as cg command lines.
func TestErrorWordsTheCLI(t *testing.T) {
	_, err := cg.StreamPartitioning(&jetstream.StreamInfo{Config: jetstream.StreamConfig{Name: "S"}})
	if !errors.Is(err, cg.ErrStreamNotReady) {
		t.Fatalf("not ErrStreamNotReady: %v", err)
	}
	want := cg.ErrStreamNotReady.Error() + `: stream "S" has no subject transform; static groups need one whose destination starts with {{partition(N,...)}}, e.g. --transform-source 'orders.*' --transform-destination '{{partition(10,1)}}.orders.{{wildcard(1)}}' (or use an elastic group, which works on any stream)`
	if got := Error(fmt.Errorf("create: %w", err)); got != "create: "+want {
		t.Errorf("got  %s\nwant create: %s", got, want)
	}
	join := &health.Error{Err: cg.ErrStreamNotReady, Fix: "the engine's fix",
		Remedy: health.Remedy{Code: health.RemedyRepairWorkStreamJoin, Stream: "S", Group: "g", MaxMembers: 4, Filters: []string{"a.*:1", "b"}, Lead: "lead; "}}
	if got := Error(join); got != "lead; re-run `cg elastic create S g 4 --filter 'a.*:1' --filter 'b'` (it repairs the work stream), or delete and recreate the group" {
		t.Errorf("join: %s", got)
	}
	if got := Error(errors.New("plain")); got != "plain" {
		t.Errorf("plain: %s", got)
	}
}
