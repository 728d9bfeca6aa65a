package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reset and replay. A static member's consumer is moved with the server's
// consumer reset API (nats-server 2.14 and later), which sets the next
// stream sequence the consumer delivers and forgets what it had delivered
// and not yet had acked. Running members go on through it: each member
// consumer is first paused (consumer pause, 2.11+), which stops deliveries
// but still takes acks, so that what instances hold is handled and acked
// under the old position; then it is reset and resumed. An instance thus
// never has a message from before the reset and one from after it in hand
// at once. The member's saved position (positions.go) is moved too, so a
// member whose consumer is recreated later starts from the new place.
//
// Elastic groups are not rewound: their members read cg's work-queue
// stream, which deletes every message once it is acked. Going back would
// mean sourcing the origin stream again from an earlier sequence into the
// work stream, which the server does only by changing the work stream's
// source, and which would deliver again what every member (not only the
// chosen ones) has in hand; cg refuses it (ErrResetUnsupported). Skipping
// to the end is done: the chosen members' backlog is purged from the work
// stream, their consumers paused around it.

// MinConsumerReset is the first server version with the consumer reset API.
var MinConsumerReset = Version{2, 14, 0}

// ResetTarget is where a reset moves members. Exactly one of its fields
// is set.
type ResetTarget struct {
	Start bool // the stream's first message
	End   bool // after the stream's last message: skip the backlog
	// Seq is the first stream sequence handled after the reset
	// (inclusive).
	Seq uint64
	// Time: the first message stored at or after it.
	Time time.Time
	// Ago: the first message stored at or after now less Ago.
	Ago time.Duration
}

// count is how many fields of t are set.
func (t ResetTarget) count() int {
	n := 0
	for _, set := range []bool{t.Start, t.End, t.Seq != 0, !t.Time.IsZero(), t.Ago != 0} {
		if set {
			n++
		}
	}
	return n
}

// String words the target.
func (t ResetTarget) String() string {
	switch {
	case t.count() != 1:
		return "no single target"
	case t.Start:
		return "the stream's first message"
	case t.End:
		return "after the stream's last message"
	case t.Seq != 0:
		return fmt.Sprintf("stream sequence %d", t.Seq)
	case !t.Time.IsZero():
		return "the first message at or after " + t.Time.UTC().Format(time.RFC3339Nano)
	}
	return fmt.Sprintf("the first message of the last %s", t.Ago)
}

// ResetMemberPlan is what a reset does to one member.
type ResetMemberPlan struct {
	Member   string `json:"member"`
	Consumer string `json:"consumer"`
	// Partition, on a partition-layout group, is the partition whose
	// consumer this entry moves (one entry per partition of the member).
	Partition *int `json:"partition,omitempty"`
	// ConsumerExists is false when the member has no consumer yet: only
	// its saved position is moved, and it starts there when it joins.
	ConsumerExists bool `json:"consumer_exists"`
	// From is the stream sequence the member would handle next (just
	// after its ack floor); To is the one it handles next after the reset.
	From uint64 `json:"from_seq"`
	To   uint64 `json:"to_seq"`
	// Again counts the member's messages (in its partitions) in [To,
	// From): handled before, handled again. Skipped counts those in
	// [From, To) that will never be handled.
	Again   uint64 `json:"handled_again"`
	Skipped uint64 `json:"skipped"`
	// Running: an instance is waiting on the consumer.
	Running bool `json:"running"`
	// AckPending is what its instances hold unacked when planned.
	AckPending int `json:"ack_pending"`
	// Recreate: the consumer was made to start after the target (a
	// member consumer made again after inactivity starts just after its
	// saved position) and the server cannot reset it that far back; no
	// instance runs, so it is deleted instead and the member makes it
	// again at the target when it joins.
	Recreate bool `json:"recreate,omitempty"`
	// Unacked is, after the reset, how many messages were still
	// unacked when it took effect (delivered, not settled within the
	// drain wait): the reset forgot them.
	Unacked int `json:"unacked_at_reset,omitempty"`
}

