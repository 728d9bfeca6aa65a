package cg

import (
	"context"
	"errors"
	"fmt"
)

// layoutResetPlan plans the reset of a partition-layout static group's
// members: one entry per partition consumer of each member, each moved on
// its own as a member consumer is (consumer reset, or remade at the target
// when it cannot be reset that far back and no instance runs).
func (c *Client) layoutResetPlan(ctx context.Context, plan ResetPlan, cfg StaticConfig, l layout, members []string) (ResetPlan, []resetMember, error) {
	stream, group := plan.Stream, plan.Group
	var rms []resetMember
	for _, m := range members {
		for _, p := range l.parts[m] {
			name := PartitionConsumerName(group, p)
			ci, err := c.consumerInfo(ctx, stream, name)
			if err != nil {
				return plan, nil, err
			}
			mp := ResetMemberPlan{Member: m, Consumer: name, To: plan.Seq, Partition: &p}
			filters := PartitionConsumerFilters(cfg, p)
			if ci != nil {
				if owned, why := PartitionConsumerOwned(ci.Config, KindStatic, stream, group, p); !owned {
					return plan, nil, notOwned("consumer", name, fmt.Sprintf("partition %d of static group %q", p, group), why, "")
				}
				mp.ConsumerExists, mp.From = true, ci.AckFloor.Stream+1
				mp.Running, mp.AckPending = ci.NumWaiting > 0 || pinned(ci), ci.NumAckPending
				if err := resetAllowed(ci, plan.Seq); err != nil {
					if !errors.Is(err, errBelowStart) {
						return plan, nil, err
					}
					if mp.Running {
						return plan, nil, described{fmt.Sprintf("consumer %s was made to start at stream sequence %d (made again after inactivity, from partition %d's saved position) and the server cannot reset it below that; with no instance running it is remade at the target instead: stop member %q's instances and reset again, or choose a target at or after %d", name, ci.Config.OptStartSeq, p, m, ci.Config.OptStartSeq), ErrResetUnsupported}
					}
					mp.Recreate = true
				}
			} else if pos, ok := c.savedPosition(ctx, stream, group, partitionPositionName(p)); ok {
				mp.From = pos.AckFloor + 1
			} else {
				mp.From = max(plan.FirstSeq, 1)
			}
			lo, hi := min(mp.From, mp.To), max(mp.From, mp.To)
			n, err := c.countBetween(ctx, stream, filters, lo, hi, plan.LastSeq)
			if err != nil {
				return plan, nil, err
			}
			if mp.To < mp.From {
				mp.Again = n
			} else {
				mp.Skipped = n
			}
			plan.Members = append(plan.Members, mp)
			rms = append(rms, resetMember{ci: ci, filters: filters})
		}
	}
	return plan, rms, nil
}
