package group_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// authEnv is a server whose users hold the permissions cg prints.
type authEnv struct {
	t     *testing.T
	s     *server.Server
	admin jetstream.JetStream
	// published is how many orders.k<i> were published.
	published int
	// envs overrides how a user connects (a nats context, say).
	envs map[string]func(string) string
}

// permsJSON runs `cg <args> --json` (no server) and reads its lists.
func permsJSON(t *testing.T, args ...string) *server.Permissions {
	t.Helper()
	r := clitest.Run(t, cmd.Run, clitest.Env(), append(args, "--json")...)
	if r.Code != 0 {
		t.Fatalf("cg %v: exit %d: %s", args, r.Code, r.Err)
	}
	var v struct {
		Publish, Subscribe struct{ Allow []string }
		AllowResponses     bool `json:"allow_responses"`
	}
	if err := json.Unmarshal([]byte(r.Out), &v); err != nil {
		t.Fatalf("cg %v --json: %v\n%s", args, err, r.Out)
	}
	p := &server.Permissions{Publish: &server.SubjectPermission{Allow: v.Publish.Allow}, Subscribe: &server.SubjectPermission{Allow: v.Subscribe.Allow}}
	if v.AllowResponses {
		p.Response = &server.ResponsePermission{MaxMsgs: 1, Expires: time.Minute}
	}
	return p
}

// without is p less the publish entry subject.
func without(p *server.Permissions, subject string) *server.Permissions {
	q := *p
	pub := *p.Publish
	pub.Allow = slices.DeleteFunc(slices.Clone(pub.Allow), func(s string) bool { return s == subject })
	q.Publish = &pub
	return &q
}

func startAuth(t *testing.T, users map[string]*server.Permissions) *authEnv {
	o := natstest.Options(t.TempDir())
	o.Users = []*server.User{{Username: "admin", Password: "pw"}}
	for name, p := range users {
		o.Users = append(o.Users, &server.User{Username: name, Password: "pw", Permissions: p})
	}
	s := natstest.Start(t, o)
	nc := natstest.Connect(t, s, nats.UserInfo("admin", "pw"))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return &authEnv{t: t, s: s, admin: js}
}

func (e *authEnv) env(user string) func(string) string {
	if f, ok := e.envs[user]; ok {
		return f
	}
	return clitest.Env("NATS_URL="+e.s.ClientURL(), "NATS_USER="+user, "NATS_PASSWORD=pw", "NATS_TIMEOUT=10s")
}

func (e *authEnv) as(user string, args ...string) clitest.Result {
	e.t.Helper()
	return clitest.Run(e.t, cmd.Run, e.env(user), args...)
}

func (e *authEnv) ok(user string, args ...string) clitest.Result {
	e.t.Helper()
	r := e.as(user, args...)
	if r.Code != 0 {
		e.t.Fatalf("%s: cg %v: exit %d, stderr:\n%s\nstdout:\n%s", user, args, r.Code, r.Err, r.Out)
	}
	if strings.Contains(r.Err, "permission") {
		e.t.Fatalf("%s: cg %v: succeeded but complained of a permission:\n%s", user, args, r.Err)
	}
	return r
}

// refused runs a command that must fail fast on a missing permission,
// naming it.
func (e *authEnv) refused(user string, args ...string) clitest.Result {
	e.t.Helper()
	start := time.Now()
	r := e.as(user, args...)
	took := time.Since(start)
	if r.Code != 1 || !strings.Contains(r.Err, "permission denied: this user may not ") {
		e.t.Fatalf("%s: cg %v: want exit 1 naming a missing permission, got exit %d:\n%s", user, args, r.Code, r.Err)
	}
	if took > 5*time.Second { // NATS_TIMEOUT is 10s: a refusal is never waited out
		e.t.Fatalf("%s: cg %v: refused after %s, want well within the 10s timeout", user, args, took)
	}
	return r
}