// ResetPlan is what a reset will do.
type ResetPlan struct {
	Kind   Kind   `json:"kind"`
	Stream string `json:"stream"`
	Group  string `json:"group"`
	Target string `json:"target"`
	// Seq is the target resolved to a stream sequence.
	Seq      uint64            `json:"seq"`
	FirstSeq uint64            `json:"stream_first_seq"`
	LastSeq  uint64            `json:"stream_last_seq"`
	Members  []ResetMemberPlan `json:"members"`
}

// ResetResult is a plan carried out.
type ResetResult struct {
	ResetPlan
	// Paused lists the consumers paused around the reset (and resumed).
	Paused []string `json:"paused,omitempty"`
}

// resetDrainMax bounds how long a reset waits for running instances to
// settle what they hold before it resets anyway.
var resetDrainMax = 30 * time.Second

// resetHook, when set (by tests), runs once consumers are reset and
// before they resume.
var resetHook func()

// ResetPlan works out what Reset would do, changing nothing. members
// empty means every member.
func (c *Client) ResetPlan(ctx context.Context, k Kind, stream, group string, members []string, t ResetTarget) (ResetPlan, error) {
	p, _, err := c.resetPlan(ctx, k, stream, group, members, t)
	return p, err
}

// resetMember is a planned member with what carrying it out needs.
type resetMember struct {
	ci      *jetstream.ConsumerInfo
	filters []string
}

func (c *Client) resetPlan(ctx context.Context, k Kind, stream, group string, members []string, t ResetTarget) (ResetPlan, []resetMember, error) {
	plan := ResetPlan{Kind: k, Stream: stream, Group: group, Target: t.String()}
	if err := k.Valid(); err != nil {
		return plan, nil, err
	}
	if n := t.count(); n != 1 {
		return plan, nil, described{fmt.Sprintf("%d reset targets given: exactly one is needed", n), ErrResetTarget}
	}
	if err := ValidateStoredGroupName(group); err != nil {
		return plan, nil, err
	}
	cfg, err := c.Config(ctx, k, stream, group)
	if err != nil {
		return plan, nil, err
	}
	names := cfg.MemberNames()
	if len(members) == 0 {
		members = names
	}
	seen := map[string]bool{}
	for _, m := range members {
		if !slices.Contains(names, m) {
			return plan, nil, fmt.Errorf("%w: %q is not a member of %s group %q (members: %s)", ErrMemberNotFound, m, k, group, strings.Join(names, ", "))
		}
		if seen[m] {
			return plan, nil, described{fmt.Sprintf("member %q named twice", m), ErrResetTarget}
		}
		seen[m] = true
	}
	if k == KindElastic {
		return c.elasticResetPlan(ctx, plan, cfg.(ElasticConfig), members, t)
	}
	scfg := cfg.(StaticConfig)
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return plan, nil, err
	}
	if si.Config.Retention == jetstream.WorkQueuePolicy {
		return plan, nil, described{fmt.Sprintf("stream %s is a work-queue stream: it deletes each message once it is acked, so nothing the members handled is left to replay, and it takes no consumer to count with", stream), ErrResetUnsupported}
	}
	plan.FirstSeq, plan.LastSeq = si.State.FirstSeq, si.State.LastSeq
	if plan.Seq, err = c.resolveTarget(ctx, stream, si, t); err != nil {
		return plan, nil, err
	}
	l := newLayout(scfg)
	if scfg.LayoutOf() == LayoutPartition {
		return c.layoutResetPlan(ctx, plan, scfg, l, members)
	}
	var rms []resetMember
	for _, m := range members {
		name := StaticConsumerName(group, m)
		ci, err := c.consumerInfo(ctx, stream, name)
		if err != nil {
			return plan, nil, err
		}
		mp := ResetMemberPlan{Member: m, Consumer: name, To: plan.Seq}
		filters := l.memberFilters(scfg, m)
		if ci != nil {
			if owned, why := MemberConsumerOwned(ci.Config, KindStatic, stream, group, m, staticForms(scfg, m)...); !owned {
				return plan, nil, notOwned("consumer", name, fmt.Sprintf("member %q of static group %q", m, group), why, "")
			}
			filters = consumerFilters(ci.Config)
		}
		rm, err := c.planEntry(ctx, &plan, mp, ci, filters, m, fmt.Sprintf("member %q's", m), "the member's instances")
		if err != nil {
			return plan, nil, err
		}
		rms = append(rms, rm)
	}
	return plan, rms, nil
}

