package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// The dynamic member's changes as the verdict names them: what was done
// to its process, where an operator's changes name the command.
const (
	dynamicJoin  = "start " + dynamicMember
	dynamicLeave = "stop " + dynamicMember
)

// dynamicSteps start the dynamic member and stop it cleanly, as an
// orchestrator scaling on lag would: nobody edits the membership, the
// member's own instance does. Both changes are timed and counted like the
// operator's.
func (d *elasticWalk) dynamicSteps(ctx context.Context, v *Verdict) error {
	join, stop, err := d.dynamicStart(ctx)
	if join.Change != "" {
		v.Rebalances = append(v.Rebalances, join)
	}
	if err != nil {
		return err
	}
	d.status(ctx, "Status after "+dynamicMember+" added itself")
	leave, err := d.dynamicStop(ctx, stop)
	v.Rebalances = append(v.Rebalances, leave)
	if err != nil {
		return err
	}
	d.status(ctx, "Status after "+dynamicMember+" stopped")
	return nil
}

// dynamicStart starts the dynamic member's instance, as `cg elastic
// consume … --dynamic` does, and times it from the start to its first
// message. stop stops it the way Ctrl-C stops that command: by
// cancelling the context it joined with.
func (d *elasticWalk) dynamicStart(ctx context.Context) (r Rebalance, stop context.CancelFunc, err error) {
	m := dynamicMember
	d.step("Starting "+m+" with --dynamic: it adds itself to the group",
		"As an orchestrator scaling on the group's pending count would: a new process, and nobody runs",
		"cg elastic add. The instance writes a liveness record, marks "+m+" as a member that joined by",
		"itself and adds it through the same compare-and-set as add, moving the fewest partitions; the",
		"members running follow the configuration as they do any add.",
		fmt.Sprintf("(cg elastic consume ORDERS fulfillment %s --dynamic --sleep %v)", m, d.o.Sleep))
	before, _, err := d.groupEntry(ctx)
	if err != nil {
		return r, nil, err
	}
	r = Rebalance{Change: dynamicJoin, Dynamic: true, Moves: []partition.Move{}}
	jctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	// Marked before the start: the member may take messages before Join
	// returns.
	d.served.mark(time.Now())
	at := time.Now()
	err = d.startInstance(ctx, m, m+"/a", func(_ context.Context, c *cg.Client, inst *instance) (*cg.Member, error) {
		opts := d.joinOptions(inst)
		opts.Dynamic = true
		return c.Join(jctx, cg.KindElastic, streamName, groupName, m, d.handler(inst), opts)
	})
	if err != nil {
		stop()
		return r, nil, err
	}
	// Join returns once the instance has added its member.
	r.ChangeMS = msSince(at, time.Now())
	limit := stepBudget(ctx, stepLimit)
	after, rev, ok := d.waitMembership(ctx, m, true, limit)
	if !ok {
		d.logf("%s", d.cs.Red(fmt.Sprintf("%s is not a member of the group %v after its start", m, limit)))
		return r, stop, sleepCtx(ctx, d.phase/2-time.Since(at))
	}
	d.dynJoined = true
	if mv := partition.Moves(before.Assignment(), after.Assignment()); mv != nil {
		r.Moves = mv
	}
	d.logf("%s added itself %v after its start: configuration revision %d: members %s; %s", d.cs.Member(m), dur(r.ChangeMS),
		rev, d.memberList(after.MemberNames()), d.movesText(r.Moves))
	d.timeAdd(ctx, &r, after.Assignment(), []string{m}, at, limit, timedFrom{after: "after its start", of: "of its start"})
	return r, stop, sleepCtx(ctx, d.phase/2-time.Since(at))
}

