package bench

import (
	"github.com/cg-dev/cg/pkg/cg"
)

// The group layouts a run can use: member (one consumer per member, the
// reference's format, and the default) and partition (one consumer per
// partition).
const (
	LayoutMember    = string(cg.LayoutMember)
	LayoutPartition = string(cg.LayoutPartition)
)

// CheckLayout says whether name is a layout a run can create.
func CheckLayout(name string) error {
	_, err := cg.ParseLayout(name)
	return err
}

// staticLayout applies sc's layout to a static group's configuration.
func staticLayout(sc Scenario, cfg *cg.StaticConfig) error {
	l, err := cg.ParseLayout(sc.Layout)
	cfg.Layout = l
	return err
}

// elasticLayout applies sc's layout to an elastic group's configuration.
func elasticLayout(sc Scenario, cfg *cg.ElasticConfig) error {
	l, err := cg.ParseLayout(sc.Layout)
	cfg.Layout = l
	return err
}
