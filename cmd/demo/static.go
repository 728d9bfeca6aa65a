package demo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// transform stamps the static walkthrough's stream with the partition.
const transform = "{{partition(10,1)}}.orders.{{wildcard(1)}}"

// staticWalk is the seed article's static walkthrough: a partitioned
// stream, a static group, a hot standby, a step-down and a kill.
type staticWalk struct{ *demo }

func (d *staticWalk) setup(ctx context.Context) error {
	o := d.o
	if err := d.createStream(ctx, subjects, transform); err != nil {
		return err
	}
	k := d.keys[0]
	d.step(fmt.Sprintf("Created stream %s on %s, stamped by the transform %s", streamName, subjects, transform),
		"Every subject gets its partition prepended, an FNV-1a hash of the customer token mod 10,",
		fmt.Sprintf("so all of one customer's orders land in one partition: orders.%s -> %d.orders.%s.", k, partition.PartitionOfKey(k, partitions), k),
		"(nats stream add ORDERS --subjects 'orders.*' --transform-source 'orders.*' --transform-destination '"+transform+"')")

	// The static group, through the engine as `cg static create` does.
	a, err := d.createStatic(ctx, "m1", "m2")
	if err != nil {
		return err
	}
	d.step(fmt.Sprintf("Created static group %s over %d partitions, balanced: %s owns %s, %s owns %s",
		groupName, partitions, d.cs.Member("m1"), render.Ranges(a.MemberPartitions("m1")), d.cs.Member("m2"), render.Ranges(a.MemberPartitions("m2"))),
		"Each member gets one durable consumer, fulfillment-<member>, filtered to its partitions and",
		"pinned: whatever the number of instances of a member, the server feeds one of them.",
		"(cg static create balanced ORDERS fulfillment 10 m1 m2 --filter '>')")

	d.step("Starting three instances, each on its own NATS connection",
		"m1/a and m1/b are two instances of member m1: one is pinned, the other waits as a hot standby.",
		fmt.Sprintf("m2/a runs member m2 with %d handler calls at once: different customers at once, each", o.Concurrency),
		fmt.Sprintf("customer's orders still one at a time, in order. Each handler works %v on a message, then double-acks it.", o.Sleep),
		"(cg static consume ORDERS fulfillment m1 --sleep "+o.Sleep.String()+", twice; for m2 the same with --concurrency "+strconv.Itoa(o.Concurrency)+")")
	for _, spec := range [][2]string{{"m1", "m1/a"}, {"m1", "m1/b"}, {"m2", "m2/a"}} {
		concurrency := 1
		if spec[0] == "m2" {
			concurrency = o.Concurrency
		}
		if err := d.startMember(ctx, cg.KindStatic, spec[0], spec[1], concurrency); err != nil {
			return err
		}
	}
	return nil
}

func (d *staticWalk) steps(ctx context.Context, v *Verdict) error {
	o := d.o
	if o.Concurrency > 1 {
		v.M2Concurrency = o.Concurrency
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return err
	}
	if !poll(ctx, stepLimit, func() bool { _, ok := d.clock.holder("m1"); return ok }) {
		return fmt.Errorf("m1 handled no message within %v of traffic", stepLimit)
	}
	d.staticStatus(ctx, "Status after warming up")

	// Step-down while traffic flows.
	d.step("Stepping m1 down: unpinning its active instance while traffic flows",
		"The server clears the pin of consumer fulfillment-m1 and pins whichever instance pulls next;",
		"the message in hand is finished and acked first (max_ack_pending 1), so order holds.",
		"(cg static step-down ORDERS fulfillment m1)")
	v.StepDown = &Failover{}
	stepAt := time.Now()
	sd, err := d.admin.StepDown(ctx, cg.KindStatic, streamName, groupName, "m1")
	if err != nil {
		d.logf("step-down failed: %v", err)
	} else {
		d.logf("unpinned pin %s of %s", short(sd.PrevPinID), sd.Consumer)
		var h handoff
		if poll(ctx, stepLimit, func() (ok bool) { h, ok = d.clock.handoffAfter("m1", stepAt); return ok }) {
			*v.StepDown = Failover{Measured: true, From: h.From, To: h.To, GapMS: ms(h.Gap)}
			d.logf("m1's work moved %s -> %s: %v between the last message under the old pin and the first under the new",
				d.inst(h.From), d.inst(h.To), h.Gap.Round(time.Millisecond))
			if h.From == h.To {
				d.logf("(the server re-pinned the same instance: it was the first to pull again)")
			}
		} else {
			d.logf("no handoff seen within %v of the step-down", stepLimit)
		}
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return err
	}
	d.staticStatus(ctx, "Status after the step-down")

	// Kill the pinned instance: no stop, no unpin.
	victim := d.pinned(ctx, "m1")
	if victim == nil {
		return errors.New("m1 has no pinned instance to kill")
	}
	ttl := max(o.AckWait, time.Second)
	d.step(fmt.Sprintf("Killing %s, m1's pinned instance: closing its connection without a goodbye", d.inst(victim.name)),
		"No stop and no unpin, as when a process crashes. Left alone, the server would keep the pin until the",
		fmt.Sprintf("pinned TTL (%v) passed without a pull. But the standby checks every 250ms that the pinned instance", ttl),
		"is still connected: it sees the connection gone, unpins it and hands back the message it held unacked,",
		"which the standby then handles (possibly a second time: handlers must be idempotent).")
	v.Kill = &Failover{}
	killAt := time.Now()
	victim.killed.Store(true)
	victim.nc.Close()
	var h handoff
	if poll(ctx, 3*ttl+stepLimit, func() (ok bool) { h, ok = d.clock.handoffAfter("m1", killAt); return ok }) {
		*v.Kill = Failover{Measured: true, From: h.From, To: h.To, GapMS: ms(h.Gap)}
		d.logf("m1's work moved %s -> %s: %v between the victim's last message and the standby's first",
			d.inst(h.From), d.inst(h.To), h.Gap.Round(time.Millisecond))
	} else {
		d.logf("no standby took over m1 within %v of the kill", 3*ttl+stepLimit)
	}
	if err := sleepCtx(ctx, o.Phase); err != nil {
		return err
	}
	d.staticStatus(ctx, "Status after the failover")
	return nil
}

// pinned finds the instance of member holding the server's pin, or else
// the one that handled its latest message.
func (d *staticWalk) pinned(ctx context.Context, member string) *instance {
	if ms, err := d.admin.MemberInfo(ctx, cg.KindStatic, streamName, groupName, member); err == nil && ms.PinID != "" {
		for _, in := range d.instances {
			if in.member == member && in.m != nil && in.m.PinID() == ms.PinID {
				return in
			}
		}
	}
	if name, ok := d.clock.holder(member); ok {
		for _, in := range d.instances {
			if in.name == name {
				return in
			}
		}
	}
	return nil
}