// planEntry completes the plan entry mp of one consumer (ci, nil when it
// does not exist, reading filters) and appends it to plan: where it
// stands (its ack floor, else the position saved under posName, else the
// stream's start), whether the server can move it to the target, and how
// many messages moving it handles again or skips. whose and stop word the
// refusal of a consumer that must be remade while an instance runs.
func (c *Client) planEntry(ctx context.Context, plan *ResetPlan, mp ResetMemberPlan, ci *jetstream.ConsumerInfo, filters []string, posName, whose, stop string) (resetMember, error) {
	if ci != nil {
		mp.ConsumerExists, mp.From = true, ci.AckFloor.Stream+1
		mp.Running, mp.AckPending = ci.NumWaiting > 0 || pinned(ci), ci.NumAckPending
		if err := resetAllowed(ci, plan.Seq); err != nil {
			if !errors.Is(err, errBelowStart) {
				return resetMember{}, err
			}
			if mp.Running {
				return resetMember{}, described{fmt.Sprintf("consumer %s was made to start at stream sequence %d (made again after inactivity, from %s saved position) and the server cannot reset it below that; with no instance running it is remade at the target instead: stop %s and reset again, or choose a target at or after %d", mp.Consumer, ci.Config.OptStartSeq, whose, stop, ci.Config.OptStartSeq), ErrResetUnsupported}
			}
			mp.Recreate = true
		}
	} else if pos, ok := c.savedPosition(ctx, plan.Stream, plan.Group, posName); ok {
		mp.From = pos.AckFloor + 1
	} else {
		mp.From = max(plan.FirstSeq, 1)
	}
	lo, hi := min(mp.From, mp.To), max(mp.From, mp.To)
	n, err := c.countBetween(ctx, plan.Stream, filters, lo, hi, plan.LastSeq)
	if err != nil {
		return resetMember{}, err
	}
	if mp.To < mp.From {
		mp.Again = n
	} else {
		mp.Skipped = n
	}
	plan.Members = append(plan.Members, mp)
	return resetMember{ci: ci, filters: filters}, nil
}

// resetAllowed refuses, before anything changes, a reset the server would
// refuse: a consumer made to start at a sequence or time (a member
// consumer recreated after inactivity starts just after its saved
// position) cannot be reset below that start.
func resetAllowed(ci *jetstream.ConsumerInfo, seq uint64) error {
	switch ci.Config.DeliverPolicy {
	case jetstream.DeliverAllPolicy:
		return nil
	case jetstream.DeliverByStartSequencePolicy:
		if seq >= ci.Config.OptStartSeq {
			return nil
		}
		return errBelowStart
	}
	return described{fmt.Sprintf("consumer %s has deliver policy %s: the server resets only consumers that deliver all or from a start", ci.Name, ci.Config.DeliverPolicy), ErrResetUnsupported}
}

// errBelowStart: a consumer made to start at a sequence cannot be reset
// below it.
var errBelowStart = described{"below the consumer's start sequence", ErrResetUnsupported}

// pinned reports whether the server has pinned an instance of ci.
func pinned(ci *jetstream.ConsumerInfo) bool {
	for _, pg := range ci.PriorityGroups {
		if pg.Group == PriorityGroup && pg.PinnedClientID != "" {
			return true
		}
	}
	return false
}

