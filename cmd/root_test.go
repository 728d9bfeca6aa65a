package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

type result struct {
	code        int
	out, errOut string
	dials       int // calls to the factory's Client
}

// run runs cg in process with env as the whole environment, on a tree
// that also holds hidden test commands:
//
//	ping           connects and prints the server's URL
//	grp leaf A B   returns what A asks for: ok, usage, silent, fail
//	grp color      prints whether color is enabled
func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	return runOn(t, ios, env, args...).with(out, errOut)
}

func (r result) with(out, errOut *bytes.Buffer) result {
	r.out, r.errOut = out.String(), errOut.String()
	return r
}

func runOn(t *testing.T, ios *iostreams.IOStreams, env map[string]string, args ...string) result {
	t.Helper()
	f := factory.New(ios, func(k string) string { return env[k] })
	defer f.Close()
	var r result
	connect := f.Client
	f.Client = func() (*cg.Client, error) {
		r.dials++
		return connect()
	}
	root := NewRootCmd(f)
	root.AddCommand(testCommands(f)...)
	r.code = execute(context.Background(), f, root, args)
	return r
}

func testCommands(f *factory.Factory) []*cobra.Command {
	ping := &cobra.Command{
		Use:    "ping",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			client, err := f.Client()
			if err != nil {
				return err
			}
			if _, err := client.JetStream().AccountInfo(c.Context()); err != nil {
				return err
			}
			fmt.Fprintln(f.IOStreams.Out, client.Conn().ConnectedUrlRedacted())
			return nil
		},
	}
	grp := &cobra.Command{Use: "grp", Hidden: true, Short: "test group"}
	grp.AddCommand(&cobra.Command{
		Use:  "leaf <what> <b>",
		Args: cobra.ExactArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			switch args[0] {
			case "usage":
				return cmdutil.UsageErrorf("--mode %q is not one of a, b", args[1])
			case "silent":
				fmt.Fprintln(f.IOStreams.ErrOut, "already said")
				return cmdutil.ErrSilent
			case "fail":
				return fmt.Errorf("leaf: %w", errors.New("boom"))
			}
			return nil
		},
	}, &cobra.Command{
		Use:  "color",
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Fprintln(f.IOStreams.Out, f.IOStreams.ColorEnabled())
			return nil
		},
	})
	return []*cobra.Command{ping, grp}
}

// closedPortURL is a URL on which nothing listens.
func closedPortURL(t *testing.T, userinfo string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + userinfo + addr
}

