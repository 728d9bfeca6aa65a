// Package dashboard is `cg dashboard`: the live web view of the groups
// (internal/dashboard) on a local address.
package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/pkg/cg"
)

// DefaultListen is where the dashboard listens unless told otherwise: a
// loopback address, so nothing off the machine can reach it.
const DefaultListen = "127.0.0.1:7777"

// Options are the bound arguments and flags of dashboard.
type Options struct {
	F             *factory.Factory
	Stream, Group string
	Listen        string
	ReadOnly      bool
	Every         time.Duration
	// Ready, when set, is called with the URL once the dashboard listens
	// (tests).
	Ready func(url string)
}

// NewCmd returns `cg dashboard`.
func NewCmd(f *factory.Factory) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:   "dashboard [<stream> [<group>]]",
		Short: "Serve a live web view of the groups: ownership, pins, lag, a timeline, metrics and controls",
		Long: "Serve a live web page of every group (or those of one stream, or one group): its partitions in\n" +
			"their owners' colours, each member's instances (pinned and standby), each partition's pending\n" +
			"messages and the age of the oldest, and a timeline of pins, unpins, failovers and rebalances as they\n" +
			"happen. The page's controls add and drop elastic members, create and delete mappings and step a\n" +
			"member down, through the same engine calls as the commands; --read-only turns them off.\n\n" +
			"It listens on " + DefaultListen + " unless --listen says otherwise (--listen 127.0.0.1:0 picks a free\n" +
			"port); any other address than a loopback one must be given explicitly. Once listening it prints\n" +
			"'dashboard: URL' on stderr and the URL alone on stdout, then serves until Ctrl-C.\n\n" +
			"Besides the page: /events (Server-Sent Events, one JSON object per data: line), /metrics\n" +
			"(Prometheus text, series cg_...) and /api/state (every group's state as JSON).",
		Example: "  cg dashboard\n  cg dashboard ORDERS --listen 127.0.0.1:0\n" +
			"  cg dashboard ORDERS fulfillment --read-only --every 1s",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 2 {
				return cmdutil.UsageErrorf("%s takes at most <stream> and <group> (got %d arguments)", cmd.CommandPath(), len(args))
			}
			for i, a := range args {
				if err := cg.ValidateName([]string{"stream", "group"}[i], a); err != nil {
					return cmdutil.NewUsageError(err)
				}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				opts.Stream = args[0]
			}
			if len(args) > 1 {
				opts.Group = args[1]
			}
			if opts.Every <= 0 {
				return cmdutil.UsageErrorf("--every must be more than 0, such as 500ms")
			}
			if _, _, err := net.SplitHostPort(opts.Listen); err != nil {
				return cmdutil.UsageErrorf("--listen %q is not host:port, such as 127.0.0.1:7777 (or 127.0.0.1:0 for a free port)", opts.Listen)
			}
			return Run(cmd.Context(), opts)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Listen, "listen", DefaultListen, "address to serve on (host:port; port 0 picks a free one)")
	fs.BoolVar(&opts.ReadOnly, "read-only", false, "turn the page's controls off (they answer 403)")
	cmdutil.DurationVar(fs, &opts.Every, "every", dashboard.DefaultEvery, "1s", "time between samples of the groups")
	return cmd
}

// Run serves the dashboard until ctx ends.
func Run(ctx context.Context, o *Options) error {
	c, err := o.F.Client()
	if err != nil {
		return err
	}
	ios := o.F.IOStreams
	if o.Stream != "" {
		if err := checkView(ctx, c, o.Stream, o.Group); err != nil {
			return err
		}
	}
	srv, err := dashboard.New(c, dashboard.Options{
		Stream: o.Stream, Group: o.Group, ReadOnly: o.ReadOnly, Every: o.Every,
		Logf: func(format string, args ...any) { fmt.Fprintf(ios.ErrOut, format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w; pick another address with --listen (127.0.0.1:0 picks a free port)", o.Listen, err)
	}
	url := dashboard.URL(ln.Addr())
	if host, _, _ := net.SplitHostPort(o.Listen); !isLoopback(host) {
		what := "and its controls can change groups"
		if o.ReadOnly {
			what = "read-only"
		}
		fmt.Fprintf(ios.ErrOut, "warning: listening on %s: the dashboard is reachable from other machines, %s\n", ln.Addr(), what)
	}
	fmt.Fprintf(ios.ErrOut, "dashboard: %s\n", url)
	fmt.Fprintln(ios.Out, url)
	if o.Ready != nil {
		o.Ready(url)
	}
	return srv.Serve(ctx, ln)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkView refuses a stream that does not exist, or a group not on it,
// before serving an empty page.
func checkView(ctx context.Context, c *cg.Client, stream, group string) error {
	if _, err := c.JetStream().Stream(ctx, stream); err != nil {
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return fmt.Errorf("%w: no stream %s; give an existing stream, or none to see every group", cg.ErrStreamNotFound, stream)
		}
		return err
	}
	if group == "" {
		return nil
	}
	refs, err := c.ListGroups(ctx)
	if err != nil {
		return fmt.Errorf("list groups: %s", hints.Error(err))
	}
	for _, r := range refs {
		if r.Stream == stream && r.Group == group {
			return nil
		}
	}
	return fmt.Errorf("%w: no static or elastic group %s on stream %s; list them with 'cg static ls %s' and 'cg elastic ls %s'",
		cg.ErrGroupNotFound, group, stream, stream, stream)
}
