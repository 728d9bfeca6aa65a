package factory

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg/natstest"
	natsserver "github.com/nats-io/nats-server/v2/server"
)

func newTestFactory(t *testing.T, env map[string]string, args ...string) *Factory {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	f := New(ios, func(k string) string { return env[k] })
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddConnFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	t.Cleanup(f.Close)
	return f
}

func writeContext(t *testing.T, root, name, body string) {
	t.Helper()
	dir := filepath.Join(root, "nats", "context")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestResolvePrecedence(t *testing.T) {
	xdg := t.TempDir()
	writeContext(t, xdg, "dev", `{"url":"nats://ctx:4222","jetstream_domain":"hub"}`)
	home := t.TempDir()
	writeContext(t, filepath.Join(home, ".config"), "dev", `{"url":"nats://home:4222"}`)
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		url, from  string
		wantDomain string
	}{
		{"default", nil, nil, "nats://127.0.0.1:4222", "", ""},
		{"env", map[string]string{"NATS_URL": "nats://env:4222"}, nil, "nats://env:4222", "NATS_URL", ""},
		{"flag beats env", map[string]string{"NATS_URL": "nats://env:4222"}, []string{"-s", "nats://flag:4222"}, "nats://flag:4222", "", ""},
		{"context", map[string]string{"XDG_CONFIG_HOME": xdg, "NATS_CONTEXT": "dev"}, nil, "nats://ctx:4222", `context "dev"`, "hub"},
		{"context flag", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "dev"}, "nats://ctx:4222", `context "dev"`, "hub"},
		{"env beats context", map[string]string{"XDG_CONFIG_HOME": xdg, "NATS_CONTEXT": "dev", "NATS_URL": "nats://env:4222"}, nil, "nats://env:4222", "NATS_URL", "hub"},
		{"flags beat context", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "dev", "-s", "nats://flag:4222", "--js-domain", "leaf"}, "nats://flag:4222", "", "leaf"},
		{"HOME/.config", map[string]string{"HOME": home, "NATS_CONTEXT": "dev"}, nil, "nats://home:4222", `context "dev"`, ""},
		{"XDG_CONFIG_HOME beats HOME", map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home, "NATS_CONTEXT": "dev"}, nil, "nats://ctx:4222", `context "dev"`, "hub"},
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFactory(t, tt.env, tt.args...)
			tg, err := f.resolve()
			if err != nil {
				t.Fatal(err)
			}
			if tg.url != tt.url || tg.source != tt.from || tg.domain != tt.wantDomain {
				t.Fatalf("got url=%q from=%q domain=%q, want %q %q %q", tg.url, tg.source, tg.domain, tt.url, tt.from, tt.wantDomain)
			}
		})
	}
}

func TestResolveSelectedContext(t *testing.T) {
	xdg := t.TempDir()
	writeContext(t, xdg, "picked", `{"url":"nats://picked:4222"}`)
	if err := os.WriteFile(filepath.Join(xdg, "nats", "context.txt"), []byte("picked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tg, err := newTestFactory(t, map[string]string{"XDG_CONFIG_HOME": xdg}).resolve()
	if err != nil {
		t.Fatal(err)
	}
	if tg.url != "nats://picked:4222" {
		t.Fatalf("selected context not used: %q", tg.url)
	}
}

func TestResolveErrors(t *testing.T) {
	xdg := t.TempDir()
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		want  string
		usage bool
	}{
		{"unknown context", map[string]string{"XDG_CONFIG_HOME": xdg}, []string{"--context", "nope"}, `unknown NATS context "nope"`, false},
		{"context without a home", nil, []string{"--context", "dev"}, "neither XDG_CONFIG_HOME nor HOME is set", false},
		{"cert without key", nil, []string{"--tlscert", "c.pem"}, "--tlscert and --tlskey go together", true},
		{"bad NATS_TIMEOUT", map[string]string{"NATS_TIMEOUT": "5"}, nil, "NATS_TIMEOUT=\"5\": missing a unit, write it like 5s", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := newTestFactory(t, tt.env, tt.args...).resolve()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.want)
			}
			if cmdutil.IsUsage(err) != tt.usage {
				t.Fatalf("usage error = %v, want %v", cmdutil.IsUsage(err), tt.usage)
			}
		})
	}
}

func TestTimeoutFlag(t *testing.T) {
	f := newTestFactory(t, map[string]string{"NATS_TIMEOUT": "750ms"})
	if f.Conn.Timeout != 750*time.Millisecond {
		t.Fatalf("NATS_TIMEOUT not used as default: %v", f.Conn.Timeout)
	}
	f = newTestFactory(t, map[string]string{"NATS_TIMEOUT": "750ms"}, "--timeout", "2s")
	if f.Conn.Timeout != 2*time.Second {
		t.Fatalf("flag must beat NATS_TIMEOUT: %v", f.Conn.Timeout)
	}
	if newTestFactory(t, nil).Conn.Timeout != DefaultTimeout {
		t.Fatal("default timeout")
	}
	for _, bad := range []string{"5", "-1s", "0s", "soon"} {
		ios, _, _, _ := iostreams.Test()
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		New(ios, nil).AddConnFlags(fs)
		err := fs.Parse([]string{"--timeout", bad})
		if err == nil || !strings.Contains(err.Error(), "5s") {
			t.Errorf("--timeout %s: err = %v, want a hint like 5s", bad, err)
		}
	}
}

