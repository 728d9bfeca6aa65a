package cg

import "github.com/cg-dev/cg/pkg/cg/health"

// The health types live in the leaf package pkg/cg/health; these aliases
// keep them reachable as cg.X.

// Remedy is health.Remedy: the typed fix a finding or an error carries.
type Remedy = health.Remedy

// RemedyCode is health.RemedyCode.
type RemedyCode = health.RemedyCode

// The remedy codes, as in package health.
const (
	RemedyListGroups               = health.RemedyListGroups
	RemedyRecreateStreamOrDelete   = health.RemedyRecreateStreamOrDelete
	RemedyDeleteAndCreate          = health.RemedyDeleteAndCreate
	RemedyRecreateInvalidConfig    = health.RemedyRecreateInvalidConfig
	RemedyRecreateElastic          = health.RemedyRecreateElastic
	RemedyPartitionLayout          = health.RemedyPartitionLayout
	RemedyRepairWorkStreamSources  = health.RemedyRepairWorkStreamSources
	RemedyRemakeWorkStream         = health.RemedyRemakeWorkStream
	RemedyRepairWorkStreamSettings = health.RemedyRepairWorkStreamSettings
	RemedyWorkStreamNotOwned       = health.RemedyWorkStreamNotOwned
	RemedyAddMembers               = health.RemedyAddMembers
	RemedyStaticNoMembers          = health.RemedyStaticNoMembers
	RemedyStartMember              = health.RemedyStartMember
	RemedyUpgradeServer            = health.RemedyUpgradeServer
	RemedyMinimalOrDeleteMappings  = health.RemedyMinimalOrDeleteMappings
	RemedyDeleteGroup              = health.RemedyDeleteGroup
	RemedyRecreateStreamAndGroup   = health.RemedyRecreateStreamAndGroup
	RemedyRestartMember            = health.RemedyRestartMember
	RemedyRebuildWorkStream        = health.RemedyRebuildWorkStream
	RemedyRepairWorkStreamJoin     = health.RemedyRepairWorkStreamJoin
	RemedyStreamTransformExample   = health.RemedyStreamTransformExample
)

// RemedyError is health.Error: an engine error carrying its Remedy, which
// unwraps to its sentinel.
type RemedyError = health.Error

// Severity is health.Severity: how grave a finding is.
type Severity = health.Severity

// The severities, as in package health.
const (
	SeverityOK       = health.SeverityOK
	SeverityWarning  = health.SeverityWarning
	SeverityUnknown  = health.SeverityUnknown
	SeverityCritical = health.SeverityCritical
)

// Finding is health.Finding: one problem Check found.
type Finding = health.Finding

// CheckedGroup is health.CheckedGroup: a group Check looked at.
type CheckedGroup = health.CheckedGroup

// CheckReport is health.CheckReport: what Check found.
type CheckReport = health.CheckReport

// The finding codes, as in package health.
const (
	CodeServerTooOld             = health.CodeServerTooOld
	CodeStreamMissing            = health.CodeStreamMissing
	CodeGroupMissing             = health.CodeGroupMissing
	CodeConfigInvalid            = health.CodeConfigInvalid
	CodeStreamNotPartitioned     = health.CodeStreamNotPartitioned
	CodeStreamPartitionsMismatch = health.CodeStreamPartitionsMismatch
	CodeStreamFilterMismatch     = health.CodeStreamFilterMismatch
	CodeWorkStreamMissing        = health.CodeWorkStreamMissing
	CodeWorkStreamDrift          = health.CodeWorkStreamDrift
	CodeWorkStreamSourceError    = health.CodeWorkStreamSourceError
	CodePartitionUnowned         = health.CodePartitionUnowned
	CodePartitionUnserved        = health.CodePartitionUnserved
	CodeMemberNoInstance         = health.CodeMemberNoInstance
	CodeConsumerFilterDrift      = health.CodeConsumerFilterDrift
	CodeConsumerPriorityDrift    = health.CodeConsumerPriorityDrift
	CodeConsumerLeftover         = health.CodeConsumerLeftover
	CodeCheckFailed              = health.CodeCheckFailed
	CodePartitionCeiling         = health.CodePartitionCeiling
	CodeMemberUnusable           = health.CodeMemberUnusable
	CodeWorkStreamNotOwned       = health.CodeWorkStreamNotOwned
	CodeWorkStreamSettings       = health.CodeWorkStreamSettings
	CodeStreamSubjectsUnstamped  = health.CodeStreamSubjectsUnstamped
)

// What a group looks like when observed, and the watch sampler, live in
// package health too; these aliases keep them reachable as cg.X.

// GroupConfig is health.GroupConfig: what static and elastic
// configurations share (StaticConfig and ElasticConfig implement it).
type GroupConfig = health.GroupConfig

// GroupInfo is health.GroupInfo: a group's configuration and the state of
// its members.
type GroupInfo = health.GroupInfo

// MemberStatus is health.MemberStatus: what the server shows of one member.
type MemberStatus = health.MemberStatus

// PartitionConsumer is health.PartitionConsumer: one partition's consumer
// in a partition-layout group.
type PartitionConsumer = health.PartitionConsumer

// Lag is health.Lag: how far behind a member, or one partition, is.
type Lag = health.Lag

// PartitionLag is health.PartitionLag: the lag of one partition.
type PartitionLag = health.PartitionLag

// PartitionStatus is health.PartitionStatus: a partition's (or member's)
// health in a live view.
type PartitionStatus = health.PartitionStatus

// The statuses, as in package health.
const (
	StatusOK      = health.StatusOK
	StatusUnknown = health.StatusUnknown
	StatusLagging = health.StatusLagging
	StatusStalled = health.StatusStalled
	StatusUnowned = health.StatusUnowned
)

// StatusWindow is health.StatusWindow: how many successive samples stalled
// and lagging look at.
const StatusWindow = health.StatusWindow

// PinEvent is health.PinEvent: a pin or an unpin the server announced for
// a member consumer.
type PinEvent = health.PinEvent

// Snapshot is health.Snapshot: one sample of a group in a live view.
type Snapshot = health.Snapshot

// MemberSnapshot is health.MemberSnapshot: one member in a snapshot.
type MemberSnapshot = health.MemberSnapshot

// PartitionSnapshot is health.PartitionSnapshot: one partition in a
// snapshot.
type PartitionSnapshot = health.PartitionSnapshot

// Sampler is health.Sampler: it turns successive GroupInfos of one group
// into Snapshots.
type Sampler = health.Sampler

// NewSampler returns a sampler with no history (health.NewSampler).
func NewSampler() *Sampler { return health.NewSampler() }
