package group

// The --json views of info, member-info, step-down, delete and watch: what scripts read, declared
// here in the CLI rather than borrowed from the engine, so that a change
// to an engine struct cannot silently change the CLI's JSON. Each view
// keeps the field names, tags and order the engine types had when the
// commands marshalled them directly (the golden JSON tests hold the bytes).

import (
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
)

// GroupInfoView is info --json: a group's configuration and the state of
// its members.
type GroupInfoView struct {
	Kind         string             `json:"kind"`
	Stream       string             `json:"stream"`
	Group        string             `json:"group"`
	Config       health.GroupConfig `json:"config"`           // the stored configuration, in its on-server form
	Layout       string             `json:"layout,omitempty"` // "partition" (one consumer per partition); absent: member
	Partitions   int                `json:"partitions"`
	Mode         string             `json:"mode"`
	Filters      []string           `json:"filters"`
	Owners       []string           `json:"owners"`
	Members      []MemberStatusView `json:"members"`
	WorkStream   string             `json:"work_stream,omitempty"`
	Backlog      []uint64           `json:"backlog,omitempty"`
	SourcingLag  *uint64            `json:"sourcing_lag,omitempty"`
	PartitionLag []PartitionLagView `json:"partition_lag,omitempty"`
	LagMethod    string             `json:"lag_method,omitempty"`
	LagError     string             `json:"lag_error,omitempty"`
	SampledAt    time.Time          `json:"sampled_at,omitzero"`
	// PoisonPartitions: partitions with dead-lettered or parked messages
	// (consume's retry policy); absent when there are none.
	PoisonPartitions []PartitionPoisonView `json:"poison_partitions,omitempty"`
}

// MemberStatusView is member-info --json, and one member in info --json.
type MemberStatusView struct {
	Member               string    `json:"member"`
	Partitions           []int     `json:"partitions"`
	Consumer             string    `json:"consumer"`
	ConsumerExists       bool      `json:"consumer_exists"`
	Active               bool      `json:"active"`
	Pinned               bool      `json:"pinned"`
	PinID                string    `json:"pin_id,omitempty"`
	PinnedSince          time.Time `json:"pinned_since,omitzero"`
	Waiting              int       `json:"waiting"`
	Standbys             int       `json:"standbys"`
	Pending              uint64    `json:"pending"`
	AckPending           int       `json:"ack_pending"`
	Delivered            uint64    `json:"delivered_stream_seq"`
	AckFloor             uint64    `json:"ack_floor_stream_seq"`
	Filters              []string  `json:"filters"`
	DeliveredConsumerSeq uint64    `json:"delivered_consumer_seq"`
	AckFloorConsumerSeq  uint64    `json:"ack_floor_consumer_seq"`
	Lag                  *LagView  `json:"lag,omitempty"`
	Unusable             string    `json:"unusable,omitempty"`
	// DeadLettered and Parked: the member's poison messages, when any.
	DeadLettered uint64       `json:"dead_lettered,omitempty"`
	Parked       []ParkedView `json:"parked,omitempty"`
	// PartitionConsumers, on a partition-layout group: the consumer of
	// each of the member's partitions and the pin on it.
	PartitionConsumers []PartitionConsumerView `json:"partition_consumers,omitempty"`
	// Dynamic, LastSeen, Instances: dynamic membership (elastic consume
	// --dynamic): the member added itself, the server's time of its
	// instances' latest liveness write, how many records it has.
	Dynamic   bool      `json:"dynamic,omitempty"`
	LastSeen  time.Time `json:"last_seen,omitzero"`
	Instances int       `json:"instances,omitempty"`
}

// PartitionConsumerView is one partition's consumer on a partition-layout
// group.
type PartitionConsumerView struct {
	Partition   int       `json:"partition"`
	Consumer    string    `json:"consumer"`
	Exists      bool      `json:"exists"`
	Pinned      bool      `json:"pinned"`
	PinID       string    `json:"pin_id,omitempty"`
	PinnedSince time.Time `json:"pinned_since,omitzero"`
	Waiting     int       `json:"waiting"`
	Pending     uint64    `json:"pending"`
	AckPending  int       `json:"ack_pending"`
	AckFloor    uint64    `json:"ack_floor_stream_seq"`
}

// LagView is what a member or partition has not acked yet and how old the
// oldest of it is.
type LagView struct {
	Pending    uint64    `json:"pending"`
	OldestSeq  uint64    `json:"oldest_seq,omitempty"`
	Oldest     time.Time `json:"oldest,omitzero"`
	AgeSeconds float64   `json:"age_seconds"`
}

