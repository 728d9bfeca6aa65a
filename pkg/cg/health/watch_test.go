package health_test

import (
	"slices"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
)

// groupAt builds the GroupInfo of a 4-partition group at second sec:
// m1 owns 0-1, m2 owns 2-3; pending[p] is partition p's backlog.
func groupAt(sec int, m1, m2 health.MemberStatus, pending ...uint64) health.GroupInfo {
	gi := health.GroupInfo{Kind: "static", Stream: "S", Group: "g", Partitions: 4,
		Owners:    []string{"m1", "m1", "m2", "m2"},
		SampledAt: time.Unix(1000+int64(sec), 0)}
	m1.Member, m1.Partitions, m1.Consumer = "m1", []int{0, 1}, "g-m1"
	m2.Member, m2.Partitions, m2.Consumer = "m2", []int{2, 3}, "g-m2"
	gi.Members = []health.MemberStatus{m1, m2}
	for p, n := range pending {
		gi.PartitionLag = append(gi.PartitionLag, health.PartitionLag{Partition: p, Owner: gi.Owners[p], Known: true, Lag: health.Lag{Pending: n}})
	}
	return gi
}

// running is a member with a live, pinned instance at the given position.
func running(delivered, ackFloor uint64, ackPending int) health.MemberStatus {
	return health.MemberStatus{ConsumerExists: true, Active: true, Pinned: true, PinID: "pin", Waiting: 1,
		Delivered: delivered, AckFloor: ackFloor, AckPending: ackPending, AckFloorConsumerSeq: ackFloor}
}

func statuses(s health.Snapshot) []health.PartitionStatus {
	var out []health.PartitionStatus
	for _, p := range s.Partitions {
		out = append(out, p.Status)
	}
	return out
}

func TestSamplerStalledNeedsAWindowWithoutProgress(t *testing.T) {
	s := health.NewSampler()
	var snap health.Snapshot
	for i := range health.StatusWindow {
		// m1 works (its position moves); m2 holds one message and moves not.
		snap = s.Add(groupAt(i, running(uint64(10+i), uint64(10+i), 0), running(5, 4, 1), 0, 3, 7, 0))
		if i < health.StatusWindow-1 && snap.Partitions[2].Status != health.StatusOK {
			t.Fatalf("sample %d: stalled before a full window: %v", i, statuses(snap))
		}
	}
	want := []health.PartitionStatus{health.StatusOK, health.StatusOK, health.StatusStalled, health.StatusOK}
	if got := statuses(snap); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v (partition 3 has nothing pending)", got, want)
	}
	if snap.Members[1].Status != health.StatusStalled || snap.Members[0].Status != health.StatusOK || snap.Statuses[health.StatusStalled] != 1 {
		t.Fatalf("members %+v counts %v", snap.Members, snap.Statuses)
	}
	// One ack and it is no longer stalled.
	snap = s.Add(groupAt(5, running(15, 15, 0), running(6, 5, 1), 0, 3, 6, 0))
	if snap.Partitions[2].Status != health.StatusOK {
		t.Fatalf("after progress: %v", statuses(snap))
	}
}

func TestSamplerLaggingWhenBacklogOnlyGrows(t *testing.T) {
	s := health.NewSampler()
	var snap health.Snapshot
	for i := range health.StatusWindow {
		// m1 acks every second, yet partition 0 grows and partition 1
		// goes up and down; m2 drains partition 2.
		snap = s.Add(groupAt(i, running(uint64(10+i), uint64(10+i), 0), running(uint64(20+i), uint64(20+i), 0),
			uint64(5+i*2), uint64(4+i%2), uint64(9-i), 0))
	}
	want := []health.PartitionStatus{health.StatusLagging, health.StatusOK, health.StatusOK, health.StatusOK}
	if got := statuses(snap); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if r := snap.Partitions[0].Rate; r == nil || *r != 2 {
		t.Fatalf("partition 0 rate %v, want +2/s", r)
	}
	if r := snap.Partitions[2].Rate; r == nil || *r != -1 {
		t.Fatalf("partition 2 rate %v, want -1/s", r)
	}
	if r := snap.Members[0].AckRate; r == nil || *r != 1 {
		t.Fatalf("m1 ack rate %v, want 1/s", r)
	}
	if snap.AckRate == nil || *snap.AckRate != 2 || snap.IntervalSeconds != 1 {
		t.Fatalf("group ack rate %v interval %v", snap.AckRate, snap.IntervalSeconds)
	}
}

func TestSamplerUnownedAndUnknown(t *testing.T) {
	s := health.NewSampler()
	noInstance := health.MemberStatus{ConsumerExists: true} // consumer left behind, nothing pulling
	gi := groupAt(0, noInstance, health.MemberStatus{}, 1, 0, 2, 0)
	gi.PartitionLag[1].Known = false
	snap := s.Add(gi)
	want := []health.PartitionStatus{health.StatusUnowned, health.StatusUnknown, health.StatusUnowned, health.StatusUnowned}
	if got := statuses(snap); !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if snap.Members[0].Live || snap.Members[1].Status != health.StatusUnowned || snap.Partitions[2].Reason == "" {
		t.Fatalf("members %+v partitions %+v", snap.Members, snap.Partitions)
	}
	// A group with no members owns nothing; its backlog still counts.
	gi = health.GroupInfo{Partitions: 2, Owners: []string{"", ""}, PartitionLag: []health.PartitionLag{{Partition: 0, Known: true, Lag: health.Lag{Pending: 4}}, {Partition: 1, Known: true}}}
	snap = health.NewSampler().Add(gi)
	if snap.Statuses[health.StatusUnowned] != 2 || snap.Pending != 4 {
		t.Fatalf("memberless group: %+v", snap)
	}
}

func TestSamplerPinEventsOfTheGroupOnly(t *testing.T) {
	s := health.NewSampler()
	s.AddPin(health.PinEvent{Event: "pinned", Consumer: "g-m2", PinID: "a"})
	s.AddPin(health.PinEvent{Event: "pinned", Consumer: "other-m1", PinID: "b"})
	for i := range 15 {
		s.AddPin(health.PinEvent{Event: "unpinned", Consumer: "g-m1", Reason: "admin", PinID: string(rune('c' + i))})
	}
	snap := s.Add(groupAt(0, running(1, 1, 0), running(1, 1, 0), 0, 0, 0, 0))
	if len(snap.Events) != 10 {
		t.Fatalf("%d events, want the latest 10", len(snap.Events))
	}
	for _, e := range snap.Events {
		if e.Consumer == "other-m1" || e.Member != "m1" {
			t.Fatalf("event %+v", e)
		}
	}
}

// A member's dynamic membership reaches its snapshot as the status had it:
// watch and the dashboard show it from there.
func TestSamplerCarriesDynamicMembership(t *testing.T) {
	seen := time.Unix(990, 0).UTC()
	m1 := running(1, 1, 0)
	m1.Dynamic, m1.LastSeen, m1.Instances = true, seen, 2
	snap := health.NewSampler().Add(groupAt(0, m1, running(1, 1, 0), 0, 0, 0, 0))
	if got := snap.Members[0]; !got.Dynamic || !got.LastSeen.Equal(seen) {
		t.Fatalf("m1 in the snapshot: dynamic %v, last seen %v; want true, %v", got.Dynamic, got.LastSeen, seen)
	}
	if got := snap.Members[1]; got.Dynamic || !got.LastSeen.IsZero() {
		t.Fatalf("m2 (an operator's member without records) in the snapshot: dynamic %v, last seen %v", got.Dynamic, got.LastSeen)
	}
}
