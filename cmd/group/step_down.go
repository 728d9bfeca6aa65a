package group

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// NewCmdStepDown builds `cg <kind> step-down <stream> <group> <member>`.
func NewCmdStepDown(f *factory.Factory, k cg.Kind) *cobra.Command {
	return newMemberCmd(f, k, &cobra.Command{
		Use:     "step-down <stream> <group> <member>",
		Aliases: []string{"stepdown", "sd"},
		Short:   "Unpin a member's active instance so the server pins a standby",
		Example: fmt.Sprintf("  cg %s step-down ORDERS fulfillment m1", k),
	}, stepDownRun)
}

func stepDownRun(ctx context.Context, o *MemberOptions) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	res, err := c.StepDown(ctx, o.Kind, o.Stream, o.Group, o.Member)
	if err != nil {
		return hints.Wrap(err, o.Kind, o.Stream, o.Group)
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		return render.JSON(ios.Out, stepDownView(res))
	}
	cs := render.NewColorScheme(ios.ColorEnabled())
	if res.NothingPinned {
		// Nothing to release is the state a step-down asks for: success.
		fmt.Fprintf(ios.ErrOut, "%s: nothing to step down: %s\n", cs.Member(res.Member), res.Why)
		return nil
	}
	if len(res.Consumers) > 0 {
		fmt.Fprintf(ios.ErrOut, "%s: unpinned %d partition consumer(s) (%s); the server pins a standby (or the same instance, if it is alone) on each one's next pull\n",
			cs.Member(res.Member), len(res.Consumers), strings.Join(res.Consumers, " "))
		return nil
	}
	next := "the server pins a standby (or the same instance, if it is alone) on its next pull"
	if res.Waiting == 0 {
		// The pin outlived its instance (stopped, killed or frozen): no
		// standby is there to take over now.
		next = "no instance was pulling, so the server pins whichever instance of the member pulls next"
	}
	fmt.Fprintf(ios.ErrOut, "%s: unpinned instance %s of consumer %s; %s\n",
		cs.Member(res.Member), shortPin(res.PrevPinID), res.Consumer, next)
	return nil
}
