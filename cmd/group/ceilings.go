package group

import (
	"strconv"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/pkg/cg"
)

// checkCeilings refuses consume's numeric flags above cg's ceilings
// (pkg/cg/limits.go, where each is measured), before anything is dialled
// or joined: one line naming the ceiling and what a unit costs.
func (o *ConsumeOptions) checkCeilings() error {
	for _, c := range []struct {
		flag    string
		v, max  int
		example string
		cost    string
	}{
		{"concurrency", o.Concurrency, cg.MaxConcurrency, "8", cg.CostConcurrency},
		{"max-ack-pending", o.MaxAckPending, cg.MaxAckPendingMax, "100", cg.CostMaxAckPending},
		{"batch", o.Batch, cg.MaxBatchSize, "100", cg.CostBatchSize},
		{"max-deliver", o.Poison.MaxDeliver, cg.MaxDeliverMax, "5", cg.CostMaxDeliver},
		{"backoff", len(o.Poison.Backoff), cg.MaxBackoffSteps, "1s,5s,30s", cg.CostBackoffSteps},
	} {
		if c.v > c.max {
			what := "--" + c.flag + " " + strconv.Itoa(c.v)
			if c.flag == "backoff" {
				what = "--backoff with " + strconv.Itoa(c.v) + " delays"
			}
			return cmdutil.UsageErrorf("%s is above cg's ceiling of %d (%s): use at most %d, such as --%s %s", what, c.max, c.cost, c.max, c.flag, c.example)
		}
	}
	for _, d := range o.Poison.Backoff {
		if d > cg.MaxBackoffDelay {
			return cmdutil.UsageErrorf("--backoff delay %s is above cg's ceiling of %s (a longer wait is a park): use at most %s, or --on-poison park", d, cg.MaxBackoffDelay, cg.MaxBackoffDelay)
		}
	}
	return nil
}

// ceilingJoinErr words a ceiling the engine found at the join, one that
// depends on the group (a partition-layout group runs the options once per
// partition), with the flag that sets it: a usage error, nothing joined.
func ceilingJoinErr(ce *cg.CeilingError) error {
	flag := map[string]string{"Concurrency": "concurrency", "MaxAckPending": "max-ack-pending",
		"Batch.Size": "batch", "Retry.MaxDeliver": "max-deliver"}[ce.Option]
	if flag == "" {
		return cmdutil.UsageErrorf("%s", ce.Error())
	}
	return cmdutil.UsageErrorf("--%s %d is above cg's ceiling of %d for this group (%s): use at most --%s %d", flag, ce.Value, ce.Ceiling, ce.Cost, flag, ce.Ceiling)
}
