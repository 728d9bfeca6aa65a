package cg

import "github.com/cg-dev/cg/pkg/cg/partition"

// minimalChange sets cfg's membership to list the minimal way: mappings
// from MinimalMappings, unless a plain member list moves no more
// partitions (growing from one member to two, dropping the last member),
// in which case the member list stays: it is the contract's simpler form,
// and plain add and drop (the reference's too) can still change it.
func minimalChange(cfg *ElasticConfig, list []string) {
	before := cfg.Assignment()
	if len(partition.Moves(before, partition.BalancedAssignment(list, cfg.MaxMembers))) <= partition.MinimumBalancedMoves(before, list) {
		cfg.Members, cfg.MemberMappings = list, nil
		return
	}
	cfg.Members, cfg.MemberMappings = nil, partition.MinimalMappings(before, list)
}