// PartitionLagView is the lag of one partition; the lag's fields sit
// beside the partition's, as the embedded LagView puts them.
type PartitionLagView struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner,omitempty"`
	FromSeq   uint64 `json:"from_seq"`
	Known     bool   `json:"known"`
	LagView
}

// groupInfoView converts the engine's GroupInfo for info --json.
func groupInfoView(gi health.GroupInfo) GroupInfoView {
	v := GroupInfoView{
		Kind: gi.Kind, Stream: gi.Stream, Group: gi.Group, Config: gi.Config, Layout: gi.Layout,
		Partitions: gi.Partitions, Mode: gi.Mode, Filters: gi.Filters, Owners: gi.Owners,
		WorkStream: gi.WorkStream, Backlog: gi.Backlog, SourcingLag: gi.SourcingLag,
		LagMethod: gi.LagMethod, LagError: gi.LagError, SampledAt: gi.SampledAt,
	}
	if gi.Members != nil {
		v.Members = make([]MemberStatusView, len(gi.Members))
		for i, ms := range gi.Members {
			v.Members[i] = memberStatusView(ms)
		}
	}
	if gi.PartitionLag != nil {
		v.PartitionLag = make([]PartitionLagView, len(gi.PartitionLag))
		for i, pl := range gi.PartitionLag {
			v.PartitionLag[i] = PartitionLagView{
				Partition: pl.Partition, Owner: pl.Owner, FromSeq: pl.FromSeq, Known: pl.Known,
				LagView: lagView(pl.Lag),
			}
		}
	}
	return v
}

// memberStatusView converts the engine's MemberStatus for --json.
func memberStatusView(ms health.MemberStatus) MemberStatusView {
	v := MemberStatusView{
		Member: ms.Member, Partitions: ms.Partitions, Consumer: ms.Consumer,
		ConsumerExists: ms.ConsumerExists, Active: ms.Active, Pinned: ms.Pinned,
		PinID: ms.PinID, PinnedSince: ms.PinnedSince, Waiting: ms.Waiting, Standbys: ms.Standbys,
		Pending: ms.Pending, AckPending: ms.AckPending, Delivered: ms.Delivered, AckFloor: ms.AckFloor,
		Filters: ms.Filters, DeliveredConsumerSeq: ms.DeliveredConsumerSeq,
		AckFloorConsumerSeq: ms.AckFloorConsumerSeq, Unusable: ms.Unusable,
		Dynamic: ms.Dynamic, LastSeen: ms.LastSeen, Instances: ms.Instances,
	}
	if ms.Lag != nil {
		l := lagView(*ms.Lag)
		v.Lag = &l
	}
	for _, pc := range ms.PartitionConsumers {
		v.PartitionConsumers = append(v.PartitionConsumers, PartitionConsumerView{Partition: pc.Partition, Consumer: pc.Consumer,
			Exists: pc.Exists, Pinned: pc.Pinned, PinID: pc.PinID, PinnedSince: pc.PinnedSince, Waiting: pc.Waiting, Pending: pc.Pending, AckPending: pc.AckPending, AckFloor: pc.AckFloor})
	}
	return v
}

func lagView(l health.Lag) LagView {
	return LagView{Pending: l.Pending, OldestSeq: l.OldestSeq, Oldest: l.Oldest, AgeSeconds: l.AgeSeconds}
}

// StepDownView is step-down --json.
type StepDownView struct {
	Member        string `json:"member"`
	Consumer      string `json:"consumer"`
	PrevPinID     string `json:"previous_pin_id"`
	NothingPinned bool   `json:"nothing_pinned,omitempty"`
	Why           string `json:"why,omitempty"`
	// Consumers, on a partition-layout group: every partition consumer
	// unpinned.
	Consumers []string `json:"consumers,omitempty"`
}

// stepDownView converts the engine's StepDownResult for --json.
func stepDownView(r cg.StepDownResult) StepDownView {
	return StepDownView{Member: r.Member, Consumer: r.Consumer, PrevPinID: r.PrevPinID, NothingPinned: r.NothingPinned, Why: r.Why, Consumers: r.Consumers}
}

// DeleteView is delete --json.
type DeleteView struct {
	Key        string   `json:"key"`
	Consumers  []string `json:"deleted_consumers"`
	WorkStream string   `json:"deleted_work_stream,omitempty"`
	Kept       []string `json:"kept,omitempty"`
}

// deleteView converts the engine's DeleteResult for --json.
func deleteView(r cg.DeleteResult) DeleteView {
	return DeleteView{Key: r.Key, Consumers: r.Consumers, WorkStream: r.WorkStream, Kept: r.Kept}
}

