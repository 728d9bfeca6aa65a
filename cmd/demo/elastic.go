package demo

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// elasticFilter hashes the customer, the first '*' of orders.*.
var elasticFilter = cg.PartitioningFilter{Filter: subjects, PartitioningWildcards: []int{1}}

// elasticWalk is the seed article's elastic walkthrough: a plain stream,
// an elastic group, members running before they are added, and live
// membership changes: an operator's adds and drops, then a dynamic member
// that adds itself on its start and drops itself on its clean stop.
type elasticWalk struct {
	*demo
	// phase is the traffic time between the steps: --phase, or less when
	// the steps would not fit in the demo's limit at that pace.
	phase time.Duration
	// dynJoined and dynLeft: the dynamic member's own membership changes
	// were seen in the group's configuration.
	dynJoined, dynLeft bool
}

// dynamicMember is the member the walkthrough starts with --dynamic.
const dynamicMember = "m4"

// elasticPhases is how many phases the elastic steps take: half of one
// before the first add, one per operator change, half of one after each
// of the dynamic member's start and stop.
const elasticPhases = 5.5

func (d *elasticWalk) setup(ctx context.Context) error {
	o := d.o
	if _, err := d.admin.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{subjects}}); err != nil {
		return fmt.Errorf("create stream %s: %w", streamName, err)
	}
	d.step(fmt.Sprintf("Created stream %s on %s, plain: no transform, no partition token", streamName, subjects),
		"The stream and its producers stay as they are; the elastic group partitions a copy of its own.",
		"(nats stream add ORDERS --subjects 'orders.*' --defaults)")

	// The elastic group, through the engine as `cg elastic create` does.
	res, err := d.admin.CreateElastic(ctx, streamName, groupName, cg.ElasticConfig{
		MaxMembers: partitions, PartitioningFilters: []cg.PartitioningFilter{elasticFilter},
	})
	if err != nil {
		return fmt.Errorf("create group: %w", err)
	}
	k := d.keys[0]
	why := []string{fmt.Sprintf("It made the hidden work-queue stream %s, which sources %s through the transform", res.WorkStream, streamName)}
	for _, t := range res.Transforms {
		why = append(why, fmt.Sprintf("  %s -> %s", t.Source, t.Destination))
	}
	why = append(why,
		fmt.Sprintf("so orders.%s is stored there as %d.orders.%s. Members consume from that stream and ack", k, partition.PartitionOfKey(k, partitions), k),
		"what they finish; it keeps only what is not handled yet.",
		"(cg elastic create ORDERS fulfillment 10 --filter '"+elasticFilter.String()+"')")
	d.step(fmt.Sprintf("Created elastic group %s over %d partitions, hashing the customer (wildcard 1 of %s), with no members yet",
		groupName, partitions, elasticFilter.Filter), why...)

	d.step("Starting m1, m2 and m3 before they are members, each on its own NATS connection",
		"A member works only once it is both in the group's configuration and running: these",
		"instances watch the configuration and wait until an add names them.",
		fmt.Sprintf("Each handler works %v on a message, then double-acks it (elastic groups need explicit acks).", o.Sleep),
		"(cg elastic consume ORDERS fulfillment m1 --sleep "+o.Sleep.String()+", and the same for m2 and m3)")
	for _, member := range []string{"m1", "m2", "m3"} {
		if err := d.startMember(ctx, cg.KindElastic, member, member+"/a", 1); err != nil {
			return err
		}
	}
	// Let them say that they wait before the story moves on.
	poll(ctx, stepLimit, func() bool {
		for _, in := range d.instances {
			if !in.waited.Load() {
				return false
			}
		}
		return true
	})
	return nil
}