func TestHelpVersionAndUsageErrorsNeverConnect(t *testing.T) {
	// A listener that would see any dial: NATS_URL points at it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
	t.Cleanup(func() { l.Close() })
	env := map[string]string{"NATS_URL": "nats://" + l.Addr().String()}

	for _, args := range [][]string{
		{}, {"--help"}, {"-h"}, {"--version"}, {"version"}, {"help"}, {"help", "server"},
		{"server", "--help"}, {"ping", "--help"}, {"grp"}, {"grp", "--help"},
	} {
		r := run(t, env, args...)
		if r.code != cmdutil.OK || r.dials != 0 || r.errOut != "" || r.out == "" {
			t.Errorf("cg %v: code=%d dials=%d stderr=%q stdout empty=%v", args, r.code, r.dials, r.errOut, r.out == "")
		}
	}
	for _, args := range [][]string{
		{"ping", "--timeout", "5"}, {"ping", "extra"}, {"ping", "--bogus"}, {"bogus"},
	} {
		if r := run(t, env, args...); r.code != cmdutil.Usage || r.dials != 0 {
			t.Errorf("cg %v: code=%d dials=%d, want usage error without a dial", args, r.code, r.dials)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("%d connections reached the NATS_URL listener", n)
	}
}

func TestVersion(t *testing.T) {
	r := run(t, nil, "--version")
	if !regexp.MustCompile(`^cg version \S+ \(.*go1.*\)\n$`).MatchString(r.out) {
		t.Fatalf("--version printed %q", r.out)
	}
	if v := run(t, nil, "version"); v.out != r.out {
		t.Fatalf("version %q differs from --version %q", v.out, r.out)
	}

	r = run(t, nil, "version", "--json")
	var got map[string]string
	if err := json.Unmarshal([]byte(r.out), &got); err != nil || r.code != 0 {
		t.Fatalf("version --json: code %d, %q: %v", r.code, r.out, err)
	}
	if got["version"] == "" || !strings.HasPrefix(got["go"], "go") {
		t.Fatalf("version --json = %v", got)
	}
	if _, ok := got["commit"]; !ok {
		t.Fatalf("version --json has no commit: %v", got)
	}
}

func TestUsageErrors(t *testing.T) {
	tests := []struct {
		args []string
		msg  string // the error line, after "error: "
		help string // the command named in the hint
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "cg"`, "cg"},
		{[]string{"verison"}, `unknown command "verison" for "cg"; did you mean "version"?`, "cg"},
		{[]string{"--bogus"}, "unknown flag: --bogus", "cg"},
		{[]string{"version", "--bogus"}, "unknown flag: --bogus", "cg version"},
		{[]string{"version", "extra"}, `unknown command "extra" for "cg version"`, "cg version"},
		{[]string{"--timeout", "5", "version"}, `invalid argument "5" for "--timeout" flag: missing a unit, write it like 5s`, "cg version"},
		{[]string{"version", "--timeout=-1s"}, `invalid argument "-1s" for "--timeout" flag: must be a positive duration, like 5s`, "cg version"},
		{[]string{"server", "--port", "x"}, `invalid argument "x" for "-p, --port" flag: strconv.ParseInt: parsing "x": invalid syntax`, "cg server"},
		{[]string{"help", "bogus"}, `unknown command "bogus" for "cg"`, "cg"},
		{[]string{"grp", "bogus"}, `unknown command "bogus" for "cg grp"`, "cg grp"},
		{[]string{"grp", "leaf", "a"}, "accepts 2 arg(s), received 1", "cg grp leaf"},
		{[]string{"grp", "leaf", "usage", "x"}, `--mode "x" is not one of a, b`, "cg grp leaf"},
		{[]string{"--no-color=maybe", "version"}, `invalid argument "maybe" for "--no-color" flag: --no-color takes true or false`, "cg version"},
	}
	for _, tt := range tests {
		r := run(t, nil, tt.args...)
		want := fmt.Sprintf("error: %s\nRun '%s --help' for usage.\n", tt.msg, tt.help)
		if r.code != cmdutil.Usage || r.errOut != want || r.out != "" {
			t.Errorf("cg %v:\n code %d, want 2\n stderr %q\n want   %q\n stdout %q", tt.args, r.code, r.errOut, want, r.out)
		}
	}
}

func TestFailures(t *testing.T) {
	r := run(t, nil, "grp", "leaf", "fail", "x")
	if r.code != cmdutil.Failed || r.errOut != "error: leaf: boom\n" {
		t.Errorf("failed command: code %d, stderr %q", r.code, r.errOut)
	}
	r = run(t, nil, "grp", "leaf", "silent", "x")
	if r.code != cmdutil.Failed || r.errOut != "already said\n" {
		t.Errorf("silent error: code %d, stderr %q", r.code, r.errOut)
	}
	r = run(t, nil, "grp", "leaf", "ok", "x")
	if r.code != cmdutil.OK || r.errOut != "" {
		t.Errorf("success: code %d, stderr %q", r.code, r.errOut)
	}
}

func TestNoColorFlag(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"grp", "color"}, "true\n"},
		{[]string{"grp", "color", "--no-color"}, "false\n"},
		{[]string{"--no-color", "grp", "color"}, "false\n"},
		{[]string{"grp", "color", "--no-color=false"}, "true\n"},
	} {
		ios, _, out, errOut := iostreams.Test()
		ios.SetColorEnabled(true)
		r := runOn(t, ios, nil, tt.args...).with(out, errOut)
		if r.code != 0 || r.out != tt.want {
			t.Errorf("cg %v: code %d, color %q, want %q", tt.args, r.code, r.out, tt.want)
		}
	}
}

func TestConnectionRefused(t *testing.T) {
	url := closedPortURL(t, "")
	r := run(t, map[string]string{"NATS_URL": url}, "ping")
	want := "error: cannot connect to NATS at " + url + " (from NATS_URL): connection refused; set --server/NATS_URL or --context, or start one with 'cg server'\n"
	if r.code != cmdutil.Failed || r.errOut != want {
		t.Fatalf("code %d\nstderr %q\nwant   %q", r.code, r.errOut, want)
	}

	secretURL := closedPortURL(t, "bob:hunter2pw@")
	for _, tt := range []struct {
		env  map[string]string
		args []string
	}{
		{map[string]string{"NATS_URL": secretURL}, []string{"ping"}},
		{nil, []string{"ping", "--server", secretURL}},
		{nil, []string{"ping", "-s", strings.Replace(secretURL, "bob:", "", 1)}}, // a token
		{nil, []string{"ping", "-s", closedPortURL(t, ""), "--user", "bob", "--password", "hunter2pw"}},
	} {
		r := run(t, tt.env, tt.args...)
		if r.code != cmdutil.Failed || strings.Contains(r.errOut, "hunter2pw") || strings.Count(r.errOut, "\n") != 1 ||
			!strings.Contains(r.errOut, "connection refused") {
			t.Errorf("cg %v: code %d, stderr %q", tt.args, r.code, r.errOut)
		}
	}
}

func TestServerFlagBeatsNATSURL(t *testing.T) {
	s := natstest.RunServer(t)
	r := run(t, map[string]string{"NATS_URL": closedPortURL(t, "")}, "ping", "--server", s.ClientURL())
	if r.code != 0 || r.out != s.ClientURL()+"\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
	r = run(t, map[string]string{"NATS_URL": s.ClientURL()}, "ping")
	if r.code != 0 || r.out != s.ClientURL()+"\n" {
		t.Fatalf("NATS_URL alone: code %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}

func writeContext(t *testing.T, root, name string, v map[string]any) {
	t.Helper()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func authServer(t *testing.T) *natsserver.Server {
	t.Helper()
	o := natstest.Options(t.TempDir())
	o.Users = []*natsserver.User{{Username: "bob", Password: "hunter2pw"}}
	return natstest.Start(t, o)
}

func TestNATSContext(t *testing.T) {
	s := natstest.RunServer(t)
	secured := authServer(t)
	xdg := t.TempDir()
	writeContext(t, xdg, "dev", map[string]any{"url": s.ClientURL()})
	writeContext(t, xdg, "down", map[string]any{"url": closedPortURL(t, "")})
	writeContext(t, xdg, "auth", map[string]any{"url": secured.ClientURL(), "user": "bob", "password": "hunter2pw"})
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".config"), "dev", map[string]any{"url": s.ClientURL()})

	ok := []struct {
		name string
		env  map[string]string
		args []string
	}{
		{"NATS_CONTEXT", map[string]string{"XDG_CONFIG_HOME": xdg, "NATS_CONTEXT": "dev"}, nil},
		{"--context", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "dev"}},
		{"--context beats NATS_CONTEXT", map[string]string{"XDG_CONFIG_HOME": xdg, "NATS_CONTEXT": "down"}, []string{"--context", "dev"}},
		{"HOME/.config", map[string]string{"HOME": home, "NATS_CONTEXT": "dev"}, nil},
		{"--server beats the context", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "down", "-s", s.ClientURL()}},
		{"context credentials", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "auth"}},
	}
	for _, tt := range ok {
		r := run(t, tt.env, append([]string{"ping"}, tt.args...)...)
		if r.code != 0 {
			t.Errorf("%s: code %d, stderr %q", tt.name, r.code, r.errOut)
		}
	}

	r := run(t, map[string]string{"XDG_CONFIG_HOME": xdg}, "ping", "--context", "down")
	if r.code != 1 || !strings.Contains(r.errOut, `(from context "down"): connection refused`) {
		t.Errorf("context down: code %d, stderr %q", r.code, r.errOut)
	}
	r = run(t, map[string]string{"XDG_CONFIG_HOME": xdg}, "ping", "--context", "nope")
	if r.code != 1 || !strings.HasPrefix(r.errOut, `error: unknown NATS context "nope": no `+filepath.Join(xdg, "nats", "context", "nope.json")) {
		t.Errorf("unknown context: code %d, stderr %q", r.code, r.errOut)
	}
	// The context chosen with 'nats context select' is used by default.
	if err := os.WriteFile(filepath.Join(xdg, "nats", "context.txt"), []byte("dev"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, map[string]string{"XDG_CONFIG_HOME": xdg}, "ping"); r.code != 0 || r.out != s.ClientURL()+"\n" {
		t.Errorf("selected context: code %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}
}

func TestUserPassword(t *testing.T) {
	s := authServer(t)
	url := s.ClientURL()
	if r := run(t, nil, "ping", "-s", url, "--user", "bob", "--password", "hunter2pw"); r.code != 0 {
		t.Fatalf("good password: code %d, stderr %q", r.code, r.errOut)
	}
	if r := run(t, map[string]string{"NATS_URL": url, "NATS_USER": "bob", "NATS_PASSWORD": "hunter2pw"}, "ping"); r.code != 0 {
		t.Fatalf("NATS_USER/NATS_PASSWORD: code %d, stderr %q", r.code, r.errOut)
	}
	authURL := strings.Replace(url, "nats://", "nats://bob:hunter2pw@", 1)
	if r := run(t, nil, "ping", "-s", authURL); r.code != 0 || r.out != strings.Replace(authURL, "hunter2pw", "xxxxx", 1)+"\n" {
		t.Fatalf("password in URL: code %d, stdout %q, stderr %q", r.code, r.out, r.errOut)
	}

	for _, args := range [][]string{
		{"ping", "-s", url, "--user", "bob", "--password", "wrongpass"},
		{"ping", "-s", strings.Replace(url, "nats://", "nats://bob:wrongpass@", 1)},
		{"ping", "-s", url},
	} {
		r := run(t, nil, args...)
		if r.code != cmdutil.Failed || strings.Contains(r.errOut, "wrongpass") || strings.Count(r.errOut, "\n") != 1 ||
			!strings.Contains(r.errOut, ": authorization violation; check --user/--password, --creds, --nkey or the context's credentials") {
			t.Errorf("cg %v: code %d, stderr %q", args, r.code, r.errOut)
		}
	}
}

func TestServerCommand(t *testing.T) {
	port := clitest.FreePort(t)
	var stdout, stderr clitest.SyncBuffer
	ios := &iostreams.IOStreams{In: &bytes.Buffer{}, Out: &stdout, ErrOut: &stderr}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"server", "--port", strconv.Itoa(port)}, ios, func(string) string { return "" })
	}()

	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	natstest.Eventually(t, 10*time.Second, "the server's ready line", func() bool {
		return strings.Contains(stderr.String(), "export NATS_URL="+url)
	})
	line := stderr.String()
	if strings.Count(line, "\n") != 1 {
		t.Fatalf("want one line on stderr, got %q", line)
	}
	store := regexp.MustCompile(`\(store (\S+), removed on exit\)`).FindStringSubmatch(line)
	if store == nil {
		t.Fatalf("no temporary store in %q", line)
	}

	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.>"}}); err != nil {
		t.Fatalf("JetStream on cg server: %v", err)
	}
	nc.Close()

	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("cg server exited %d after cancel, stderr %q", code, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("cg server did not stop when its context was cancelled")
	}
	if _, err := os.Stat(store[1]); !os.IsNotExist(err) {
		t.Fatalf("temporary store %s not removed: %v", store[1], err)
	}
	if stdout.String() != "" {
		t.Fatalf("stdout should be empty without --json: %q", stdout.String())
	}
}

func TestServerPortInUse(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	r := run(t, nil, "server", "--port", strconv.Itoa(port))
	hp := fmt.Sprintf("127.0.0.1:%d", port)
	want := fmt.Sprintf("error: cannot start NATS server: %s is already in use; pick another with --port (0 picks a free one), or use the server already there with --server nats://%s\n", hp, hp)
	if r.code != cmdutil.Failed || r.errOut != want {
		t.Fatalf("code %d\nstderr %q\nwant   %q", r.code, r.errOut, want)
	}
}