// partitioned makes ORDERS, partitioned n ways on orders.*.
func (e *authEnv) partitioned(n int) {
	_, err := e.admin.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"}, AllowDirect: true,
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "orders.*", Destination: fmt.Sprintf("{{partition(%d,1)}}.orders.{{wildcard(1)}}", n)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *authEnv) publish(from, to int) {
	e.published = max(e.published, to)
	for i := from; i < to; i++ {
		if _, err := e.admin.Publish(context.Background(), fmt.Sprintf("orders.k%d", i), []byte("x")); err != nil {
			e.t.Fatal(err)
		}
	}
}

// handled are the subjects an instance's --json msg lines show.
func handled(t *testing.T, out string) []string {
	var got []string
	for _, l := range strings.Split(out, "\n") {
		var m struct{ Type, Subject string }
		if json.Unmarshal([]byte(l), &m) == nil && m.Type == "msg" {
			got = append(got, m.Subject)
		}
	}
	return got
}

// mine are the stored subjects consumer's filters select, token stripped.
func (e *authEnv) mine(stream, consumer string) map[string]bool {
	ctx := context.Background()
	c, err := e.admin.Consumer(ctx, stream, consumer)
	if err != nil {
		return nil // not made yet
	}
	filters := c.CachedInfo().Config.FilterSubjects
	if f := c.CachedInfo().Config.FilterSubject; f != "" {
		filters = append(filters, f)
	}
	s, _ := e.admin.Stream(ctx, stream)
	si, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]bool{}
	for subj := range si.State.Subjects {
		for _, f := range filters {
			if cg.SubjectMatches(f, subj) {
				out[strings.SplitN(subj, ".", 2)[1]] = true
			}
		}
	}
	return out
}

// failover runs two instances of member as user, checks that the pinned
// one handles every message of the member (settled says so, from the
// subjects handled), stops it (SIGTERM's in-process equivalent), and
// checks that the other takes over.
func (e *authEnv) failover(user, kind, stream, group, member string, settled func(seen map[string]bool) bool) {
	t := e.t
	args := []string{kind, "consume", stream, group, member, "--json", "--sleep", "0s"}
	a := clitest.Start(cmd.Run, e.env(user), args...)
	b := clitest.Start(cmd.Run, e.env(user), args...)
	defer a.Stop(t)
	defer b.Stop(t)
	seen := func() map[string]bool {
		got := map[string]bool{}
		for _, s := range append(handled(t, a.Out.String()), handled(t, b.Out.String())...) {
			got[s] = true
		}
		return got
	}
	e.publish(0, 40)
	clitest.Eventually(t, 30*time.Second, "the member handles its messages", func() bool { return settled(seen()) })
	pinned, standby := a, b
	if len(handled(t, a.Out.String())) == 0 {
		pinned, standby = b, a
	}
	if code := pinned.Stop(t); code != 0 {
		t.Fatalf("stopping the pinned instance: exit %d\n%s", code, pinned.Err.String())
	}
	before := len(handled(t, standby.Out.String()))
	e.publish(40, 80)
	clitest.Eventually(t, 30*time.Second, "the standby takes over", func() bool { return settled(seen()) })
	if len(handled(t, standby.Out.String())) == before {
		t.Fatalf("the standby handled nothing after the handoff")
	}
	for _, x := range []*clitest.Async{a, b} {
		if strings.Contains(x.Err.String(), "permission") {
			t.Fatalf("an instance hit a permission:\n%s", x.Err.String())
		}
	}
}

// staticSettled: the subjects seen are exactly those of consumer's partitions.
func (e *authEnv) staticSettled(stream, consumer string) func(map[string]bool) bool {
	return func(seen map[string]bool) bool {
		want := e.mine(stream, consumer)
		for s := range seen {
			if !want[s] {
				e.t.Fatalf("handled %s, not a message of consumer %s", s, consumer)
			}
		}
		return len(want) > 0 && len(seen) == len(want)
	}
}

// elasticSettled: the work stream holds nothing of consumer's partitions,
// and what was handled and what waits are, together and apart, everything
// published so far.
func (e *authEnv) elasticSettled(ws, consumer string, published func() int) func(map[string]bool) bool {
	return func(seen map[string]bool) bool {
		if m := e.mine(ws, consumer); m == nil || len(m) > 0 {
			return false
		}
		s, _ := e.admin.Stream(context.Background(), ws)
		si, err := s.Info(context.Background(), jetstream.WithSubjectFilter(">"))
		if err != nil {
			e.t.Fatal(err)
		}
		waiting := 0
		for subj := range si.State.Subjects {
			if seen[strings.SplitN(subj, ".", 2)[1]] {
				e.t.Fatalf("%s was handled and still waits", subj)
			}
			waiting++
		}
		return len(seen) > 0 && len(seen)+waiting == published()
	}
}

