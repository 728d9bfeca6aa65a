package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
)

// cg is also a plugin of the nats CLI (docs/plugin.md). The nats CLI is
// built on choria-io/fisk, whose plugins work like this:
//
//   - `nats plugins register cg /path/to/cg` runs `/path/to/cg
//     --fisk-introspect` and keeps what it prints (stdout and stderr
//     together) as the plugin's model: a JSON description of its commands,
//     positional arguments and flags.
//   - On every later start the nats CLI turns that model into a `nats cg …`
//     tree, parses the command line itself, and runs /path/to/cg with the
//     command path, the flags that were set (as --name=value, booleans as
//     --name) and then the positional arguments, in the same environment.
//   - A flag of the model that has the name of one of the nats CLI's own
//     global flags (--server, --context, --creds, …) is not added to the
//     tree: the nats CLI parses it as its own and hands its value to cg.
//     That is how `nats --context prod cg …` reaches cg's connection.
//
// So the model declares, on each command cg can run, every flag that
// command accepts, its connection flags included. Cobra is the source of
// truth: the model is derived from the same tree that runs.
const pluginIntrospectFlag = "--fisk-introspect"

// natsReservedShorts are the short flags of the nats CLI's own (-h for
// help, -s for --server): a plugin flag repeating one makes fisk refuse
// the whole nats command tree.
const natsReservedShorts = "hs"

// executeOrIntrospect answers the nats CLI's plugin handshake without
// touching the network, and runs the command line otherwise.
func executeOrIntrospect(ctx context.Context, f *factory.Factory, root *cobra.Command, args []string) int {
	if len(args) == 1 && args[0] == pluginIntrospectFlag {
		if err := introspect(f, root); err != nil {
			fmt.Fprintf(f.IOStreams.ErrOut, "error: %s\n", err)
			return cmdutil.Code(err)
		}
		return cmdutil.OK
	}
	return execute(ctx, f, root, args)
}

func introspect(f *factory.Factory, root *cobra.Command) error {
	enc := json.NewEncoder(f.IOStreams.Out)
	enc.SetEscapeHTML(false) // keep "<stream>" readable in the stored model
	return enc.Encode(pluginModel(root))
}

// The types below are the parts of fisk's ApplicationModel (model.go in
// github.com/choria-io/fisk, v0.9) that a plugin model uses, with fisk's
// JSON names. They are copied rather than imported so that cg does not
// depend on fisk for one JSON document.

type fiskApp struct {
	Name     string      `json:"name"`
	Help     string      `json:"help"`
	Version  string      `json:"version,omitempty"`
	Commands []*fiskCmd  `json:"commands,omitempty"`
	Flags    []*fiskFlag `json:"flags,omitempty"`
}

type fiskCmd struct {
	Name     string      `json:"name"`
	Aliases  []string    `json:"aliases,omitempty"`
	Help     string      `json:"help"`
	HelpLong string      `json:"help_long,omitempty"`
	Hidden   bool        `json:"hidden,omitempty"`
	Flags    []*fiskFlag `json:"flags,omitempty"`
	Args     []*fiskArg  `json:"args,omitempty"`
	Commands []*fiskCmd  `json:"commands,omitempty"`
}

type fiskFlag struct {
	Name        string   `json:"name"`
	Help        string   `json:"help"`
	Short       rune     `json:"short,omitempty"`
	Default     []string `json:"default,omitempty"`
	PlaceHolder string   `json:"place_holder,omitempty"`
	Hidden      bool     `json:"hidden,omitempty"`
	Boolean     bool     `json:"boolean"`
	Negatable   bool     `json:"negatable,omitempty"`
	Cumulative  bool     `json:"cumulative"`
}

type fiskArg struct {
	Name        string `json:"name"`
	Help        string `json:"help"`
	PlaceHolder string `json:"place_holder,omitempty"`
	Required    bool   `json:"required,omitempty"`
	Cumulative  bool   `json:"cumulative"`
}

// pluginModel describes the tree under root as a fisk plugin.
func pluginModel(root *cobra.Command) *fiskApp {
	v, _ := buildVersion()
	app := &fiskApp{Name: root.Name(), Help: root.Short, Version: v}
	for _, c := range root.Commands() {
		if m := pluginCmd(c); m != nil {
			app.Commands = append(app.Commands, m)
		}
	}
	return app
}

func pluginCmd(c *cobra.Command) *fiskCmd {
	// Help belongs to the nats CLI; a completion script would complete
	// `cg`, not `nats cg`.
	if c.Name() == "help" || c.Name() == "completion" {
		return nil
	}
	m := &fiskCmd{
		Name:     c.Name(),
		Aliases:  c.Aliases,
		Help:     c.Short,
		HelpLong: c.Long,
		Hidden:   c.Hidden,
	}
	if c.HasSubCommands() {
		// fisk runs only leaves, so a group's flags would be parsed and
		// then dropped: each leaf declares its inherited flags itself.
		for _, sub := range c.Commands() {
			if s := pluginCmd(sub); s != nil {
				m.Commands = append(m.Commands, s)
			}
		}
		return m
	}
	m.Args = pluginArgs(c)
	add := func(fl *pflag.Flag) {
		if fl.Name != "help" && fl.Name != "version" {
			m.Flags = append(m.Flags, pluginFlag(fl))
		}
	}
	c.LocalFlags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	return m
}

// pluginArgs declares a command's positional arguments as one cumulative
// argument: fisk hands separate arguments to the plugin in map order,
// which would shuffle <stream> <group> <member>, but one cumulative
// argument's values in the order they were typed. cg checks them itself.
func pluginArgs(c *cobra.Command) []*fiskArg {
	_, usage, _ := strings.Cut(c.Use, " ")
	usage = strings.TrimSpace(usage)
	if usage == "" {
		return nil
	}
	return []*fiskArg{{
		Name:        "args",
		Help:        "arguments, as for '" + c.CommandPath() + "'",
		PlaceHolder: usage,
		Required:    strings.HasPrefix(usage, "<"),
		Cumulative:  true,
	}}
}

func pluginFlag(fl *pflag.Flag) *fiskFlag {
	typ := fl.Value.Type()
	name, usage := pflag.UnquoteUsage(fl)
	m := &fiskFlag{
		Name:       fl.Name,
		Help:       usage,
		Hidden:     fl.Hidden,
		Boolean:    typ == "bool",
		Cumulative: strings.HasSuffix(typ, "Slice") || strings.HasSuffix(typ, "Array"),
	}
	if fl.Shorthand != "" && !strings.Contains(natsReservedShorts, fl.Shorthand) {
		m.Short = []rune(fl.Shorthand)[0]
	}
	if !m.Boolean && !m.Cumulative && fl.DefValue != "" {
		// Only shown in help: the nats CLI passes on the flags that were set.
		m.Default = []string{fl.DefValue}
	}
	if strings.Contains(fl.Usage, "`") {
		m.PlaceHolder = strings.ToUpper(name)
	}
	return m
}
