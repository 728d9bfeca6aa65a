package cmd

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/pkg/cg"
)

// completionTimeout bounds all one completion does, dial included: the
// shell waits for it on every TAB.
const completionTimeout = 2 * time.Second

// addCompletion adds cobra's `completion` command now rather than at
// execution, so the generated docs show it, and teaches every command to
// complete stream, group and member names from the server. Which argument
// is which comes from the Use line ("drop <stream> <group> <member>..."),
// so a new command that follows the convention completes with no code of
// its own; one that sets ValidArgs or ValidArgsFunction keeps its own.
func addCompletion(root *cobra.Command, f *factory.Factory) {
	root.InitDefaultCompletionCmd()
	if c, _, err := root.Find([]string{"completion"}); err == nil && c != root && c.Example == "" {
		c.Long += "\nBesides commands and flags, the scripts complete stream, group and member names from the\n" +
			"server, reached as the command line being completed would reach it (--server, --context,\n" +
			"NATS_URL, ...). The server has " + completionTimeout.String() + " to answer; without one, nothing is offered.\n"
		c.Example = "  source <(cg completion bash)\n" +
			"  cg completion zsh > \"${fpath[1]}/_cg\"\n" +
			"  cg completion fish > ~/.config/fish/completions/cg.fish"
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		completePositionals(c, f)
		completeFlags(c, f)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// completePositionals sets c's ValidArgsFunction when its Use line names
// a stream, group or member argument.
func completePositionals(c *cobra.Command, f *factory.Factory) {
	if c.ValidArgsFunction != nil || len(c.ValidArgs) > 0 {
		return
	}
	names, repeats := positionals(c.Use)
	if !slices.ContainsFunc(names, completable) {
		return
	}
	c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		nameAt := func(i int) string {
			switch {
			case i < len(names):
				return names[i]
			case repeats:
				return names[len(names)-1]
			}
			return ""
		}
		what := nameAt(len(args))
		if !completable(what) {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var q query
		for i, a := range args {
			switch nameAt(i) {
			case "stream":
				q.stream = a
			case "group":
				q.group = a
			case what: // a repeated member: offer each once
				q.given = append(q.given, a)
			}
		}
		return completeName(c, f, what, q, toComplete)
	}
}

// completeFlags completes a command's own --stream, --group and --member
// flags (cg partition --stream S --group G), the others read from the
// flags already given.
func completeFlags(c *cobra.Command, f *factory.Factory) {
	for _, name := range []string{"stream", "group", "member"} {
		fl := c.Flags().Lookup(name)
		if fl == nil {
			fl = c.PersistentFlags().Lookup(name)
		}
		if fl == nil || fl.Value.Type() != "string" {
			continue
		}
		if _, ok := c.GetFlagCompletionFunc(name); ok {
			continue
		}
		_ = c.RegisterFlagCompletionFunc(name, func(c *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
			return completeName(c, f, name, query{stream: flagValue(c, "stream"), group: flagValue(c, "group")}, toComplete)
		})
	}
}

func flagValue(c *cobra.Command, name string) string {
	if fl := c.Flags().Lookup(name); fl != nil {
		return fl.Value.String()
	}
	return ""
}

// positionals reads the argument names of a Use line such as
// "add <stream> <group> <member>..." or "delete-mapping <stream> <group>
// [member...]", and whether the last one repeats.
func positionals(use string) (names []string, repeats bool) {
	fields := strings.Fields(use)
	if len(fields) < 2 {
		return nil, false
	}
	for _, f := range fields[1:] {
		rep := strings.HasSuffix(f, "...")
		f = strings.Trim(strings.TrimSuffix(f, "..."), "<>[]")
		if strings.HasSuffix(f, "...") {
			rep, f = true, strings.TrimSuffix(f, "...")
		}
		names, repeats = append(names, f), rep
	}
	return names, repeats
}

func completable(name string) bool {
	return name == "stream" || name == "group" || name == "member"
}

// query is what the command line already says about the name to complete.
type query struct {
	stream, group string
	given         []string // values already given for a repeated argument
}

// completeName lists the names that fit the argument what of c. Nothing a
// failure says reaches the shell: no server, no answer in time, a stream
// that does not exist all end in no candidates and
// ShellCompDirectiveError, which every shell's script takes silently.
func completeName(c *cobra.Command, f *factory.Factory, what string, q query, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	// A create names a new group (and a static group's members), add names
	// new members: nobody knows those yet.
	if (what == "group" && createsGroup(c)) || (what == "member" && (createsGroup(c) || c.Name() == "add")) {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	base := c.Context()
	if base == nil {
		base = context.Background()
	}
	ctx, cancel := context.WithTimeout(base, completionTimeout)
	defer cancel()
	client, err := completionClient(ctx, f)
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	kinds := kindsOf(c)
	var names []string
	switch what {
	case "stream":
		names, err = streamNames(ctx, client, kinds, createsGroup(c))
	case "group":
		var byStream map[string][]string
		byStream, err = groupsByStream(ctx, client, kinds)
		names = byStream[q.stream]
	case "member":
		names, err = memberNames(ctx, client, kinds, q.stream, q.group)
	}
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	var out []cobra.Completion
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) && !slices.Contains(q.given, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completionClient dials with the command line's connection settings, no
// longer than ctx allows: the factory's dial only knows its own timeout.
func completionClient(ctx context.Context, f *factory.Factory) (*cg.Client, error) {
	if f.Conn.Timeout > completionTimeout {
		f.Conn.Timeout = completionTimeout
	}
	type dialed struct {
		c   *cg.Client
		err error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, err := f.Client()
		ch <- dialed{c, err}
	}()
	select {
	case d := <-ch:
		return d.c, d.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// createsGroup reports whether c makes a new group: `cg elastic create`,
// `cg static create balanced|mapped`.
func createsGroup(c *cobra.Command) bool {
	return c.Name() == "create" || (c.HasParent() && c.Parent().Name() == "create")
}

// kindsOf says which kinds of group c works on: the kind it is mounted
// under, else what its flags parsed so far say (--elastic, as cg partition
// has, or --kind static|elastic), else both.
func kindsOf(c *cobra.Command) []cg.Kind {
	static, elastic := []cg.Kind{cg.KindStatic}, []cg.Kind{cg.KindElastic}
	for p := c; p != nil; p = p.Parent() {
		switch p.Name() {
		case "static":
			return static
		case "elastic":
			return elastic
		}
	}
	if fl := c.Flags().Lookup("elastic"); fl != nil && fl.Value.Type() == "bool" {
		if fl.Value.String() == "true" {
			return elastic
		}
		return static
	}
	if fl := c.Flags().Lookup("kind"); fl != nil {
		switch fl.Value.String() {
		case "static":
			return static
		case "elastic":
			return elastic
		}
	}
	return append(static, elastic...)
}

// groupsByStream lists the groups of the given kinds by stream.
func groupsByStream(ctx context.Context, c *cg.Client, kinds []cg.Kind) (map[string][]string, error) {
	refs, err := c.ListGroups(ctx, kinds...)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, r := range refs {
		out[r.Stream] = append(out[r.Stream], r.Group)
	}
	return out, nil
}

// streamNames lists the streams that hold groups of the given kinds, or,
// for a command that creates a group (or when the groups cannot be read),
// every stream but the KV and object store buckets and elastic groups'
// work-queue streams.
func streamNames(ctx context.Context, c *cg.Client, kinds []cg.Kind, anyStream bool) ([]string, error) {
	if !anyStream {
		if byStream, err := groupsByStream(ctx, c, kinds); err == nil {
			out := make([]string, 0, len(byStream))
			for s := range byStream {
				out = append(out, s)
			}
			return out, nil
		}
	}
	work := map[string]bool{}
	if elastic, err := groupsByStream(ctx, c, []cg.Kind{cg.KindElastic}); err == nil {
		for s, gs := range elastic {
			for _, g := range gs {
				work[cg.WorkStreamName(s, g)] = true
			}
		}
	}
	lister := c.JetStream().StreamNames(ctx)
	var out []string
	for s := range lister.Name() {
		if !strings.HasPrefix(s, "KV_") && !strings.HasPrefix(s, "OBJ_") && !work[s] {
			out = append(out, s)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// memberNames lists the members configured in the group, looked up under
// each of the kinds in turn.
func memberNames(ctx context.Context, c *cg.Client, kinds []cg.Kind, stream, grp string) ([]string, error) {
	if stream == "" || grp == "" {
		return nil, nil
	}
	var err error
	for _, k := range kinds {
		var cfg health.GroupConfig
		if cfg, err = c.Config(ctx, k, stream, grp); err == nil {
			return cfg.MemberNames(), nil
		}
	}
	return nil, err
}