// dynamicStop stops the dynamic member's instance cleanly with stop and
// times it from then until every partition it held is served by its new
// owner.
func (d *elasticWalk) dynamicStop(ctx context.Context, stop context.CancelFunc) (Rebalance, error) {
	m := dynamicMember
	d.step("Stopping "+m+" cleanly, as Ctrl-C or SIGTERM does: it drops itself",
		"Its last instance finishes the message in hand, acks it and lets go of its partitions, then drops",
		m+" with the same compare-and-set as drop and removes its records. The others take its partitions",
		"from the oldest message waiting, so per-key order holds. Only a member that joined by itself goes",
		"this way: m1, m2 and m3 were added by an operator and stay members when their instances stop.",
		"(Ctrl-C in the shell running cg elastic consume ORDERS fulfillment "+m+" --dynamic)")
	r := Rebalance{Change: dynamicLeave, Dynamic: true, Moves: []partition.Move{}}
	var inst *instance
	for _, in := range d.instances {
		if in.member == m {
			inst = in
		}
	}
	before, _, err := d.groupEntry(ctx)
	if err != nil {
		stop()
		return r, err
	}
	d.served.mark(time.Now())
	at := time.Now()
	stop()
	limit := stepBudget(ctx, stepLimit)
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-inst.m.Done():
		r.ChangeMS = msSince(at, time.Now())
		// The process exits with its instance.
		inst.nc.Close()
	case <-t.C:
		d.logf("%s", d.cs.Red(fmt.Sprintf("%s's instance still running %v after its stop began", m, limit)))
		return r, sleepCtx(ctx, d.phase/2-time.Since(at))
	case <-ctx.Done():
		return r, ctx.Err()
	}
	after, rev, ok := d.waitMembership(ctx, m, false, max(limit-time.Since(at), time.Second))
	if !ok {
		d.logf("%s", d.cs.Red(fmt.Sprintf("%s still a member after its clean stop", m)))
		return r, sleepCtx(ctx, d.phase/2-time.Since(at))
	}
	d.dynLeft = true
	if mv := partition.Moves(before.Assignment(), after.Assignment()); mv != nil {
		r.Moves = mv
	}
	d.logf("%s stopped and dropped itself %v after its stop began: configuration revision %d: members %s; %s", d.cs.Member(m),
		dur(r.ChangeMS), rev, d.memberList(after.MemberNames()), d.movesText(r.Moves))
	d.timeDrop(ctx, &r, r.Moves, []string{m}, at, limit, timedFrom{after: "after " + m + "'s stop began", of: "of " + m + "'s stop"})
	return r, sleepCtx(ctx, d.phase/2-time.Since(at))
}

// groupEntry reads the group's configuration and its revision. The
// walkthrough's group has the member layout, stored in ElasticBucket.
func (d *elasticWalk) groupEntry(ctx context.Context) (cg.ElasticConfig, uint64, error) {
	var cfg cg.ElasticConfig
	kv, err := d.admin.JetStream().KeyValue(ctx, cg.ElasticBucket)
	if err != nil {
		return cfg, 0, fmt.Errorf("read group %s: %w", groupName, err)
	}
	e, err := kv.Get(ctx, cg.Key(streamName, groupName))
	if err != nil {
		return cfg, 0, fmt.Errorf("read group %s: %w", groupName, err)
	}
	if err := json.Unmarshal(e.Value(), &cfg); err != nil {
		return cfg, 0, fmt.Errorf("read group %s: %w", groupName, err)
	}
	return cfg, e.Revision(), nil
}

// waitMembership reads the group's configuration until member is in it
// (in) or not (!in), at most limit; ok says whether it came to that.
func (d *elasticWalk) waitMembership(ctx context.Context, member string, in bool, limit time.Duration) (cfg cg.ElasticConfig, rev uint64, ok bool) {
	ok = poll(ctx, limit, func() bool {
		c, r, err := d.groupEntry(ctx)
		if err != nil {
			return false
		}
		cfg, rev = c, r
		return c.IsMember(member) == in
	})
	return cfg, rev, ok
}

// judge fails the walkthrough when the dynamic member did not change the
// membership itself: on its start, or on its clean stop.
func (d *elasticWalk) judge(context.Context, *Verdict) []string {
	var why []string
	if !d.dynJoined {
		why = append(why, dynamicMember+" started with --dynamic but did not add itself")
	}
	if !d.dynLeft {
		why = append(why, dynamicMember+" stopped cleanly but is still a member")
	}
	return why
}
