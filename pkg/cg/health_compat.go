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
