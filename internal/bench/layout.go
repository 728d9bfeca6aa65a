package bench

import (
	"fmt"

	"github.com/cg-dev/cg/pkg/cg"
)

// The group layouts a run can use: member (one consumer per member, the
// reference's format, and the default) and partition (one consumer per
// partition).
const (
	LayoutMember    = "member"
	LayoutPartition = "partition"
)

// CheckLayout says whether this build can create a group of layout name.
func CheckLayout(name string) error {
	switch name {
	case "", LayoutMember:
		return nil
	case LayoutPartition:
		// The partition layout's create option is not in this build's
		// engine; when it is, layoutOption passes it through.
		return fmt.Errorf("layout %q is not available in this build: use member", name)
	}
	return fmt.Errorf("layout %q: use member or partition", name)
}

// staticLayout applies sc's layout to a static group's configuration.
func staticLayout(sc Scenario, cfg *cg.StaticConfig) error { return CheckLayout(sc.Layout) }

// elasticLayout applies sc's layout to an elastic group's configuration.
func elasticLayout(sc Scenario, cfg *cg.ElasticConfig) error { return CheckLayout(sc.Layout) }
