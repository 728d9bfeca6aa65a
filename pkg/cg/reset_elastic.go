package cg

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// elasticResetPlan plans an elastic reset: only skipping to the end is
// possible (see reset.go); its positions are work stream sequences.
func (c *Client) elasticResetPlan(ctx context.Context, plan ResetPlan, cfg ElasticConfig, members []string, t ResetTarget) (ResetPlan, []resetMember, error) {
	if !t.End {
		return plan, nil, described{fmt.Sprintf("elastic group %q cannot be moved to %s: its members read the work stream %s, which deletes each message once it is acked, so nothing before what they hold is left there to replay; going back would mean sourcing %s again from earlier, which the server does only for the whole work stream (every member, and what each has in hand, again); only skipping to the end is supported, or replay into a static group", plan.Group, t, WorkStreamName(plan.Stream, plan.Group), plan.Stream), ErrResetUnsupported}
	}
	ws := WorkStreamName(plan.Stream, plan.Group)
	s, err := c.js.Stream(ctx, ws)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) || badServerName(err) {
			return plan, nil, fmt.Errorf("%w: work stream %s of elastic group %q is missing", ErrStreamNotFound, ws, plan.Group)
		}
		return plan, nil, err
	}
	si := s.CachedInfo()
	if ok, why := WorkStreamOwned(si, plan.Stream, plan.Group, &cfg); !ok {
		return plan, nil, notOwned("stream", ws, fmt.Sprintf("elastic group %q on %s", plan.Group, plan.Stream), why, "")
	}
	plan.FirstSeq, plan.LastSeq, plan.Seq = si.State.FirstSeq, si.State.LastSeq, si.State.LastSeq+1
	// A work-queue stream takes no counting consumer beside the
	// members': count from its per-subject counts (it holds only what
	// is not acked yet).
	counts, err := c.subjectCounts(ctx, ws)
	if err != nil {
		return plan, nil, err
	}
	l := newLayout(cfg)
	var rms []resetMember
	for _, m := range members {
		ci, err := c.consumerInfo(ctx, ws, m)
		if err != nil {
			return plan, nil, err
		}
		mp := ResetMemberPlan{Member: m, Consumer: m, To: plan.Seq, From: max(plan.FirstSeq, 1)}
		filters := l.memberFilters(cfg, m)
		if ci != nil {
			if !groupConsumer(ci.Config, plan.Stream, plan.Group, cfg.MaxMembers) {
				_, why := MemberConsumerOwned(ci.Config, KindElastic, plan.Stream, plan.Group, m, filters)
				return plan, nil, notOwned("consumer", m+" on "+ws, fmt.Sprintf("elastic group %q on %s (member %q)", plan.Group, plan.Stream, m), why, "")
			}
			filters = consumerFilters(ci.Config)
			mp.ConsumerExists, mp.From = true, ci.AckFloor.Stream+1
			mp.Running, mp.AckPending = ci.NumWaiting > 0, ci.NumAckPending
		}
		for subj, n := range counts {
			for _, f := range filters {
				if subjectSubset(subj, f) {
					mp.Skipped += n
					break
				}
			}
		}
		plan.Members = append(plan.Members, mp)
		rms = append(rms, resetMember{ci: ci, filters: filters})
	}
	return plan, rms, nil
}

// elasticReset skips the chosen members' backlog: their consumers are
// paused, what their instances hold is let settle, the messages of their
// partitions are purged from the work stream (cg's own), and the
// consumers resumed.
func (c *Client) elasticReset(ctx context.Context, v Version, res ResetResult, rms []resetMember) (_ ResetResult, err error) {
	ws := WorkStreamName(res.Stream, res.Group)
	var live []int
	for i, rm := range rms {
		if rm.ci != nil {
			live = append(live, i)
		}
	}
	paused, err := c.pauseAll(ctx, ws, res.ResetPlan, live)
	res.Paused = paused
	defer func() {
		if rerr := c.resumeAll(ctx, ws, paused); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err != nil {
		return res, err
	}
	c.drain(ctx, ws, &res, rms, live, paused)
	c.extendPause(ctx, ws, paused)
	s, err := c.js.Stream(ctx, ws)
	if err != nil {
		return res, err
	}
	for i, rm := range rms {
		for _, f := range rm.filters {
			// Only what was there when planned: newer messages are
			// after the end the plan named.
			if err := s.Purge(ctx, jetstream.WithPurgeSubject(f), jetstream.WithPurgeSequence(res.Seq)); err != nil {
				return res, fmt.Errorf("purge %s of member %q from %s: %w", f, res.Members[i].Member, ws, err)
			}
		}
	}
	return res, nil
}
