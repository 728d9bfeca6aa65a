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