func (d *elasticWalk) steps(ctx context.Context, v *Verdict) error {
	d.phase = d.fitPhase(ctx)
	if err := sleepCtx(ctx, d.phase/2); err != nil {
		return err
	}
	d.status(ctx, "Status before any member is added",
		"Nobody consumes yet: the traffic waits in the work stream, already partitioned.")

	changes := []struct {
		drop    bool
		members []string
		head    string
		why     []string
	}{
		{false, []string{"m1", "m2"}, "Adding m1 and m2 while traffic flows", []string{
			"One compare-and-set of the group's configuration. Every running instance watches it and",
			"rebalances itself: m1 and m2 each create their consumer on ORDERS-fulfillment, filtered to",
			"their partitions, and start with the oldest message waiting.",
		}},
		{false, []string{"m3"}, "Adding m3: a third member takes partitions from both", []string{
			"The balanced assignment keeps contiguous blocks, leftovers round-robin, so few partitions move.",
			"A member that loses partitions finishes the message in hand, acks it and lets go before the",
			"new owner takes over, so per-key order holds across the handoff.",
		}},
		{true, []string{"m1"}, "Dropping m1 while traffic flows: the survivors pick up its partitions", []string{
			"No teardown: m1's instance keeps running, lets go of its partitions and waits to be added",
			"again; m2 and m3 take the orphaned partitions from the oldest message waiting in each.",
		}},
		{false, []string{"m1"}, "Adding m1 back", []string{
			"The instance that has been waiting all along takes its partitions again, with no restart.",
		}},
	}
	for _, c := range changes {
		verb := "add"
		if c.drop {
			verb = "drop"
		}
		change := verb + " " + strings.Join(c.members, " ")
		d.step(c.head, slices.Concat(c.why, []string{"(cg elastic " + verb + " ORDERS fulfillment " + strings.Join(c.members, " ") + ")"})...)
		r, err := d.change(ctx, c.drop, c.members)
		if err != nil {
			return fmt.Errorf("%s: %w", change, err)
		}
		r.Change = change
		v.Rebalances = append(v.Rebalances, r)
		d.status(ctx, "Status after "+change)
	}
	return d.dynamicSteps(ctx, v)
}

// fitPhase is the phase the steps run at: --phase, unless the steps at
// that pace would run past the traffic (which ends where the drain's
// time begins), with a second kept for the last step's effect.
func (d *elasticWalk) fitPhase(ctx context.Context) time.Duration {
	room := time.Until(deadlineOf(ctx)) - drainLimit - time.Second
	fit := time.Duration(float64(room) / elasticPhases).Truncate(100 * time.Millisecond)
	if d.o.Phase <= fit || fit <= 0 {
		return d.o.Phase
	}
	d.logf("(--phase %v: the walkthrough's steps would outlast its traffic; each runs %v)", d.o.Phase, fit)
	return fit
}

// change adds or drops members, narrates the moves and times the
// rebalance, then lets traffic flow for the rest of the phase.
func (d *elasticWalk) change(ctx context.Context, drop bool, members []string) (Rebalance, error) {
	var r Rebalance
	// Marked before the update: a member may see the new configuration
	// (it watches the key) before the update's reply reaches us.
	d.served.mark(time.Now())
	var mc cg.MembershipChange
	var err error
	if drop {
		mc, err = d.admin.DropMembers(ctx, streamName, groupName, members)
	} else {
		mc, err = d.admin.AddMembers(ctx, streamName, groupName, members)
	}
	at := time.Now()
	if err != nil {
		return r, err
	}
	r.Moves = mc.Moves
	if r.Moves == nil {
		r.Moves = []partition.Move{}
	}
	d.logf("configuration revision %d: members %s; %s", mc.Revision, d.memberList(mc.Config.MemberNames()), d.movesText(mc.Moves))

	limit := stepBudget(ctx, stepLimit)
	if drop {
		d.timeDrop(ctx, &r, mc.Moves, mc.Changed, at, limit, fromUpdate)
	} else {
		d.timeAdd(ctx, &r, mc.Config.Assignment(), mc.Changed, at, limit, fromUpdate)
	}
	return r, sleepCtx(ctx, d.phase-time.Since(at))
}

// timedFrom words the moment a rebalance is timed from, in the
// narration: after it, and within a limit of it.
type timedFrom struct{ after, of string }

var fromUpdate = timedFrom{after: "after the update returned", of: "of the update"}

// timeDrop waits, at most limit, until every partition that moves from
// one of the dropped members has been served by its new owner, and
// records how long each took from at (when the update returned, or the
// dynamic member's stop began).
func (d *elasticWalk) timeDrop(ctx context.Context, r *Rebalance, moves []partition.Move, dropped []string, at time.Time, limit time.Duration, from timedFrom) {
	busy := d.trafficPartitions()
	for _, mv := range moves {
		if slices.Contains(dropped, mv.From) {
			r.Partitions = append(r.Partitions, PartitionLatency{Partition: mv.Partition, From: mv.From, To: mv.To, Idle: busy[mv.Partition] == 0})
		}
	}
	poll(ctx, limit, func() bool {
		for _, pl := range r.Partitions {
			if _, ok := d.served.firstIn(pl.Partition, pl.To); !ok && !pl.Idle {
				return false
			}
		}
		return true
	})
	r.Measured = true
	for i, pl := range r.Partitions {
		t, ok := d.served.firstIn(pl.Partition, pl.To)
		switch {
		case pl.Idle:
			d.logf("partition %d (%s -> %s) carries none of the traffic's keys: nothing to serve", pl.Partition, pl.From, d.cs.Member(pl.To))
		case ok:
			r.Partitions[i].Measured = true
			r.Partitions[i].LatencyMS = msSince(at, t)
			r.LatencyMS = max(r.LatencyMS, r.Partitions[i].LatencyMS)
			d.logf("partition %d served by %s %v %s", pl.Partition, d.cs.Member(pl.To), dur(r.Partitions[i].LatencyMS), from.after)
		default:
			r.Measured = false
			d.logf("%s", d.cs.Red(fmt.Sprintf("partition %d not served by %s within %v %s", pl.Partition, pl.To, limit, from.of)))
		}
	}
	if r.Measured && len(r.Partitions) > 0 {
		d.logf("every orphaned partition served by its new owner within %v", dur(r.LatencyMS))
		slowest := slices.MaxFunc(r.Partitions, func(a, b PartitionLatency) int { return cmp.Compare(a.LatencyMS, b.LatencyMS) })
		if n := busy[slowest.Partition]; n > 0 {
			d.logf("(that includes the wait for each partition's next message: partition %d carries %d of the %d keys, so at %s it sees one about every %v)",
				slowest.Partition, n, len(d.keys), traffic.FormatRate(d.o.Rate), d.every(n).Round(time.Millisecond))
		}
	}
}

