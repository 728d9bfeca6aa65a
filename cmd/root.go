// Package cmd is cg's command tree. It binds arguments and flags, calls
// the engine in pkg/cg and renders the results; exit codes are decided
// here, once, from the error a command returns.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
)

// Main runs cg with the process's arguments, streams and environment, and
// returns the exit status. SIGINT or SIGTERM cancels the command's
// context; a second signal kills the process the ordinary way.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return Run(ctx, os.Args[1:], iostreams.System(), os.Getenv)
}

// Run runs cg with args (without the program name) on a fresh command
// tree and returns the exit status; it never exits the process.
func Run(ctx context.Context, args []string, ios *iostreams.IOStreams, env func(string) string) int {
	f := factory.New(ios, env)
	defer f.Close()
	return executeOrIntrospect(ctx, f, NewRootCmd(f), args)
}

// NewRootCmd builds the whole command tree on f.
func NewRootCmd(f *factory.Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "cg <command>",
		Short: "Partitioned consumer groups on NATS JetStream",
		Long: `cg creates, runs and inspects partitioned consumer groups on NATS JetStream.

Messages that share a partition key are handled by one member at a time, in
order; different keys run in parallel. Any number of instances may run under
one member name: one is pinned, the others wait as hot standbys.

cg connects like the nats CLI: --server or NATS_URL, --context or the selected
nats context, then nats://127.0.0.1:4222. 'cg server' starts a local server.`,
		Example: `  cg server
  cg static create balanced orders workers 10 m1 m2
  cg static consume orders workers m1
  cg elastic create orders billing 10 --filter 'orders.*:1'
  cg elastic add orders billing m1 m2`,
		Version:       versionLine(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetVersionTemplate("cg version {{.Version}}\n")
	root.SetUsageTemplate(usageTemplate)
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return cmdutil.NewUsageError(err)
	})

	pf := root.PersistentFlags()
	f.AddConnFlags(pf)
	pf.BoolVar(&f.JSON, "json", false, "print JSON instead of text")
	pf.Var(&noColorFlag{f: f}, "no-color", "never print colors (also NO_COLOR)")
	pf.Lookup("no-color").NoOptDefVal = "true"

	root.SetHelpCommand(newCmdHelp())
	addGroupCommands(root, f)
	addCompletion(root, f)
	return root
}

// newCmdHelp replaces cobra's help command, which answers an unknown topic
// with the root's help and success.
func newCmdHelp() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			target, rest, err := c.Root().Find(args)
			if err != nil {
				return cmdutil.NewUsageError(err)
			}
			if len(rest) > 0 {
				return unknownCommand(target, rest[0])
			}
			return target.Help()
		},
	}
}

// noColorFlag turns color off as soon as the flag is parsed, so no
// command needs a hook to honour it.
type noColorFlag struct {
	f   *factory.Factory
	set bool
}

func (v *noColorFlag) String() string { return strconv.FormatBool(v.set) }
func (v *noColorFlag) Type() string   { return "bool" }
func (v *noColorFlag) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		// pflag already quotes the value and names the flag.
		return errors.New("--no-color takes true or false")
	}
	v.set = b
	if b {
		v.f.IOStreams.SetColorEnabled(false)
	}
	return nil
}

func execute(ctx context.Context, f *factory.Factory, root *cobra.Command, args []string) int {
	prepareTree(root)
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	root.SetArgs(args)
	// A refused request is never answered and never worth retrying: the
	// first permission violation ends the command at once.
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-f.RefusedC():
			cancel()
		case <-ctx.Done():
			return
		}
		// Some waits do not follow the command's context (a KV watch
		// being set up waits on its own timeout): give a clean stop a
		// moment, then close the connection under them.
		t := time.NewTimer(refusedGrace)
		defer t.Stop()
		select {
		case <-t.C:
			f.Close()
		case <-done:
		}
	}()
	cmd, err := root.ExecuteContextC(ctx)
	if r := f.Refused(); r != "" && !cmdutil.IsUsage(err) && !errors.Is(err, cmdutil.ErrSilent) {
		fmt.Fprintf(f.IOStreams.ErrOut, "error: %s\n", hints.Permission(r, permissionScope(f, cmd)))
		return cmdutil.Failed
	}
	if err != nil && !errors.Is(err, cmdutil.ErrSilent) {
		msg := hints.Error(err)
		if parent.Err() != nil && errors.Is(err, context.Canceled) && cmd != nil {
			// SIGINT/SIGTERM cancelled the command's context: say so, not
			// the raw "context canceled" of whichever request it cut.
			msg = "interrupted (SIGINT or SIGTERM) before '" + cmd.CommandPath() + "' finished"
		}
		fmt.Fprintf(f.IOStreams.ErrOut, "error: %s\n", msg)
		if cmdutil.IsUsage(err) && cmd != nil {
			if cmd.Name() == "help" && cmd.Parent() == root {
				cmd = root
			}
			fmt.Fprintf(f.IOStreams.ErrOut, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return cmdutil.Code(err)
}

// prepareTree makes every argument error a usage error and gives every
// command group a way to reject unknown subcommands (cobra only does that
// at the root, and prints help with success elsewhere).
func prepareTree(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return unknownCommand(c, args[0])
			}
			return c.Help()
		}
	}
	if check := c.Args; check != nil {
		c.Args = func(c *cobra.Command, args []string) error {
			return cmdutil.NewUsageError(check(c, args))
		}
	}
	for _, sub := range c.Commands() {
		prepareTree(sub)
	}
}

func unknownCommand(c *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, c.CommandPath())
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2 // cobra's own default, set lazily
	}
	if s := c.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", strings.Join(s, `" or "`))
	}
	return cmdutil.UsageErrorf("%s", msg)
}

// usageTemplate is cobra's, except that a command group (which cg makes
// runnable only to reject unknown subcommands) shows no "cg x [flags]" line.
const usageTemplate = `Usage:{{if and .Runnable (not .HasAvailableSubCommands)}}
  {{.UseLine}}{{end}}{{if .HasAvailableSubCommands}}
  {{.CommandPath}} [command]{{end}}{{if gt (len .Aliases) 0}}

Aliases:
  {{.NameAndAliases}}{{end}}{{if .HasExample}}

Examples:
{{.Example}}{{end}}{{if .HasAvailableSubCommands}}

Available Commands:{{range .Commands}}{{if (or .IsAvailableCommand (eq .Name "help"))}}
  {{rpad .Name .NamePadding }} {{.Short}}{{end}}{{end}}{{end}}{{if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableInheritedFlags}}

Global Flags:
{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}{{end}}{{if .HasAvailableSubCommands}}

Use "{{.CommandPath}} [command] --help" for more information about a command.{{end}}
`

// refusedGrace is how long a refused command may take to stop cleanly
// before its connection is closed under it.
const refusedGrace = time.Second

// permissionScope is the group a refused command acted on, read off its
// place in the tree (static or elastic) and its positional arguments.
func permissionScope(f *factory.Factory, cmd *cobra.Command) hints.PermissionScope {
	s := hints.PermissionScope{Domain: f.Conn.JSDomain}
	if cmd == nil {
		return s
	}
	for c := cmd; c != nil; c = c.Parent() {
		if k, err := cg.ParseKind(c.Name()); err == nil {
			s.Kind = k
			break
		}
	}
	args := cmd.Flags().Args()
	if len(args) >= 2 {
		s.Stream, s.Group = args[0], args[1]
	}
	if len(args) >= 3 && cmd.Parent() != nil && cmd.Parent().Name() != "create" {
		s.Member = args[2]
	}
	return s
}
