package group

import (
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg/health"
)

// TestGoldenWatchFrames: watch's full frame, rendered from fixed snapshots
// (so nothing is normalised): a static group with a stalled, a lagging
// and an unowned partition, a standby and pin events; an elastic group
// with a member that has no instance. go test ./cmd/group -run Golden
// -update rewrites them.
func TestGoldenWatchFrames(t *testing.T) {
	for name, s := range goldenSnapshots() {
		var b strings.Builder
		renderSnapshot(&b, render.NewColorScheme(false), s, time.Second)
		clitest.Golden(t, "watch-frame-"+name, b.String())
	}
}

// TestGoldenWatchJSON: watch --json's line for the same snapshots, with
// rates set so that every field shows.
func TestGoldenWatchJSON(t *testing.T) {
	rate, ack := -1.5, 12.25
	for name, s := range goldenSnapshots() {
		s.AckRate, s.IntervalSeconds = &ack, 1
		s.Members = append([]health.MemberSnapshot(nil), s.Members...)
		s.Members[0].AckRate = &ack
		s.Members[0].Lag = &health.Lag{Pending: 5, OldestSeq: 1, Oldest: s.Time.Add(-3 * time.Second), AgeSeconds: 3}
		s.Partitions = append([]health.PartitionSnapshot(nil), s.Partitions...)
		s.Partitions[1].Rate = &rate
		var b strings.Builder
		if err := encodeSnapshot(render.NewJSONStream(&b), s); err != nil {
			t.Fatal(err)
		}
		clitest.Golden(t, "watch-json-"+name, b.String())
	}
}

// goldenSnapshots are fixed samples: a static group with a stalled, a
// lagging and an unowned partition, a standby and pin events; an elastic
// group with a member that has no instance.
func goldenSnapshots() map[string]health.Snapshot {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	static := health.Snapshot{Seq: 4, Time: at, Kind: "static", Stream: "ORDERS", Group: "g", Pending: 9,
		Statuses: map[health.PartitionStatus]int{health.StatusOK: 3, health.StatusStalled: 1, health.StatusLagging: 1, health.StatusUnowned: 1},
		Members: []health.MemberSnapshot{
			{Member: "m1", Partitions: []int{0, 1, 2}, Status: health.StatusStalled, Live: true, Instances: 2, Standbys: 1, PinID: "abcdefghijkl", PinnedSince: at.Add(-90 * time.Second)},
			{Member: "m2", Partitions: []int{3, 4}, Status: health.StatusLagging, Live: true, Instances: 1, PinID: "mnopqrstuvwx", PinnedSince: at.Add(-4 * time.Second)},
			{Member: "m3", Partitions: []int{5}, Status: health.StatusUnowned},
		},
		Events: []health.PinEvent{
			{Time: at.Add(-5 * time.Second), Event: "unpinned", Member: "m2", Reason: "admin"},
			{Time: at.Add(-4 * time.Second), Event: "pinned", Member: "m2", PinID: "mnopqrstuvwx"},
		}}
	for p := range 6 {
		ps := health.PartitionSnapshot{Partition: p, Owner: "m1", Status: health.StatusOK, Known: true}
		switch p {
		case 1:
			ps.Status, ps.Lag = health.StatusStalled, health.Lag{Pending: 5, OldestSeq: 1, Oldest: at.Add(-3 * time.Second), AgeSeconds: 3}
		case 3, 4:
			ps.Owner = "m2"
			if p == 4 {
				ps.Status, ps.Lag = health.StatusLagging, health.Lag{Pending: 2, OldestSeq: 9, Oldest: at.Add(-time.Second), AgeSeconds: 1}
			}
		case 5:
			ps.Owner, ps.Status, ps.Lag = "m3", health.StatusUnowned, health.Lag{Pending: 2, OldestSeq: 7, Oldest: at.Add(-2 * time.Second), AgeSeconds: 2}
		}
		static.Partitions = append(static.Partitions, ps)
	}
	elastic := health.Snapshot{Seq: 1, Time: at, Kind: "elastic", Stream: "EVENTS", Group: "e", Pending: 0,
		Statuses: map[health.PartitionStatus]int{health.StatusOK: 2, health.StatusUnowned: 2},
		Members: []health.MemberSnapshot{
			{Member: "m1", Partitions: []int{0, 1}, Status: health.StatusOK, Live: true, Instances: 1, PinID: "abcdefghijkl", PinnedSince: at.Add(-time.Hour)},
			{Member: "m2", Partitions: []int{2, 3}, Status: health.StatusUnowned},
		}}
	for p := range 4 {
		ps := health.PartitionSnapshot{Partition: p, Owner: "m1", Status: health.StatusOK, Known: true}
		if p >= 2 {
			ps.Owner, ps.Status = "m2", health.StatusUnowned
		}
		elastic.Partitions = append(elastic.Partitions, ps)
	}
	// Dynamic membership: m1 added itself and was seen 1.2 s ago, m2 is
	// an operator's member with a running --dynamic instance, m3 added
	// itself and has no liveness record left.
	dynamic := health.Snapshot{Seq: 2, Time: at, Kind: "elastic", Stream: "EVENTS", Group: "d", Pending: 0,
		Statuses: map[health.PartitionStatus]int{health.StatusOK: 2, health.StatusUnowned: 1},
		Members: []health.MemberSnapshot{
			{Member: "m1", Partitions: []int{0}, Status: health.StatusOK, Live: true, Instances: 1, PinID: "abcdefghijkl", PinnedSince: at.Add(-time.Minute),
				Dynamic: true, LastSeen: at.Add(-1200 * time.Millisecond)},
			{Member: "m2", Partitions: []int{1}, Status: health.StatusOK, Live: true, Instances: 1, PinID: "mnopqrstuvwx", PinnedSince: at.Add(-time.Minute),
				LastSeen: at.Add(-300 * time.Millisecond)},
			{Member: "m3", Partitions: []int{2}, Status: health.StatusUnowned, Dynamic: true},
		}}
	for p, m := range []string{"m1", "m2", "m3"} {
		ps := health.PartitionSnapshot{Partition: p, Owner: m, Status: health.StatusOK, Known: true}
		if m == "m3" {
			ps.Status = health.StatusUnowned
		}
		dynamic.Partitions = append(dynamic.Partitions, ps)
	}
	return map[string]health.Snapshot{"static": static, "elastic": elastic, "dynamic": dynamic}
}