// timeAdd waits, at most limit, until every added member has handled a
// message, and records how long each took from at (when the update
// returned, or the dynamic member started); owners is the assignment
// after the add.
func (d *elasticWalk) timeAdd(ctx context.Context, r *Rebalance, owners partition.Assignment, added []string, at time.Time, limit time.Duration, from timedFrom) {
	busy := d.trafficPartitions()
	for _, m := range added {
		idle := true
		for _, p := range owners.MemberPartitions(m) {
			idle = idle && busy[p] == 0
		}
		r.Members = append(r.Members, MemberLatency{Member: m, Idle: idle})
	}
	poll(ctx, limit, func() bool {
		for _, ml := range r.Members {
			if _, ok := d.served.firstBy(ml.Member); !ok && !ml.Idle {
				return false
			}
		}
		return true
	})
	r.Measured = true
	for i, ml := range r.Members {
		t, ok := d.served.firstBy(ml.Member)
		switch {
		case ml.Idle:
			d.logf("%s owns no partition that the traffic's keys hash to: nothing to handle", d.cs.Member(ml.Member))
		case ok:
			r.Members[i].Measured = true
			r.Members[i].LatencyMS = msSince(at, t)
			r.LatencyMS = max(r.LatencyMS, r.Members[i].LatencyMS)
			d.logf("%s handled its first message %v %s", d.cs.Member(ml.Member), dur(r.Members[i].LatencyMS), from.after)
		default:
			r.Measured = false
			d.logf("%s", d.cs.Red(fmt.Sprintf("%s handled no message within %v %s", ml.Member, limit, from.of)))
		}
	}
}

// trafficPartitions are the partitions some key of the traffic hashes to:
// the others never see a message, so no handoff of theirs can be timed.
func (d *elasticWalk) trafficPartitions() map[int]int {
	out := map[int]int{}
	for _, k := range d.keys {
		out[partition.PartitionOfKey(k, partitions)]++
	}
	return out
}

// every is how often a partition that keysIn of the traffic's keys hash
// to sees a message.
func (d *elasticWalk) every(keysIn int) time.Duration {
	return time.Duration(float64(len(d.keys)) / (d.o.Rate * float64(keysIn)) * float64(time.Second))
}

// msSince is how long after at, in milliseconds, t came; never negative:
// a member may take over before the update's reply reaches the demo.
func msSince(at, t time.Time) float64 { return ms(max(t.Sub(at), 0)) }

func (d *elasticWalk) memberList(ms []string) string {
	if len(ms) == 0 {
		return "none"
	}
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = d.cs.Member(m)
	}
	return strings.Join(out, " ")
}

// movesText groups moves by old and new owner: "0-4 none -> m1, 5-9 none -> m2".
func (d *elasticWalk) movesText(moves []partition.Move) string {
	if len(moves) == 0 {
		return "no partition moves"
	}
	type pair struct{ from, to string }
	var order []pair
	by := map[pair][]int{}
	for _, mv := range moves {
		k := pair{mv.From, mv.To}
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], mv.Partition)
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %s -> %s", render.Ranges(by[k]), d.ownerName(k.from), d.ownerName(k.to))
	}
	return "moves " + strings.Join(parts, ", ")
}

func (d *elasticWalk) ownerName(m string) string {
	if m == "" {
		return "none"
	}
	return d.cs.Member(m)
}