// resolveTarget turns t into the first stream sequence to handle.
func (c *Client) resolveTarget(ctx context.Context, stream string, si *jetstream.StreamInfo, t ResetTarget) (uint64, error) {
	first, last := si.State.FirstSeq, si.State.LastSeq
	if first == 0 {
		first = 1
	}
	switch {
	case t.Start:
		return first, nil
	case t.End:
		return last + 1, nil
	case t.Seq != 0:
		if t.Seq > last+1 {
			return 0, described{fmt.Sprintf("sequence %d is past the end of stream %s (its last message is %d; %d means after it)", t.Seq, stream, last, last+1), ErrResetTarget}
		}
		return max(t.Seq, first), nil
	}
	at := t.Time
	if t.Ago != 0 {
		if t.Ago < 0 {
			return 0, described{fmt.Sprintf("duration %s is negative: give how far back to go", t.Ago), ErrResetTarget}
		}
		at = time.Now().Add(-t.Ago)
	}
	if now := time.Now(); at.After(now) {
		return 0, described{fmt.Sprintf("time %s is in the future (the server's clock reads about %s)", at.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339)), ErrResetTarget}
	}
	if last == 0 || si.State.Msgs == 0 {
		return last + 1, nil
	}
	return c.seqAtTime(ctx, stream, at, last)
}