func TestRedactURL(t *testing.T) {
	tests := map[string]string{
		"nats://127.0.0.1:4222":                         "nats://127.0.0.1:4222",
		"nats://bob:s3cret@host:4222":                   "nats://bob:xxxxx@host:4222",
		"nats://tok3n@host:4222":                        "nats://xxxxx@host:4222",
		"bob:pw@host:4222":                              "bob:xxxxx@host:4222",
		"nats://a:b@h1:4222, nats://h2:4222,tls://t@h3": "nats://a:xxxxx@h1:4222,nats://h2:4222,tls://xxxxx@h3",
		"nats://u:p@ss@host":                            "nats://u:xxxxx@host",
	}
	for in, want := range tests {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

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

func TestClientConnectsOnceAndCaches(t *testing.T) {
	s := natstest.RunServer(t)
	f := newTestFactory(t, map[string]string{"NATS_URL": s.ClientURL()})
	c1, err := f.Client()
	if err != nil {
		t.Fatal(err)
	}
	c2, err := f.Client()
	if err != nil || c1 != c2 {
		t.Fatalf("second Client() = %p, %v; want the cached %p", c2, err, c1)
	}
	if got := c1.Conn().Opts.Name; got != ClientName {
		t.Fatalf("client name %q, want %q", got, ClientName)
	}
	if s.NumClients() != 1 {
		t.Fatalf("server has %d clients, want 1", s.NumClients())
	}
	f.Close()
	f.Close()
	if !c1.Conn().IsClosed() {
		t.Fatal("Close must close the connection")
	}
}

func TestClientErrors(t *testing.T) {
	noJS := natstest.Start(t, &natsserver.Options{Host: "127.0.0.1", Port: natsserver.RANDOM_PORT, NoLog: true, NoSigs: true})
	js := natstest.RunServer(t)
	tests := []struct {
		name   string
		env    map[string]string
		args   []string
		want   []string
		hidden []string
	}{
		{
			name: "refused",
			env:  map[string]string{"NATS_URL": closedPortURL(t, "")},
			want: []string{"cannot connect to NATS at nats://127.0.0.1:", " (from NATS_URL): connection refused; set --server/NATS_URL or --context, or start one with 'cg server'"},
		},
		{
			name:   "refused with a password",
			args:   []string{"--server", closedPortURL(t, "bob:hunter2pw@")},
			want:   []string{"nats://bob:xxxxx@127.0.0.1:", "connection refused"},
			hidden: []string{"hunter2pw"},
		},
		{
			name:   "unparseable URL with a password",
			args:   []string{"--server", "nats://bob:hunter2pw@[::1:4222"},
			want:   []string{"cannot connect to NATS at nats://bob:xxxxx@"},
			hidden: []string{"hunter2pw"},
		},
		{
			name: "no JetStream",
			args: []string{"-s", noJS.ClientURL()},
			want: []string{"JetStream is not enabled on NATS at " + noJS.ClientURL() + "; run nats-server with -js, or start one with 'cg server'"},
		},
		{
			name: "unknown domain",
			args: []string{"-s", js.ClientURL(), "--js-domain", "nowhere"},
			want: []string{`no JetStream answers for domain "nowhere"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFactory(t, tt.env, tt.args...)
			_, err := f.Client()
			if err == nil {
				t.Fatal("expected an error")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			for _, h := range tt.hidden {
				if strings.Contains(msg, h) {
					t.Errorf("error %q leaks %q", msg, h)
				}
			}
		})
	}
}

// The nats CLI's --token and --no-context reach cg when it runs as a nats
// plugin (docs/plugin.md); cg takes them as the nats CLI does.
func TestNATSCLITokenAndNoContext(t *testing.T) {
	opts := natstest.Options(t.TempDir())
	opts.Authorization = "s3cret-token"
	s := natstest.Start(t, opts)
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		ok   bool
	}{
		{"NATS_TOKEN", map[string]string{"NATS_TOKEN": "s3cret-token"}, nil, true},
		{"--token", nil, []string{"--token", "s3cret-token"}, true},
		{"--token beats NATS_TOKEN", map[string]string{"NATS_TOKEN": "wrong"}, []string{"--token", "s3cret-token"}, true},
		{"--user alone beats --token", nil, []string{"--token", "wrong", "--user", "s3cret-token"}, true},
		{"no token", nil, nil, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newTestFactory(t, tt.env, append([]string{"-s", s.ClientURL()}, tt.args...)...)
			_, err := f.Client()
			if (err == nil) != tt.ok {
				t.Fatalf("err = %v, want success %v", err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error shows the token: %v", err)
			}
		})
	}

	xdg := t.TempDir()
	writeContext(t, xdg, "picked", `{"url":"nats://picked:4222","token":"ctx-token"}`)
	if err := os.WriteFile(filepath.Join(xdg, "nats", "context.txt"), []byte("picked\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--no-context"}, {"--no-context", "--context", "picked"}} {
		tg, err := newTestFactory(t, map[string]string{"XDG_CONFIG_HOME": xdg}, args...).resolve()
		if err != nil {
			t.Fatal(err)
		}
		if tg.url != "nats://127.0.0.1:4222" || tg.source != "" {
			t.Fatalf("%v: url %q from %q, want the default and no context", args, tg.url, tg.source)
		}
	}
}
