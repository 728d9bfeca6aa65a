package cg

import (
	"context"
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
			}
			rm, err := c.planEntry(ctx, &plan, mp, ci, filters, partitionPositionName(p), fmt.Sprintf("partition %d's", p), fmt.Sprintf("member %q's instances", m))
			if err != nil {
				return plan, nil, err
			}
			rms = append(rms, rm)
		}
	}
	return plan, rms, nil
}