// SnapshotView is one watch --json line: one sample of a group.
type SnapshotView struct {
	Seq             int                   `json:"seq"`
	Time            time.Time             `json:"time"`
	Kind            string                `json:"kind"`
	Stream          string                `json:"stream"`
	Group           string                `json:"group"`
	IntervalSeconds float64               `json:"interval_seconds"`
	Pending         uint64                `json:"pending"`
	AckRate         *float64              `json:"ack_rate,omitempty"`
	Statuses        map[string]int        `json:"statuses"`
	Members         []MemberSnapshotView  `json:"members"`
	Partitions      []PartitionSampleView `json:"partitions"`
	Events          []PinEventView        `json:"events"`
	LagError        string                `json:"lag_error,omitempty"`
	// PoisonPartitions: as in info --json.
	PoisonPartitions []PartitionPoisonView `json:"poison_partitions,omitempty"`
}

// MemberSnapshotView is one member in a watch --json line.
type MemberSnapshotView struct {
	Member      string    `json:"member"`
	Partitions  []int     `json:"partitions"`
	Status      string    `json:"status"`
	Live        bool      `json:"live"`
	Instances   int       `json:"instances"`
	Standbys    int       `json:"standbys"`
	PinID       string    `json:"pin_id,omitempty"`
	PinnedSince time.Time `json:"pinned_since,omitzero"`
	Lag         *LagView  `json:"lag,omitempty"`
	AckRate     *float64  `json:"ack_rate,omitempty"`
	// DeadLettered and Parked: as in info --json.
	DeadLettered uint64       `json:"dead_lettered,omitempty"`
	Parked       []ParkedView `json:"parked,omitempty"`
	// Dynamic and LastSeen: as in info --json (watch's instances counts
	// the waiting pull requests, so info's count of liveness records is
	// not repeated here).
	Dynamic  bool      `json:"dynamic,omitempty"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// PartitionSampleView is one partition in a watch --json line; the lag's
// fields sit beside the partition's.
type PartitionSampleView struct {
	Partition int    `json:"partition"`
	Owner     string `json:"owner,omitempty"`
	Status    string `json:"status"`
	Reason    string `json:"reason,omitempty"`
	Known     bool   `json:"known"`
	LagView
	Rate *float64 `json:"rate,omitempty"`
}

// PinEventView is one pin change in a watch --json line.
type PinEventView struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
	Member   string    `json:"member,omitempty"`
	Consumer string    `json:"consumer"`
	PinID    string    `json:"pin_id,omitempty"`
	Reason   string    `json:"reason,omitempty"`
}

// snapshotView converts the engine's Snapshot for watch --json.
func snapshotView(s health.Snapshot) SnapshotView {
	v := SnapshotView{
		Seq: s.Seq, Time: s.Time, Kind: s.Kind, Stream: s.Stream, Group: s.Group,
		IntervalSeconds: s.IntervalSeconds, Pending: s.Pending, AckRate: s.AckRate, LagError: s.LagError,
	}
	if s.Statuses != nil {
		v.Statuses = make(map[string]int, len(s.Statuses))
		for st, n := range s.Statuses {
			v.Statuses[string(st)] = n
		}
	}
	if s.Members != nil {
		v.Members = make([]MemberSnapshotView, len(s.Members))
		for i, m := range s.Members {
			v.Members[i] = MemberSnapshotView{
				Member: m.Member, Partitions: m.Partitions, Status: string(m.Status), Live: m.Live,
				Instances: m.Instances, Standbys: m.Standbys, PinID: m.PinID, PinnedSince: m.PinnedSince, AckRate: m.AckRate,
				Dynamic: m.Dynamic, LastSeen: m.LastSeen,
			}
			if m.Lag != nil {
				l := lagView(*m.Lag)
				v.Members[i].Lag = &l
			}
		}
	}
	if s.Partitions != nil {
		v.Partitions = make([]PartitionSampleView, len(s.Partitions))
		for i, p := range s.Partitions {
			v.Partitions[i] = PartitionSampleView{
				Partition: p.Partition, Owner: p.Owner, Status: string(p.Status), Reason: p.Reason,
				Known: p.Known, LagView: lagView(p.Lag), Rate: p.Rate,
			}
		}
	}
	if s.Events != nil {
		v.Events = make([]PinEventView, len(s.Events))
		for i, e := range s.Events {
			v.Events[i] = PinEventView{Time: e.Time, Event: e.Event, Member: e.Member, Consumer: e.Consumer, PinID: e.PinID, Reason: e.Reason}
		}
	}
	return v
}
