package health

import (
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// What a group looks like when observed: its configuration, the state of
// its members on the server and the lag of each partition. cg's info calls
// fill these in (reading the server); the watch sampler and the check read
// them. They are plain data, so an embedder can build one to test against.

// GroupConfig is what static and elastic configurations share (cg.StaticConfig
// and cg.ElasticConfig implement it).
type GroupConfig interface {
	// PartitionCount is N, the fixed number of partitions.
	PartitionCount() int
	// Assignment says which member owns each partition.
	Assignment() partition.Assignment
	// MemberNames lists the configured members.
	MemberNames() []string
	// IsMember reports whether name is configured.
	IsMember(name string) bool
	// Mode is "balanced" (a member list) or "mapped".
	Mode() string
	// SubjectFilters are the filters inside each partition (">" when none).
	SubjectFilters() []string
	// MemberFilters are the consumer filter subjects of a member.
	MemberFilters(member string) []string
}

// MemberStatus is what the server shows of one member.
type MemberStatus struct {
	Member     string `json:"member"`
	Partitions []int  `json:"partitions"`
	Consumer   string `json:"consumer"`
	// ConsumerExists is false until an instance has joined once.
	ConsumerExists bool `json:"consumer_exists"`
	// Active: the consumer exists and has a waiting pull request.
	Active bool `json:"active"`
	// Pinned: the server has pinned an instance of this member.
	Pinned      bool      `json:"pinned"`
	PinID       string    `json:"pin_id,omitempty"`
	PinnedSince time.Time `json:"pinned_since,omitzero"`
	// Waiting is the number of waiting pull requests, about one per
	// running instance; Standbys is that less the pinned one.
	Waiting    int    `json:"waiting"`
	Standbys   int    `json:"standbys"`
	Pending    uint64 `json:"pending"`
	AckPending int    `json:"ack_pending"`
	// Delivered and AckFloor are consumer stream sequences.
	Delivered uint64   `json:"delivered_stream_seq"`
	AckFloor  uint64   `json:"ack_floor_stream_seq"`
	Filters   []string `json:"filters"`
	// DeliveredConsumerSeq and AckFloorConsumerSeq count deliveries
	// (redeliveries too): their growth between samples is a rate.
	DeliveredConsumerSeq uint64 `json:"delivered_consumer_seq"`
	AckFloorConsumerSeq  uint64 `json:"ack_floor_consumer_seq"`
	// Lag is what the member has not acked yet and how old the oldest of
	// it is (see cg's lag.go); nil when unknown: no consumer, and its
	// partitions' lag was not read.
	Lag *Lag `json:"lag,omitempty"`
	// Unusable says why the member can never have a consumer (a name
	// the server refuses, as a reference-made group may store), "" when
	// it can.
	Unusable string `json:"unusable,omitempty"`
	// PartitionConsumers, on a partition-layout group, are the consumers
	// of the member's partitions, one each; the fields above then sum
	// them up (Consumer is empty, Pinned is any of them pinned, PinID the
	// first pinned one's, Waiting the most pull requests on one).
	PartitionConsumers []PartitionConsumer `json:"partition_consumers,omitempty"`
	// Dynamic: the member added itself and is dropped when all its
	// instances are gone (dynamic membership of an elastic group).
	Dynamic bool `json:"dynamic,omitempty"`
	// LastSeen is the server's time of the latest liveness write of any of
	// the member's dynamic instances; zero when none is on record.
	LastSeen time.Time `json:"last_seen,omitzero"`
	// Instances counts the member's liveness records: its running
	// dynamic instances, and for a session timeout those that died.
	Instances int `json:"instances,omitempty"`
}

// PartitionConsumer is what the server shows of one partition's consumer
// in a partition-layout group.
type PartitionConsumer struct {
	Partition   int       `json:"partition"`
	Consumer    string    `json:"consumer"`
	Owner       string    `json:"owner,omitempty"`
	Exists      bool      `json:"exists"`
	Pinned      bool      `json:"pinned"`
	PinID       string    `json:"pin_id,omitempty"`
	PinnedSince time.Time `json:"pinned_since,omitzero"`
	Waiting     int       `json:"waiting"`
	Pending     uint64    `json:"pending"`
	AckPending  int       `json:"ack_pending"`
	AckFloor    uint64    `json:"ack_floor_stream_seq"`
}

// GroupInfo is a group's configuration and the state of its members.
type GroupInfo struct {
	Kind   string      `json:"kind"` // static or elastic
	Stream string      `json:"stream"`
	Group  string      `json:"group"`
	Config GroupConfig `json:"config"` // StaticConfig or ElasticConfig
	// Layout is "partition" for a partition-layout group (one consumer
	// per partition), empty for the member layout.
	Layout     string   `json:"layout,omitempty"`
	Partitions int      `json:"partitions"`
	Mode       string   `json:"mode"` // balanced or mapped
	Filters    []string `json:"filters"`
	// Owners[p] is the member owning partition p ("" when none does).
	Owners  []string       `json:"owners"`
	Members []MemberStatus `json:"members"`
	// Elastic groups only: the work-queue stream, the messages waiting in
	// it per partition, and how far its sourcing trails the origin.
	WorkStream  string   `json:"work_stream,omitempty"`
	Backlog     []uint64 `json:"backlog,omitempty"`
	SourcingLag *uint64  `json:"sourcing_lag,omitempty"`
	// PartitionLag is each partition's pending messages and the age of
	// the oldest, read by LagMethod; LagError says which partitions could
	// not be read and why. SampledAt is when the ages were measured.
	PartitionLag []PartitionLag `json:"partition_lag,omitempty"`
	LagMethod    string         `json:"lag_method,omitempty"`
	LagError     string         `json:"lag_error,omitempty"`
	SampledAt    time.Time      `json:"sampled_at,omitzero"`
}

// Lag is how far behind a member, or one partition, is.
type Lag struct {
	// Pending counts the messages not yet acked: not delivered yet, or
	// delivered and awaiting an ack.
	Pending uint64 `json:"pending"`
	// OldestSeq and Oldest are the stream sequence and stored time of the
	// oldest pending message, zero when nothing is pending or it could not
	// be read.
	OldestSeq uint64    `json:"oldest_seq,omitempty"`
	Oldest    time.Time `json:"oldest,omitzero"`
	// AgeSeconds is how long the oldest pending message had waited when
	// the group was sampled (GroupInfo.SampledAt): the time lag.
	AgeSeconds float64 `json:"age_seconds"`
}

// Age is AgeSeconds as a duration.
func (l Lag) Age() time.Duration { return time.Duration(l.AgeSeconds * float64(time.Second)) }

// PartitionLag is the lag of one partition.
type PartitionLag struct {
	Partition int `json:"partition"`
	// Owner is the member owning the partition, "" when none does.
	Owner string `json:"owner,omitempty"`
	// FromSeq is the first stream sequence counted (see the notes on lag in
	// cg's lag.go): just after the owner's ack floor, or the stream's start.
	FromSeq uint64 `json:"from_seq"`
	// Known is false when the partition could not be read in time (see
	// GroupInfo.LagError); its counts are then zero, not measured.
	Known bool `json:"known"`
	Lag
}
