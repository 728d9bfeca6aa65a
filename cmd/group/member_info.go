package group

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// NewCmdMemberInfo builds `cg <kind> member-info <stream> <group> <member>`.
func NewCmdMemberInfo(f *factory.Factory, k cg.Kind) *cobra.Command {
	return newMemberCmd(f, k, &cobra.Command{
		Use:     "member-info <stream> <group> <member>",
		Aliases: []string{"memberinfo", "minfo"},
		Short:   "Show one member: its partitions, consumer, pin and backlog",
		Example: fmt.Sprintf("  cg %s member-info ORDERS fulfillment m1", k),
	}, memberInfoRun)
}

func memberInfoRun(ctx context.Context, o *MemberOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ms, err := c.MemberInfo(ctx, o.Kind, o.Stream, o.Group, o.Member)
	if err != nil {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	poison := readPoison(ctx, c, o.Kind, o.Stream, o.Group, ios.ErrOut)
	if o.F.JSON {
		v := memberStatusView(ms)
		v.DeadLettered, v.Parked = memberPoisonFields(poison, ms.Member)
		return render.JSON(ios.Out, v)
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	kv := render.NewKeyValues(ios.Out)
	kv.Add("Member", cs.Member(ms.Member))
	kv.Add("Group", o.Group+" on "+o.Stream)
	kv.Add("Partitions", fmt.Sprintf("%s (%d)", render.Ranges(ms.Partitions), len(ms.Partitions)))
	consumer := ms.Consumer
	if len(ms.PartitionConsumers) > 0 {
		consumer = fmt.Sprintf("one per partition (%d): %s-p<k>", len(ms.PartitionConsumers), o.Group)
	}
	if o.Kind.HasWorkStream() {
		consumer += " on " + o.Kind.WorkStream(o.Stream, o.Group)
	}
	kv.Add("Consumer", consumer)
	kv.Add("Filters", strings.Join(ms.Filters, " "))
	kv.Add("Status", status(cs, ms, o.Kind.HasWorkStream()))
	kv.Add("Pinned", pinned(ms, time.Now()))
	kv.Add("Standbys", strconv.Itoa(ms.Standbys))
	kv.Add("Pending", strconv.FormatUint(ms.Pending, 10))
	kv.Add("Ack pending", strconv.Itoa(ms.AckPending))
	if l := ms.Lag; l != nil {
		lag := strconv.FormatUint(l.Pending, 10) + " messages unacked"
		if l.Pending > 0 {
			lag += ", oldest waiting " + Age(*l)
		}
		kv.Add("Lag", lag)
	}
	kv.Add("Last delivered", "stream seq "+strconv.FormatUint(ms.Delivered, 10))
	if mp, ok := poison.Member(ms.Member); ok && (mp.DeadLettered > 0 || len(mp.Parked) > 0) {
		kv.Add("Poison", fmt.Sprintf("%d dead-lettered, %d parked", mp.DeadLettered, len(mp.Parked)))
	}
	if err := kv.Render(); err != nil {
		return err
	}
	if len(ms.PartitionConsumers) > 0 {
		fmt.Fprintln(ios.Out)
		return renderPartitionConsumers(ios.Out, cs, []health.MemberStatus{ms}, time.Now())
	}
	return nil
}
