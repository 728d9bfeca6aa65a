package cmd_test

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Directives as cobra prints them after the candidates (":4").
const (
	directiveError      = "1" // ShellCompDirectiveError
	directiveNoFileComp = "4" // ShellCompDirectiveNoFileComp
)

// completion is what one `cg __complete ...` answered.
type completion struct {
	candidates []string
	directive  string
	res        clitest.Result
}

// complete asks cg for the candidates of the last of args, as the shell
// scripts do.
func complete(t *testing.T, env func(string) string, args ...string) completion {
	t.Helper()
	r := clitest.Run(t, cmd.Run, env, append([]string{"__complete"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("cg __complete %q: exit %d, stderr %q", args, r.Code, r.Err)
	}
	lines := strings.Split(strings.TrimSuffix(r.Out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, ":") {
		t.Fatalf("cg __complete %q: no directive line in %q", args, r.Out)
	}
	c := completion{directive: last[1:], res: r}
	for _, l := range lines[:len(lines)-1] {
		c.candidates = append(c.candidates, strings.SplitN(l, "\t", 2)[0])
	}
	return c
}

// completionServer starts a server with three streams, ORDERS (partition
// stamped), EVENTS and PLAIN, and groups made with the engine: static
// fulfillment (m1 m2 m3) and billing (b1) on ORDERS, elastic audit (e1 e2)
// on EVENTS, whose work-queue stream EVENTS-audit comes with it.
func completionServer(t *testing.T) func(string) string {
	t.Helper()
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	streams := []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "orders.*", Destination: "{{partition(10,1)}}.orders.{{wildcard(1)}}"}},
		{Name: "EVENTS", Subjects: []string{"events.*"}},
		{Name: "PLAIN", Subjects: []string{"plain.*"}},
	}
	for _, sc := range streams {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "fulfillment", cg.StaticConfig{MaxMembers: 10, Members: []string{"m1", "m2", "m3"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateStatic(ctx, "ORDERS", "billing", cg.StaticConfig{MaxMembers: 10, Members: []string{"b1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "EVENTS", "audit", cg.ElasticConfig{MaxMembers: 4,
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "events.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMembers(ctx, "EVENTS", "audit", []string{"e1", "e2"}); err != nil {
		t.Fatal(err)
	}
	return clitest.Env("NATS_URL=" + s.ClientURL())
}

func TestCompletionFromServer(t *testing.T) {
	env := completionServer(t)
	all := []string{"EVENTS", "ORDERS", "PLAIN"}
	tests := []struct {
		args []string
		want []string
	}{
		// streams: those with groups of the command's kind
		{[]string{"static", "info", ""}, []string{"ORDERS"}},
		{[]string{"static", "ls", "OR"}, []string{"ORDERS"}},
		{[]string{"static", "ls", "E"}, nil},
		{[]string{"elastic", "delete", ""}, []string{"EVENTS"}},
		// ...or any stream for a create, but not buckets and work-queue streams
		{[]string{"elastic", "create", ""}, all},
		{[]string{"static", "create", "balanced", ""}, all},
		// groups of that kind on that stream
		{[]string{"static", "info", "ORDERS", ""}, []string{"billing", "fulfillment"}},
		{[]string{"static", "delete", "ORDERS", "f"}, []string{"fulfillment"}},
		{[]string{"static", "info", "EVENTS", ""}, nil},
		{[]string{"elastic", "info", "EVENTS", ""}, []string{"audit"}},
		{[]string{"elastic", "info", "ORDERS", ""}, nil},
		{[]string{"elastic", "create", "EVENTS", ""}, nil}, // a new group
		// members from the group's configuration
		{[]string{"static", "member-info", "ORDERS", "fulfillment", ""}, []string{"m1", "m2", "m3"}},
		{[]string{"static", "step-down", "ORDERS", "billing", ""}, []string{"b1"}},
		{[]string{"static", "consume", "ORDERS", "fulfillment", "m"}, []string{"m1", "m2", "m3"}},
		{[]string{"elastic", "consume", "EVENTS", "audit", ""}, []string{"e1", "e2"}},
		{[]string{"elastic", "member-info", "EVENTS", "audit", "e2"}, []string{"e2"}},
		{[]string{"elastic", "drop", "EVENTS", "audit", ""}, []string{"e1", "e2"}},
		{[]string{"elastic", "drop", "EVENTS", "audit", "e1", ""}, []string{"e2"}}, // each once
		{[]string{"elastic", "delete-mapping", "EVENTS", "audit", ""}, []string{"e1", "e2"}},
		{[]string{"elastic", "add", "EVENTS", "audit", ""}, nil}, // new members
		{[]string{"static", "create", "balanced", "ORDERS", "g", "10", ""}, nil},
		// past the last argument
		{[]string{"static", "info", "ORDERS", "fulfillment", ""}, nil},
		// cg partition's --stream and --group, by --elastic
		{[]string{"partition", "orders.x", "--stream", ""}, []string{"ORDERS"}},
		{[]string{"partition", "orders.x", "--elastic", "--stream", ""}, []string{"EVENTS"}},
		{[]string{"partition", "orders.x", "--stream", "ORDERS", "--group", ""}, []string{"billing", "fulfillment"}},
		{[]string{"partition", "events.x", "--elastic", "--stream", "EVENTS", "--group", "a"}, []string{"audit"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			c := complete(t, env, tt.args...)
			if !slices.Equal(c.candidates, tt.want) || c.directive != directiveNoFileComp {
				t.Errorf("got %q directive %s, want %q directive %s (stderr %q)", c.candidates, c.directive, tt.want, directiveNoFileComp, c.res.Err)
			}
		})
	}
}

// The connection flags on the command line win over the environment.
func TestCompletionUsesConnectionFlags(t *testing.T) {
	good := completionServer(t)
	bad := clitest.Env("NATS_URL=" + deadURL(t))
	c := complete(t, bad, "static", "info", "--server", good("NATS_URL"), "ORDERS", "")
	if !slices.Equal(c.candidates, []string{"billing", "fulfillment"}) {
		t.Fatalf("got %q (stderr %q)", c.candidates, c.res.Err)
	}
}

// With no server, completion offers nothing, says nothing and is quick:
// at once when the connection is refused, within completionTimeout (2s)
// when the server accepts and never answers, whatever --timeout says.
func TestCompletionServerDown(t *testing.T) {
	every := [][]string{
		{"static", "info", ""},
		{"elastic", "info", "EVENTS", ""},
		{"static", "consume", "ORDERS", "fulfillment", ""},
		{"partition", "x", "--stream", ""},
	}
	for _, tc := range []struct {
		name, url string
		cases     [][]string
	}{
		{"refused", deadURL(t), every},
		{"silent", silentURL(t), [][]string{{"static", "member-info", "--timeout", "1m", "ORDERS", "fulfillment", ""}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := clitest.Env("NATS_URL=" + tc.url)
			for _, args := range tc.cases {
				start := time.Now()
				c := complete(t, env, args...)
				took := time.Since(start)
				if len(c.candidates) != 0 || c.directive != directiveError {
					t.Errorf("%q: got %q directive %s, want none and directive %s", args, c.candidates, c.directive, directiveError)
				}
				if c.res.Err != "Completion ended with directive: ShellCompDirectiveError\n" {
					t.Errorf("%q: stderr %q, want only cobra's directive note", args, c.res.Err)
				}
				if took > 3*time.Second {
					t.Errorf("%q: took %s, want about 2s at most", args, took)
				}
			}
		})
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		r := clitest.Run(t, cmd.Run, nil, "completion", shell)
		if r.Code != 0 || r.Err != "" || !strings.Contains(r.Out, "cg") || !strings.Contains(r.Out, "__complete") {
			t.Errorf("cg completion %s: exit %d, stderr %q, %d bytes out", shell, r.Code, r.Err, len(r.Out))
		}
	}
	r := clitest.Run(t, cmd.Run, nil, "completion", "tcsh")
	if r.Code != 2 {
		t.Errorf("cg completion tcsh: exit %d, want 2 (stderr %q)", r.Code, r.Err)
	}
}

// deadURL is a loopback address nothing listens on.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "nats://" + addr
}

// silentURL is a loopback address that accepts connections and says
// nothing, as a hung server would.
func silentURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		for _, c := range conns {
			c.Close()
		}
	})
	return "nats://" + l.Addr().String()
}