// status prints the group as `cg elastic info` shows it: members with
// their pinned instance, then owner, backlog and latest handler per
// partition, and the work stream's sourcing lag.
func (d *elasticWalk) status(ctx context.Context, title string, why ...string) {
	gi, err := d.admin.Info(ctx, cg.KindElastic, streamName, groupName)
	if err != nil {
		d.logf("%s: %v", title, err)
		return
	}
	by := d.verifier.Stats().ByWho
	var b strings.Builder
	t := render.NewTable(&b, "MEMBER", "PARTITIONS", "PINNED", "PENDING", "ACK PENDING", "HANDLED")
	for _, ms := range gi.Members {
		name := d.cs.Member(ms.Member)
		if ms.Dynamic {
			name += " (dynamic)"
		}
		t.AddRow(name, render.Ranges(ms.Partitions), d.pinnedCell(ms), fmt.Sprint(ms.Pending),
			fmt.Sprint(ms.AckPending), d.handledCell(ms.Member, by))
	}
	for _, in := range d.instances {
		if !gi.Config.IsMember(in.member) {
			state := " (running, waiting to be added)"
			if in.stopped() {
				state = " (stopped: it dropped itself)"
			}
			t.AddRow(d.cs.Faint(in.member), "not a member", "-", "-", "-", d.handledCell(in.member, by)+state)
		}
	}
	_ = t.Render()
	b.WriteString("\n")
	pt := render.NewTable(&b)
	head, owner, backlog, last := []string{"PARTITION"}, []string{"OWNER"}, []string{"BACKLOG"}, []string{"LAST HANDLED BY"}
	var waiting uint64
	for p := range gi.Partitions {
		head = append(head, strconv.Itoa(p))
		o := "-"
		if p < len(gi.Owners) && gi.Owners[p] != "" {
			o = d.cs.Member(gi.Owners[p])
		}
		owner = append(owner, o)
		n := uint64(0)
		if p < len(gi.Backlog) {
			n = gi.Backlog[p]
		}
		waiting += n
		backlog = append(backlog, strconv.FormatUint(n, 10))
		l := "-"
		if h, ok := d.served.lastIn(p); ok {
			l = d.inst(h.inst)
		}
		last = append(last, l)
	}
	pt.AddRow(head...)
	pt.AddRow(owner...)
	pt.AddRow(backlog...)
	pt.AddRow(last...)
	_ = pt.Render()
	lag := "unknown"
	if gi.SourcingLag != nil {
		lag = strconv.FormatUint(*gi.SourcingLag, 10)
	}
	fmt.Fprintf(&b, "\nwork stream %s: %s waiting; sourcing lag %s (messages of %s not copied yet)\n",
		gi.WorkStream, plural(waiting, "message"), lag, streamName)
	d.block(title, b.String(), why...)
}

// rebalanceText is a rebalance's line in the text verdict.
func rebalanceText(d *demo, r Rebalance) string {
	var parts []string
	switch {
	case r.Dynamic && r.Change == dynamicJoin:
		parts = append(parts, fmt.Sprintf("%s added itself %v after its start", d.cs.Member(dynamicMember), dur(r.ChangeMS)))
	case r.Dynamic && r.Change == dynamicLeave:
		parts = append(parts, fmt.Sprintf("%s dropped itself %v after its stop began", d.cs.Member(dynamicMember), dur(r.ChangeMS)))
	}
	for _, ml := range r.Members {
		switch {
		case ml.Idle:
			parts = append(parts, d.cs.Member(ml.Member)+" idle (no key hashes to its partitions)")
		case ml.Measured && r.Dynamic:
			parts = append(parts, fmt.Sprintf("first message after %v", dur(ml.LatencyMS)))
		case ml.Measured:
			parts = append(parts, fmt.Sprintf("%s first message after %v", d.cs.Member(ml.Member), dur(ml.LatencyMS)))
		default:
			parts = append(parts, d.cs.Member(ml.Member)+" handled nothing in time")
		}
	}
	if len(r.Partitions) > 0 {
		var order []string
		to := map[string][]int{}
		var missed []string
		for _, pl := range r.Partitions {
			switch {
			case pl.Idle:
			case pl.Measured:
				if _, ok := to[pl.To]; !ok {
					order = append(order, pl.To)
				}
				to[pl.To] = append(to[pl.To], pl.Partition)
			default:
				missed = append(missed, strconv.Itoa(pl.Partition))
			}
		}
		var served []string
		for _, m := range order {
			served = append(served, render.Ranges(to[m])+" -> "+d.cs.Member(m))
		}
		s := "orphaned " + strings.Join(served, ", ")
		if len(missed) > 0 {
			s += "; not served in time: " + strings.Join(missed, ",")
		} else {
			s += fmt.Sprintf(": all served within %v", dur(r.LatencyMS))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

func plural(n uint64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