func TestPermissionsStatic(t *testing.T) {
	member := permsJSON(t, "static", "permissions", "ORDERS", "g", "--member", "m1")
	e := startAuth(t, map[string]*server.Permissions{
		"w1":         member,
		"op":         permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "operator", "--member", "m1,m2"),
		"view":       permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "viewer"),
		"less":       without(member, "$JS.API.CONSUMER.MSG.NEXT.ORDERS.g-m1"),
		"less-info":  without(member, "$JS.API.STREAM.INFO.ORDERS"),
		"less-watch": without(member, "$JS.API.CONSUMER.CREATE.KV_static-consumer-groups.*.$KV.static-consumer-groups.ORDERS.g"),
	})
	e.partitioned(4)
	e.ok("op", "static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.ok("admin", "static", "create", "balanced", "ORDERS", "g2", "4", "m1", "m2")

	e.failover("w1", "static", "ORDERS", "g", "m1", e.staticSettled("ORDERS", "g-m1"))

	r := e.refused("w1", "static", "consume", "ORDERS", "g", "m2", "--count", "1")
	errorSays(t, "consume as another member", r.Err, "$JS.API.CONSUMER", "g-m2", "roles that have it: member (for m2)", "--member m2")
	e.refused("w1", "static", "consume", "ORDERS", "g2", "m1", "--count", "1")
	e.refused("w1", "static", "delete", "ORDERS", "g", "--force")
	e.refused("w1", "static", "delete", "ORDERS", "g2", "--force")
	e.refused("w1", "static", "step-down", "ORDERS", "g", "m2")
	e.refusedKV("w1", "static-consumer-groups", "ORDERS.g", "ORDERS.g2")
	e.refusedKV("w1", "cg-static-positions", "ORDERS.g.m2", "ORDERS.g2.m1")

	e.ok("view", "static", "info", "ORDERS", "g")
	e.ok("view", "static", "watch", "ORDERS", "g", "--count", "2", "--interval", "100ms")
	// Warnings (members not running) exit 1; what matters is that it ran.
	if r := e.as("view", "check", "ORDERS", "g"); !strings.Contains(r.Out, "1 group checked") || strings.Contains(r.Out+r.Err, "refused") {
		t.Fatalf("viewer check: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	e.refused("view", "static", "delete", "ORDERS", "g", "--force")
	e.refusedKV("view", "static-consumer-groups", "ORDERS.g")

	r = e.refused("less", "static", "consume", "ORDERS", "g", "m1", "--count", "1")
	errorSays(t, "a member user without the pull right", r.Err, "publish to $JS.API.CONSUMER.MSG.NEXT.ORDERS.g-m1", "roles that have it: member (for m1)")
	r = e.refused("less-watch", "static", "consume", "ORDERS", "g", "m1", "--count", "1")
	errorSays(t, "a member user without the config watch", r.Err, "publish to $JS.API.CONSUMER.CREATE.KV_static-consumer-groups.", "$KV.static-consumer-groups.ORDERS.g", "member (for m1)")
	// (Without its $JS.ACK entry a member still acks: allow_responses lets
	// it answer the messages delivered to it; the entry is there for the
	// in-progress acks and for handing back a dead instance's message.)
	r = e.refused("less-info", "static", "consume", "ORDERS", "g", "m1", "--count", "1")
	errorSays(t, "a member user without the stream info", r.Err, "publish to $JS.API.STREAM.INFO.ORDERS ", "member (for m1), operator, viewer")

	e.refused("op", "static", "delete", "ORDERS", "g2", "--force")
	e.ok("op", "static", "delete", "ORDERS", "g", "--force")
	e.ok("op", "static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.intact("ORDERS", "g2")
}

// refusedKV checks that user can change none of keys of bucket.
func (e *authEnv) refusedKV(user, bucket string, keys ...string) {
	t := e.t
	nc := natstest.Connect(t, e.s, nats.UserInfo(user, "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	js, _ := jetstream.New(nc)
	for _, key := range keys {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.Publish(ctx, "$KV."+bucket+"."+key, []byte("{}"))
		cancel()
		if err == nil {
			t.Fatalf("%s changed %s in %s", user, key, bucket)
		}
	}
	if kv, err := e.admin.KeyValue(context.Background(), bucket); err == nil {
		for _, key := range keys {
			if en, err := kv.Get(context.Background(), key); err == nil && string(en.Value()) == "{}" {
				t.Fatalf("%s in %s was changed", key, bucket)
			}
		}
	}
}

// intact checks that group's config and consumers are still there.
func (e *authEnv) intact(stream, group string, consumers ...string) {
	ctx := context.Background()
	kv, err := e.admin.KeyValue(ctx, cg.StaticBucket)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := kv.Get(ctx, stream+"."+group); err != nil {
		e.t.Fatalf("group %s's config: %v", group, err)
	}
	for _, c := range consumers {
		if _, err := e.admin.Consumer(ctx, stream, c); err != nil {
			e.t.Fatalf("consumer %s: %v", c, err)
		}
	}
}

// errorSays checks that the error line of stderr says every word.
func errorSays(t *testing.T, what, stderr string, words ...string) {
	t.Helper()
	lines := clitest.ErrorLines(stderr)
	if len(lines) != 1 {
		t.Fatalf("%s: want one error line, got %q", what, stderr)
	}
	for _, w := range words {
		if !strings.Contains(lines[0], w) {
			t.Fatalf("%s: error %q does not say %q", what, lines[0], w)
		}
	}
}

func TestPermissionsElastic(t *testing.T) {
	member := permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--member", "m1")
	e := startAuth(t, map[string]*server.Permissions{
		"w1":   member,
		"op":   permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--role", "operator"),
		"view": permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--role", "viewer"),
		"less": without(member, "$JS.API.CONSUMER.MSG.NEXT.ORDERS-g.m1"),
	})
	if _, err := e.admin.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	e.ok("op", "elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1")
	e.ok("op", "elastic", "add", "ORDERS", "g", "m1", "m2")
	e.ok("admin", "elastic", "create", "ORDERS", "g2", "4", "--filter", "orders.*:1")
	e.ok("admin", "elastic", "add", "ORDERS", "g2", "m1")

	e.failover("w1", "elastic", "ORDERS", "g", "m1", e.elasticSettled("ORDERS-g", "m1", func() int { return e.published }))

	r := e.refused("w1", "elastic", "consume", "ORDERS", "g", "m2", "--count", "1")
	errorSays(t, "consume as another member", r.Err, "ORDERS-g.m2", "roles that have it: member (for m2)")
	e.refused("w1", "elastic", "consume", "ORDERS", "g2", "m1", "--count", "1")
	e.refused("w1", "elastic", "delete", "ORDERS", "g", "--force")
	e.refused("w1", "elastic", "delete", "ORDERS", "g2", "--force")
	e.refused("w1", "elastic", "add", "ORDERS", "g", "m3")
	e.refused("w1", "elastic", "drop", "ORDERS", "g", "m2")
	e.refusedKV("w1", "elastic-consumer-groups", "ORDERS.g", "ORDERS.g2")

	e.ok("view", "elastic", "info", "ORDERS", "g")
	e.ok("view", "elastic", "watch", "ORDERS", "g", "--count", "2", "--interval", "100ms")
	if r := e.as("view", "check", "ORDERS", "g"); !strings.Contains(r.Out, "1 group checked") || strings.Contains(r.Out+r.Err, "refused") {
		t.Fatalf("viewer check: exit %d\n%s%s", r.Code, r.Out, r.Err)
	}
	e.refused("view", "elastic", "add", "ORDERS", "g", "m3")
	e.refused("view", "elastic", "delete", "ORDERS", "g", "--force")
	e.refusedKV("view", "elastic-consumer-groups", "ORDERS.g")

	r = e.refused("less", "elastic", "consume", "ORDERS", "g", "m1", "--count", "1")
	errorSays(t, "a member user without the pull right", r.Err, "publish to $JS.API.CONSUMER.MSG.NEXT.ORDERS-g.m1", "roles that have it: member (for m1)")

	e.ok("op", "elastic", "add", "ORDERS", "g", "m3")
	e.ok("op", "elastic", "drop", "ORDERS", "g", "m3")
	e.refused("op", "elastic", "delete", "ORDERS", "g2", "--force")
	e.refused("op", "elastic", "add", "ORDERS", "g2", "m3")
	e.ok("op", "elastic", "delete", "ORDERS", "g", "--force")
	if _, err := e.admin.Stream(context.Background(), "ORDERS-g2"); err != nil {
		t.Fatalf("g2's work stream: %v", err)
	}
}

// The conf block parses as nats-server configuration into the same lists
// the json holds.
func TestPermissionsConfParses(t *testing.T) {
	for _, k := range []string{"static", "elastic"} {
		roles := [][]string{{"--member", "m1", "--dead-letter", "dl.orders"}, {"--role", "operator"}, {"--role", "viewer", "--member", "m1,m2"}}
		if k == "elastic" {
			roles = append(roles, []string{"--member", "m1", "--dynamic"})
		}
		for _, role := range roles {
			args := append([]string{k, "permissions", "ORDERS", "g"}, role...)
			r := clitest.Run(t, cmd.Run, clitest.Env(), args...)
			if r.Code != 0 {
				t.Fatalf("cg %v: exit %d: %s", args, r.Code, r.Err)
			}
			indented := strings.ReplaceAll(r.Out, "\n", "\n    ")
			conf := fmt.Sprintf("listen: 127.0.0.1:-1\nauthorization {\n  users: [\n    {user: u, password: p\n    %s}\n  ]\n}\n", indented)
			path := t.TempDir() + "/server.conf"
			if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
				t.Fatal(err)
			}
			o, err := server.ProcessConfigFile(path)
			if err != nil {
				t.Fatalf("cg %v: the conf block does not parse: %v\n%s", args, err, conf)
			}
			got := o.Users[0].Permissions
			want := permsJSON(t, args...)
			if !slices.Equal(got.Publish.Allow, want.Publish.Allow) || !slices.Equal(got.Subscribe.Allow, want.Subscribe.Allow) ||
				(got.Response != nil) != (want.Response != nil) {
				t.Fatalf("cg %v: conf and json differ:\nconf %+v %+v %v\njson %+v %+v %v", args, got.Publish, got.Subscribe, got.Response, want.Publish, want.Subscribe, want.Response)
			}
		}
	}
}

// A member's lists name its own consumer and keys and nothing of another
// member or group; bad input is one usage line.
func TestPermissionsNarrow(t *testing.T) {
	m1 := permsJSON(t, "static", "permissions", "ORDERS", "g", "--member", "m1")
	all := append(slices.Clone(m1.Publish.Allow), m1.Subscribe.Allow...)
	for _, s := range all {
		for _, bad := range []string{"g-m2", ".m2", "DELETE.ORDERS", "STREAM.CREATE", "STREAM.DELETE", "g2"} {
			if strings.Contains(s, bad) {
				t.Errorf("static member m1 may use %s (%q)", s, bad)
			}
		}
		if s == ">" || s == "$JS.API.>" || strings.HasPrefix(s, "$KV.static-consumer-groups") {
			t.Errorf("static member m1 may use %s", s)
		}
	}
	if !slices.Contains(m1.Publish.Allow, "$KV.cg-static-positions.ORDERS.g.m1") || !slices.Contains(m1.Publish.Allow, "$JS.ACK.ORDERS.g-m1.>") {
		t.Errorf("static member m1 lacks its own position or acks: %v", m1.Publish.Allow)
	}
	e1 := permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--member", "m1", "--dead-letter", "dl.orders")
	for _, s := range e1.Publish.Allow {
		if strings.HasPrefix(s, "$KV.elastic-consumer-groups") || strings.Contains(s, "STREAM.DELETE") || strings.Contains(s, ".m2") {
			t.Errorf("elastic member m1 may publish to %s", s)
		}
	}
	if !slices.Contains(e1.Publish.Allow, "dl.orders") {
		t.Errorf("--dead-letter not granted: %v", e1.Publish.Allow)
	}
	// --dynamic adds writes of this group's configuration and dynamic
	// records, and of nothing else.
	d1 := permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--member", "m1", "--dynamic")
	var added []string
	for _, s := range d1.Publish.Allow {
		if !slices.Contains(e1.Publish.Allow, s) {
			added = append(added, s)
		}
	}
	for _, s := range added {
		if !strings.Contains(s, "cg-dynamic-members") && s != "$KV.elastic-consumer-groups.ORDERS.g" {
			t.Errorf("--dynamic adds %s", s)
		}
		if strings.Contains(s, "g2") || (strings.HasPrefix(s, "$KV.") && !strings.Contains(s, "ORDERS.g")) {
			t.Errorf("--dynamic reaches beyond group g: %s", s)
		}
	}
	if !slices.Contains(added, "$KV.cg-dynamic-members.ORDERS.g.>") || !slices.Contains(added, "$KV.elastic-consumer-groups.ORDERS.g") {
		t.Errorf("--dynamic adds %v: not the group's configuration and dynamic records", added)
	}
	for _, bad := range [][]string{
		{"static", "permissions", "ORDERS", "g"},
		{"static", "permissions", "ORDERS", "g", "--role", "boss"},
		{"static", "permissions", "ORDERS", "g", "--member", "m1", "--format", "yaml"},
		{"elastic", "permissions", "ORDERS", "g", "--role", "viewer", "--dead-letter", "dl"},
		{"elastic", "permissions", "ORDERS", "g", "--member", "a.b"},
		{"elastic", "permissions", "ORDERS", "g", "--role", "viewer", "--dynamic"},
		{"static", "permissions", "ORDERS", "g", "--member", "m1", "--dynamic"},
	} {
		r := clitest.Run(t, cmd.Run, clitest.Env(), bad...)
		if r.Code != 2 || len(clitest.ErrorLines(r.Err)) != 1 || r.Out != "" {
			t.Errorf("cg %v: want exit 2 and one error line, got exit %d: %q", bad, r.Code, r.Err)
		}
	}
}

// A member whose user has its own inbox prefix (set in its nats context)
// runs with the permissions printed for that prefix: replies never go
// through the shared _INBOX.
func TestPermissionsInboxPrefix(t *testing.T) {
	perms := permsJSON(t, "static", "permissions", "ORDERS", "g", "--member", "m1", "--inbox-prefix", "_INBOX_w1")
	if slices.Contains(perms.Subscribe.Allow, "_INBOX.>") || !slices.Contains(perms.Subscribe.Allow, "_INBOX_w1.>") {
		t.Fatalf("subscribe list %v", perms.Subscribe.Allow)
	}
	e := startAuth(t, map[string]*server.Permissions{"w1": perms})
	home := t.TempDir()
	if err := os.MkdirAll(home+"/nats/context", 0o700); err != nil {
		t.Fatal(err)
	}
	ctxJSON := fmt.Sprintf(`{"url": %q, "user": "w1", "password": "pw", "inbox_prefix": "_INBOX_w1"}`, e.s.ClientURL())
	if err := os.WriteFile(home+"/nats/context/w1.json", []byte(ctxJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	e.envs = map[string]func(string) string{"w1": clitest.Env("XDG_CONFIG_HOME="+home, "NATS_CONTEXT=w1", "NATS_TIMEOUT=10s")}
	e.partitioned(4)
	e.ok("admin", "static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2")
	e.failover("w1", "static", "ORDERS", "g", "m1", e.staticSettled("ORDERS", "g-m1"))
}

// TestPermissionsPoisonAndReset proves the entries the poison and reset
// features add: a member holding exactly --role member --dead-letter
// dead-letters a poison message and reads its own park state; a viewer
// sees the count; an operator releases and resets the group; a member
// without the dead-letter entry is refused naming it.
func TestPermissionsPoisonAndReset(t *testing.T) {
	member := permsJSON(t, "static", "permissions", "ORDERS", "g", "--member", "m1", "--dead-letter", "dlq.orders")
	e := startAuth(t, map[string]*server.Permissions{
		"w1":   member,
		"op":   permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "operator", "--member", "m1"),
		"view": permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "viewer", "--member", "m1"),
		"less": without(member, "dlq.orders"),
	})
	e.partitioned(1)
	if _, err := e.admin.CreateStream(context.Background(), jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"dlq.orders"}}); err != nil {
		t.Fatal(err)
	}
	e.ok("op", "static", "create", "balanced", "ORDERS", "g", "1", "m1")
	e.publish(0, 6) // orders.k0 .. orders.k5; k3 always fails
	poison := []string{"static", "consume", "ORDERS", "g", "m1", "--sleep", "0s", "--max-deliver", "2", "--dead-letter", "dlq.orders", "--fail-subject", "orders.k3"}

	r := e.refused("less", append(poison, "--count", "5")...)
	errorSays(t, "a member without the dead-letter entry", r.Err, "publish to dlq.orders")

	// The refused run acked k0..k2 before it came to the dead letter.
	e.ok("w1", append(poison, "--count", "2")...)
	dead, err := e.admin.Stream(context.Background(), "DEAD")
	if err != nil {
		t.Fatal(err)
	}
	if n := dead.CachedInfo().State.Msgs; n != 1 {
		t.Fatalf("%d dead letters, want 1", n)
	}
	r = e.ok("view", "--json", "static", "info", "ORDERS", "g")
	if !strings.Contains(r.Out, `"dead_lettered": 1`) {
		t.Fatalf("viewer's info shows no dead letter:\n%s", r.Out)
	}
	e.ok("op", "static", "release", "ORDERS", "g", "m1")
	e.ok("op", "static", "reset", "ORDERS", "g", "--to-start", "--force")
	e.ok("op", "static", "reset", "ORDERS", "g", "--to-seq", "2", "--dry-run")
	e.refused("view", "static", "reset", "ORDERS", "g", "--to-start", "--force")
	e.refused("w1", "static", "reset", "ORDERS", "g", "--to-start", "--force")
}

// A member user with the permissions generated for a partition-layout
// group consumes its own partitions through their consumers, and nothing
// else; the operator creates and deletes the group.
func TestPermissionsPartitionLayout(t *testing.T) {
	e := startAuth(t, map[string]*server.Permissions{
		"w1":   permsJSON(t, "static", "permissions", "ORDERS", "g", "--member", "m1", "--layout", "partition", "--partitions", "4"),
		"op":   permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "operator", "--member", "m1,m2", "--layout", "partition", "--partitions", "4"),
		"view": permsJSON(t, "static", "permissions", "ORDERS", "g", "--role", "viewer", "--layout", "partition", "--partitions", "4"),
	})
	e.partitioned(4)
	e.ok("op", "static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2", "--layout", "partition")
	e.ok("admin", "static", "create", "balanced", "ORDERS", "g2", "4", "m1", "m2")
	e.failover("w1", "static", "ORDERS", "g", "m1", func(seen map[string]bool) bool {
		// Until the member has made both its partition consumers, what is
		// its own cannot be told yet.
		want, p1 := e.mine("ORDERS", "g-p0"), e.mine("ORDERS", "g-p1")
		if want == nil || p1 == nil {
			return false
		}
		for s := range p1 {
			want[s] = true
		}
		for s := range seen {
			if !want[s] {
				t.Fatalf("handled %s, not a message of m1's partitions 0 and 1", s)
			}
		}
		return len(want) > 0 && len(seen) == len(want)
	})
	e.refused("w1", "static", "consume", "ORDERS", "g2", "m1", "--count", "1")
	e.refusedKV("w1", "static-consumer-groups", "ORDERS.g2")
	e.ok("view", "static", "info", "ORDERS", "g")
	e.ok("op", "static", "step-down", "ORDERS", "g", "m1")
	e.ok("op", "static", "delete", "ORDERS", "g", "--force")
	e.intact("ORDERS", "g2")
}