// seqAtTime is the sequence of the first message stored at or after at,
// last+1 when there is none.
func (c *Client) seqAtTime(ctx context.Context, stream string, at time.Time, last uint64) (uint64, error) {
	req, _ := json.Marshal(struct {
		StartTime time.Time `json:"start_time"`
	}{at.UTC()})
	msg, err := c.Conn().RequestWithContext(ctx, apiPrefix(c.js)+"STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0, fmt.Errorf("message get by time on %s: %w", stream, err)
	}
	var resp struct {
		Error *struct {
			Code        int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if err := json.Unmarshal(msg.Data, &resp); err != nil {
		return 0, fmt.Errorf("message get by time on %s: %w", stream, err)
	}
	if resp.Error != nil {
		if resp.Error.Code == int(jetstream.JSErrCodeMessageNotFound) {
			return last + 1, nil
		}
		return 0, fmt.Errorf("message get by time on %s: %s", stream, resp.Error.Description)
	}
	if resp.Message == nil {
		return last + 1, nil
	}
	return resp.Message.Seq, nil
}

// countBetween counts the messages on filters with sequences in [lo, hi).
func (c *Client) countBetween(ctx context.Context, stream string, filters []string, lo, hi, last uint64) (uint64, error) {
	if lo >= hi || lo > last || len(filters) == 0 {
		return 0, nil
	}
	a, err := c.countFrom(ctx, stream, filters, lo)
	if err != nil {
		return 0, err
	}
	if hi > last {
		return a, nil
	}
	b, err := c.countFrom(ctx, stream, filters, hi)
	if err != nil {
		return 0, err
	}
	return a - min(a, b), nil
}

// countFrom counts the messages on filters from seq on, with a
// short-lived consumer (ack none, memory) that the server removes by
// inactivity.
func (c *Client) countFrom(ctx context.Context, stream string, filters []string, seq uint64) (uint64, error) {
	cfg := jetstream.ConsumerConfig{
		Description:       "cg reset count",
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       seq,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 2 * time.Second, // the server removes it then (see below)
	}
	if len(filters) == 1 {
		cfg.FilterSubject = filters[0]
	} else {
		cfg.FilterSubjects = filters
	}
	cons, err := c.createConsumer(ctx, stream, cfg)
	if err != nil {
		return 0, fmt.Errorf("count messages on %s: %w", stream, err)
	}
	// It is not deleted: the server removes it after its inactive
	// threshold, so an operator needs no right to delete consumers of the
	// stream (which would reach other groups' consumers).
	n := cons.CachedInfo().NumPending
	return n, nil
}

// Reset moves members (every member when members is empty) of a group to
// the target t, as the plan ResetPlan returns says, and returns it with
// what was done. Running members go on: each member consumer is paused,
// what its instances hold is let settle (at most about 30 s), it is reset
// and resumed. Nothing changes when the plan cannot be made (an unknown
// member, a target out of range, a consumer cg did not make) or the
// server has no reset API (ErrServerTooOld).
func (c *Client) Reset(ctx context.Context, k Kind, stream, group string, members []string, t ResetTarget) (ResetResult, error) {
	v, err := c.ServerVersion()
	if err != nil {
		return ResetResult{}, err
	}
	return c.reset(ctx, v, k, stream, group, members, t)
}

func (c *Client) reset(ctx context.Context, v Version, k Kind, stream, group string, members []string, t ResetTarget) (res ResetResult, err error) {
	plan, rms, err := c.resetPlan(ctx, k, stream, group, members, t)
	res = ResetResult{ResetPlan: plan}
	if err != nil {
		return res, err
	}
	if k == KindElastic {
		return c.elasticReset(ctx, v, res, rms)
	}
	if !v.AtLeast(MinConsumerReset.Major, MinConsumerReset.Minor) {
		return res, fmt.Errorf("%w: server is %s; moving a member consumer needs the consumer reset API of nats-server %s or later (nothing was changed); upgrade the server, or stop the members, delete their consumers and recreate them at the wanted start", ErrServerTooOld, v, MinConsumerReset)
	}
	var live []int // plan indexes with a consumer
	for i, rm := range rms {
		if rm.ci != nil {
			live = append(live, i)
		}
	}
	// Pause every chosen consumer first, so that all of them stand still
	// across the reset; resume them whatever happens.
	paused, err := c.pauseAll(ctx, stream, plan, live)
	res.Paused = paused
	defer func() {
		if rerr := c.resumeAll(ctx, stream, paused); rerr != nil && err == nil {
			err = rerr
		}
	}()
	if err != nil {
		return res, err
	}
	c.drain(ctx, stream, &res, rms, live, paused)
	// The steps below are quick; the lease covers them from here.
	c.extendPause(ctx, stream, paused)
	// A consumer to remake must still have no instance (one may have
	// started since the plan): then nothing has changed yet.
	for _, i := range live {
		mp := res.Members[i]
		if !mp.Recreate {
			continue
		}
		ci, err := c.consumerInfo(ctx, stream, mp.Consumer)
		if err != nil {
			return res, err
		}
		if ci != nil && (ci.NumWaiting > 0 || pinned(ci)) {
			return res, described{fmt.Sprintf("an instance of member %q started while planning; consumer %s can only be remade with none running (nothing was changed): stop it and reset again", mp.Member, mp.Consumer), ErrResetUnsupported}
		}
	}
	var moved []string
	for _, i := range live {
		mp := res.Members[i]
		if mp.Recreate {
			continue
		}
		if _, err := c.js.ResetConsumerToSequence(ctx, stream, mp.Consumer, mp.To); err != nil {
			err = fmt.Errorf("reset consumer %s on %s to sequence %d: %w", mp.Consumer, stream, mp.To, err)
			if len(moved) > 0 {
				err = fmt.Errorf("%w; members %s were moved already (run the same reset again to move the rest: it moves each member to the same place)", err, strings.Join(moved, ", "))
			}
			return res, err
		}
		moved = append(moved, mp.Member)
	}
	// The position first: a member joining between the two steps makes
	// its consumer from it.
	if err := c.movePositions(ctx, stream, group, res.Members); err != nil {
		if len(moved) > 0 {
			err = fmt.Errorf("%w; the consumers of members %s were moved, but a member whose consumer is made again (after inactivity) would start from its old place: run the same reset again", err, strings.Join(moved, ", "))
		}
		return res, err
	}
	for _, i := range live {
		mp := res.Members[i]
		if !mp.Recreate {
			continue
		}
		if err := c.js.DeleteConsumer(ctx, stream, mp.Consumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return res, fmt.Errorf("delete consumer %s on %s to remake it at sequence %d: %w", mp.Consumer, stream, mp.To, err)
		}
	}
	if resetHook != nil {
		resetHook()
	}
	return res, nil
}

// pauseLease is how long each pause of a reset lasts unless the reset
// renews it (extendPause, while it waits for instances to settle): a reset
// that dies, loses its connection or cannot resume leaves the member
// consumers paused for at most this long, never for the whole reset's
// bound.
var pauseLease = 10 * time.Second

// pauseAll pauses the consumers of plan's members at idx, returning the
// ones paused. The pause is a lease (pauseLease), so that consumers paused
// by a reset that never finished resume by themselves.
func (c *Client) pauseAll(ctx context.Context, stream string, plan ResetPlan, idx []int) ([]string, error) {
	var paused []string
	until := time.Now().Add(pauseLease)
	for _, i := range idx {
		name := plan.Members[i].Consumer
		if _, err := c.js.PauseConsumer(ctx, stream, name, until); err != nil {
			return paused, fmt.Errorf("pause consumer %s on %s: %w", name, stream, err)
		}
		paused = append(paused, name)
	}
	return paused, nil
}

// extendPause renews the lease of the consumers paused by a reset.
func (c *Client) extendPause(ctx context.Context, stream string, names []string) {
	until := time.Now().Add(pauseLease)
	for _, name := range names {
		_, _ = c.js.PauseConsumer(ctx, stream, name, until)
	}
}

// resumeAll resumes the consumers a reset paused, each tried a few times;
// the error names any left paused (until their lease runs out).
func (c *Client) resumeAll(ctx context.Context, stream string, names []string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var left []string
	var last error
	for _, name := range names {
		for try := 0; ; try++ {
			_, err := c.js.ResumeConsumer(rctx, stream, name)
			if err == nil || errors.Is(err, jetstream.ErrConsumerNotFound) {
				break
			}
			if try == 2 || rctx.Err() != nil {
				left, last = append(left, name), err
				break
			}
			time.Sleep(time.Duration(100<<try) * time.Millisecond)
		}
	}
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("resume consumers %s on %s: %w; they resume by themselves within %s (the pause is a lease the reset renews while it runs)", strings.Join(left, ", "), stream, last, pauseLease)
}

// drain waits, for paused consumers, until their instances hold nothing
// unacked, or what they hold stops changing for the ack wait (a message
// nak'ed while paused stays pending until the consumer resumes), or
// resetDrainMax passed; it records what was still unacked.
func (c *Client) drain(ctx context.Context, stream string, res *ResetResult, rms []resetMember, idx []int, paused []string) {
	deadline := time.Now().Add(resetDrainMax)
	renewed := time.Now()
	for _, i := range idx {
		quiet := max(rms[i].ci.Config.AckWait, time.Second)
		var last [2]uint64
		since := time.Now()
		for {
			ci, err := c.consumerInfo(ctx, stream, res.Members[i].Consumer)
			if err != nil || ci == nil {
				break
			}
			res.Members[i].Unacked = ci.NumAckPending
			if ci.NumAckPending == 0 {
				break
			}
			now := [2]uint64{uint64(ci.NumAckPending), ci.AckFloor.Stream}
			if now != last {
				last, since = now, time.Now()
			}
			if time.Since(since) >= quiet || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			if time.Since(renewed) >= pauseLease/3 {
				c.extendPause(ctx, stream, paused)
				renewed = time.Now()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
}

// movePositions saves each member's new place, so that a member whose
// consumer is made again (after inactivity) starts from there.
func (c *Client) movePositions(ctx context.Context, stream, group string, mps []ResetMemberPlan) error {
	si, err := c.js.Stream(ctx, stream)
	if err != nil {
		return err
	}
	kv, err := c.positions(ctx, si.CachedInfo().Config.Replicas)
	if err != nil {
		return fmt.Errorf("positions bucket: %w", err)
	}
	for _, mp := range mps {
		name := mp.Member
		if mp.Partition != nil {
			name = partitionPositionName(*mp.Partition)
		}
		if mp.To <= 1 {
			// From the start: no saved place, so a consumer made
			// again delivers all, as a new one does.
			if err := kv.Purge(ctx, positionKey(stream, group, name)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
				return fmt.Errorf("clear position of %s: %w", mp.Member, err)
			}
			continue
		}
		raw, _ := json.Marshal(Position{AckFloor: mp.To - 1, Saved: time.Now().UTC()})
		if _, err := kv.Put(ctx, positionKey(stream, group, name), raw); err != nil {
			return fmt.Errorf("save position of %s: %w", mp.Member, err)
		}
	}
	return nil
}
