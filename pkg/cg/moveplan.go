package cg

import "github.com/cg-dev/cg/pkg/cg/partition"

// The membership-change side of the move plan; the math lives in package
// partition.

// MinimumMoves is the fewest partitions the change had to move: to any
// balanced assignment over the new members (an add or drop, also a
// Minimal one that stored mappings), or to the new mappings' shares.
func (mc MembershipChange) MinimumMoves() int {
	before := mc.Previous.Assignment()
	if len(mc.Config.MemberMappings) == 0 || mc.Minimal {
		return partition.MinimumBalancedMoves(before, mc.Config.MemberNames())
	}
	return partition.MinimumMoves(before, mc.Config.Assignment())
}

// BalancedMoves is how many partitions re-spreading a member list of the
// new members would move: what an add or drop without Minimal moves, to
// compare a Minimal change with.
func (mc MembershipChange) BalancedMoves() int {
	return len(partition.Moves(mc.Previous.Assignment(), partition.BalancedAssignment(mc.Config.MemberNames(), mc.Config.MaxMembers)))
}
