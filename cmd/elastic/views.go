package elastic

// The --json views of add, drop, create-mapping and delete-mapping (and
// the moves in their --dry-run plans): what scripts read, declared here in
// the CLI rather than borrowed from the engine, with the field names, tags
// and order cg.MembershipChange and cg.Move had when these commands
// marshalled them directly (the golden JSON tests hold the bytes).

import (
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// ChangeView is a membership change in --json.
type ChangeView struct {
	Stream    string   `json:"stream"`
	Group     string   `json:"group"`
	Changed   []string `json:"changed"`
	Unchanged []string `json:"unchanged"`
	// Config is the stored configuration, in its on-server form.
	Config   cg.ElasticConfig `json:"config"`
	Revision uint64           `json:"revision"`
	Moves    []MoveView       `json:"moves"`
	Minimal  bool             `json:"minimal,omitempty"`
}

// MoveView is one partition that changed owner.
type MoveView struct {
	Partition int    `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// jsonChange is the change as --json shows it.
func jsonChange(mc cg.MembershipChange) ChangeView {
	mc = withEmptyLists(mc)
	v := ChangeView{Stream: mc.Stream, Group: mc.Group, Changed: mc.Changed, Unchanged: mc.Unchanged,
		Config: mc.Config, Revision: mc.Revision, Moves: moveViews(mc.Moves), Minimal: mc.Minimal}
	return v
}

// moveViews converts moves for --json; nil stays nil.
func moveViews(ms []partition.Move) []MoveView {
	if ms == nil {
		return nil
	}
	out := make([]MoveView, len(ms))
	for i, m := range ms {
		out[i] = MoveView{Partition: m.Partition, From: m.From, To: m.To}
	}
	return out
}

// withEmptyLists is the change with empty lists rather than nulls.
func withEmptyLists(mc cg.MembershipChange) cg.MembershipChange {
	for _, p := range []*[]string{&mc.Changed, &mc.Unchanged} {
		if *p == nil {
			*p = []string{}
		}
	}
	if mc.Moves == nil {
		mc.Moves = []partition.Move{}
	}
	if mc.Config.PartitioningFilters == nil {
		mc.Config.PartitioningFilters = []cg.PartitioningFilter{}
	}
	return mc
}
