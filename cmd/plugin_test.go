package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The model as github.com/choria-io/fisk v0.9 (the nats CLI's v0.5.0)
// declares it, written out here so that decoding with unknown fields
// disallowed catches a name or a type fisk would not read.
type fiskTestApp struct {
	Name         string            `json:"name"`
	Help         string            `json:"help"`
	Cheat        string            `json:"cheat"`
	Version      string            `json:"version"`
	Author       string            `json:"author"`
	Cheats       map[string]string `json:"cheats"`
	CheatTags    []string          `json:"cheat_tags"`
	LLMExtraInfo string            `json:"llm_extra_info"`
	Args         []*fiskTestArg    `json:"args"`
	Commands     []*fiskTestCmd    `json:"commands"`
	Flags        []*fiskTestFlag   `json:"flags"`
}

type fiskTestCmd struct {
	Name             string          `json:"name"`
	Aliases          []string        `json:"aliases"`
	Help             string          `json:"help"`
	HelpLong         string          `json:"help_long"`
	Hidden           bool            `json:"hidden"`
	Default          bool            `json:"default"`
	Tags             []string        `json:"tags"`
	Cheat            string          `json:"cheat"`
	Schema           map[string]any  `json:"schema"`
	RestrictedSchema map[string]any  `json:"restricted_schema"`
	Flags            []*fiskTestFlag `json:"flags"`
	Args             []*fiskTestArg  `json:"args"`
	Commands         []*fiskTestCmd  `json:"commands"`
}

type fiskTestFlag struct {
	Name        string   `json:"name"`
	Help        string   `json:"help"`
	Short       rune     `json:"short"`
	Default     []string `json:"default"`
	Envar       string   `json:"envar"`
	PlaceHolder string   `json:"place_holder"`
	Required    bool     `json:"required"`
	Hidden      bool     `json:"hidden"`
	Boolean     bool     `json:"boolean"`
	Negatable   bool     `json:"negatable"`
	Cumulative  bool     `json:"cumulative"`
	Completions []string `json:"completions"`
}

type fiskTestArg struct {
	Name        string   `json:"name"`
	Help        string   `json:"help"`
	Default     []string `json:"default"`
	Envar       string   `json:"envar"`
	PlaceHolder string   `json:"place_holder"`
	Required    bool     `json:"required"`
	Hidden      bool     `json:"hidden"`
	Cumulative  bool     `json:"cumulative"`
}

// introspectModel runs `cg --fisk-introspect` in process with NATS_URL on
// a listener that counts connections, and decodes what it printed.
func introspectModel(t *testing.T) *fiskTestApp {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var accepted atomic.Int32
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	r := clitest.Run(t, Run, clitest.Env("NATS_URL=nats://"+l.Addr().String()), pluginIntrospectFlag)
	if r.Code != 0 || r.Err != "" {
		// The nats CLI stores stdout and stderr together as the model.
		t.Fatalf("cg %s: exit %d, stderr %q", pluginIntrospectFlag, r.Code, r.Err)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("introspection dialled NATS %d times", n)
	}
	dec := json.NewDecoder(strings.NewReader(r.Out))
	dec.DisallowUnknownFields()
	var app fiskTestApp
	if err := dec.Decode(&app); err != nil {
		t.Fatalf("model does not decode as fisk's ApplicationModel: %v\n%s", err, r.Out)
	}
	return &app
}

func TestPluginIntrospectionDescribesTheTree(t *testing.T) {
	app := introspectModel(t)
	// fisk's ExternalPluginCommand refuses a model without these.
	if app.Name != "cg" || app.Help == "" || app.Version == "" {
		t.Fatalf("app name %q help %q version %q", app.Name, app.Help, app.Version)
	}

	root := NewRootCmd(factory.New(&iostreams.IOStreams{}, nil))
	connFlags := []string{"server", "context", "creds", "nkey", "user", "password", "tlscert", "tlskey", "tlsca", "js-domain", "timeout", "token", "no-context"}
	leaves := 0

	var walk func(path string, cmds []*fiskTestCmd)
	walk = func(path string, cmds []*fiskTestCmd) {
		names := map[string]bool{}
		for _, m := range cmds {
			p := path + " " + m.Name
			for _, n := range append([]string{m.Name}, m.Aliases...) {
				if names[n] {
					t.Errorf("%s: name or alias %q repeated among its siblings", p, n)
				}
				names[n] = true
			}
			if m.Name == "help" || m.Name == "completion" {
				t.Errorf("%s: belongs to the nats CLI, not to the plugin", p)
			}
			c, rest, err := root.Find(strings.Fields(p)[1:])
			if err != nil || len(rest) > 0 || c.CommandPath() != p {
				t.Errorf("%s: not a cg command (found %v, rest %v, err %v)", p, c.CommandPath(), rest, err)
				continue
			}
			if m.Help != c.Short {
				t.Errorf("%s: help %q, want %q", p, m.Help, c.Short)
			}
			if len(m.Commands) > 0 {
				if len(m.Flags) > 0 || len(m.Args) > 0 {
					t.Errorf("%s: a group has flags or args; fisk would parse them and then drop them", p)
				}
				walk(p, m.Commands)
				continue
			}
			leaves++
			checkLeaf(t, p, c, m, connFlags)
		}
	}
	walk("cg", app.Commands)

	want := 0
	var count func(c *cobra.Command)
	count = func(c *cobra.Command) {
		for _, s := range c.Commands() {
			switch {
			case s.Name() == "help" || s.Name() == "completion":
			case s.HasSubCommands():
				count(s)
			default:
				want++
			}
		}
	}
	count(root)
	if leaves != want || leaves == 0 {
		t.Fatalf("model has %d runnable commands, the tree %d", leaves, want)
	}
}

func checkLeaf(t *testing.T, path string, c *cobra.Command, m *fiskTestCmd, connFlags []string) {
	t.Helper()
	flags := map[string]*fiskTestFlag{}
	for _, fl := range m.Flags {
		if flags[fl.Name] != nil {
			t.Errorf("%s: --%s declared twice", path, fl.Name)
		}
		flags[fl.Name] = fl
		if fl.Short == 'h' || fl.Short == 's' {
			t.Errorf("%s: --%s takes -%c, which the nats CLI owns", path, fl.Name, fl.Short)
		}
		if fl.Name == "help" || fl.Name == "version" {
			t.Errorf("%s: --%s belongs to the nats CLI", path, fl.Name)
		}
		pf := c.LocalFlags().Lookup(fl.Name)
		if pf == nil {
			pf = c.InheritedFlags().Lookup(fl.Name)
		}
		if pf == nil {
			t.Errorf("%s: --%s is not a flag of cg's", path, fl.Name)
			continue
		}
		if fl.Boolean != (pf.Value.Type() == "bool") || fl.Negatable {
			t.Errorf("%s: --%s boolean=%v negatable=%v for a %s flag", path, fl.Name, fl.Boolean, fl.Negatable, pf.Value.Type())
		}
		if fl.Required || fl.Envar != "" {
			t.Errorf("%s: --%s is required or read from the environment by nats; cg does both itself", path, fl.Name)
		}
	}
	// Inherited flags too: fisk hands a leaf only its own flags.
	for _, name := range append([]string{"json", "no-color"}, connFlags...) {
		if flags[name] == nil {
			t.Errorf("%s: --%s missing", path, name)
		}
	}
	c.LocalFlags().VisitAll(func(pf *pflag.Flag) {
		if flags[pf.Name] == nil && pf.Name != "help" {
			t.Errorf("%s: local flag --%s missing", path, pf.Name)
		}
	})

	_, usage, _ := strings.Cut(c.Use, " ")
	switch {
	case usage == "" && len(m.Args) != 0:
		t.Errorf("%s: takes no arguments but the model declares %d", path, len(m.Args))
	case usage != "" && (len(m.Args) != 1 || !m.Args[0].Cumulative || m.Args[0].PlaceHolder != usage):
		t.Errorf("%s: want one cumulative argument shown as %q, got %+v", path, usage, m.Args)
	case usage != "" && m.Args[0].Required != strings.HasPrefix(usage, "<"):
		t.Errorf("%s: argument required=%v for %q", path, m.Args[0].Required, usage)
	}
}

func TestPluginIntrospectionExamples(t *testing.T) {
	app := introspectModel(t)
	find := func(path ...string) *fiskTestCmd {
		t.Helper()
		cmds := app.Commands
		var m *fiskTestCmd
		for _, name := range path {
			m = nil
			for _, c := range cmds {
				if c.Name == name {
					m = c
				}
			}
			if m == nil {
				t.Fatalf("no command %v in the model", path)
			}
			cmds = m.Commands
		}
		return m
	}

	ls := find("static", "ls")
	if len(ls.Args) != 1 || ls.Args[0].PlaceHolder != "<stream>" || !ls.Args[0].Required {
		t.Errorf("static ls args = %+v", ls.Args)
	}
	create := find("static", "create", "balanced")
	if create.Args[0].PlaceHolder != "<stream> <group> <max-members> <member>..." {
		t.Errorf("static create balanced args = %+v", create.Args[0])
	}
	del := find("elastic", "delete")
	var force, timeout *fiskTestFlag
	for _, fl := range del.Flags {
		switch fl.Name {
		case "force":
			force = fl
		case "timeout":
			timeout = fl
		}
	}
	if force == nil || force.Short != 'f' || !force.Boolean {
		t.Errorf("elastic delete --force = %+v", force)
	}
	if timeout == nil || timeout.Boolean || len(timeout.Default) != 1 || timeout.Default[0] != "5s" {
		t.Errorf("elastic delete --timeout = %+v", timeout)
	}
	if v := find("version"); len(v.Args) != 0 {
		t.Errorf("version args = %+v", v.Args)
	}
}

// Only the whole, exact handshake is one: anything else is cg's usage.
func TestPluginIntrospectionIsNotAFlag(t *testing.T) {
	for _, args := range [][]string{
		{"version", pluginIntrospectFlag},
		{pluginIntrospectFlag, "version"},
	} {
		r := clitest.Run(t, Run, nil, args...)
		if r.Code != 2 || !strings.Contains(r.Err, "unknown flag: "+pluginIntrospectFlag) {
			t.Errorf("cg %v: exit %d, stderr %q; want a usage error", args, r.Code, r.Err)
		}
	}
}

// TestNatsCLIPlugin registers the built cg with the real nats CLI (in a
// private HOME) and runs `nats cg …` against an embedded server, with the
// connection given to nats as --server, as --context and as the selected
// context.
func TestNatsCLIPlugin(t *testing.T) {
	natsBin, err := exec.LookPath("nats")
	if err != nil {
		t.Skip("the nats CLI is not on PATH; to run this test: go install github.com/nats-io/natscli/nats@v0.5.0")
	}
	cgBin := buildCG(t, "-X github.com/cg-dev/cg/cmd.Version=9.9.9-plugin")

	home := t.TempDir()
	env := []string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"NO_COLOR=1",
	}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || k == "TMPDIR" || k == "GORACE" {
			env = append(env, kv)
		}
	}
	nats := func(wantOK bool, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c := exec.CommandContext(ctx, natsBin, args...)
		c.Env = env
		var out, errOut bytes.Buffer
		c.Stdout, c.Stderr = &out, &errOut
		err := c.Run()
		if (err == nil) != wantOK {
			t.Fatalf("nats %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, &out, &errOut)
		}
		return out.String() + errOut.String()
	}

	// Registering and help need no server.
	out := nats(true, "plugins", "register", "cg", cgBin)
	if !strings.Contains(out, "Plugin cg using command "+cgBin) {
		t.Fatalf("register said %q", out)
	}
	stored, err := os.ReadFile(filepath.Join(home, ".local", "share", "nats", "cli", "plugins", "cg.json"))
	if err != nil {
		t.Fatalf("the plugin was not stored under XDG_DATA_HOME: %v", err)
	}
	if !bytes.Contains(stored, []byte(`"version":"9.9.9-plugin"`)) {
		t.Fatalf("stored model is not this build's: %.200s", stored)
	}
	if out := nats(true, "cg", "static", "--help"); !strings.Contains(out, "create") || !strings.Contains(out, "consume") {
		t.Fatalf("nats cg static --help:\n%s", out)
	}
	if out := nats(true, "cg", "version"); !strings.Contains(out, "cg version 9.9.9-plugin") {
		t.Fatalf("nats cg version: %q", out)
	}

	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"},
	})
	if err != nil {
		t.Fatal(err)
	}

	// Four positional arguments and more: they reach cg in order.
	out = nats(true, "--server", s.ClientURL(), "cg", "static", "create", "balanced", "ORDERS", "workers", "4", "m1", "m2", "--filter", ">", "--json")
	var created struct {
		Ownership map[string][]int `json:"ownership"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || fmt.Sprint(created.Ownership) != "map[m1:[0 1] m2:[2 3]]" {
		t.Fatalf("nats --server … cg static create balanced: %v\n%s", err, out)
	}
	lsOK := func(how string, args ...string) {
		t.Helper()
		var groups []struct {
			Group   string   `json:"group"`
			Members []string `json:"members"`
		}
		out := nats(true, append(args, "--json")...)
		if err := json.Unmarshal([]byte(out), &groups); err != nil || len(groups) != 1 || groups[0].Group != "workers" {
			t.Fatalf("%s: nats %s --json: %v\n%s", how, strings.Join(args, " "), err, out)
		}
	}
	lsOK("--server before cg", "--server", s.ClientURL(), "cg", "static", "ls", "ORDERS")
	lsOK("-s after the command", "cg", "static", "ls", "ORDERS", "-s", s.ClientURL())

	// No settings: cg must not find the server by chance.
	env = append(env, "NATS_URL=nats://127.0.0.1:1")
	if out := nats(false, "cg", "static", "ls", "ORDERS"); !strings.Contains(out, "cannot connect to NATS at nats://127.0.0.1:1 (from NATS_URL)") {
		t.Fatalf("NATS_URL was not handed to cg: %s", out)
	}
	env = env[:len(env)-1]

	nats(true, "context", "add", "e2e", "--server", s.ClientURL(), "--description", "cg plugin test")
	lsOK("--context", "--context", "e2e", "cg", "static", "ls", "ORDERS")
	nats(true, "context", "select", "e2e")
	lsOK("selected context", "cg", "static", "ls", "ORDERS")

	// A selected context whose JetStream domain does not exist tells
	// whether cg used it.
	nats(true, "context", "add", "nowhere", "--server", s.ClientURL(), "--js-domain", "nowhere", "--select")
	if out := nats(false, "cg", "static", "ls", "ORDERS"); !strings.Contains(out, `no JetStream answers for domain "nowhere"`) {
		t.Fatalf("the selected context was not used: %s", out)
	}
	lsOK("--no-context", "--no-context", "--server", s.ClientURL(), "cg", "static", "ls", "ORDERS")
}
