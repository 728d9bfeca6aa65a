package group_test

import (
	"context"
	"encoding/json"
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

// members is the elastic group's member list, as stored.
func (e *authEnv) members(group string) []string {
	e.t.Helper()
	cfg, err := cg.New(e.admin).ElasticConfig(context.Background(), "ORDERS", group)
	if err != nil {
		e.t.Fatal(err)
	}
	names := cfg.MemberNames()
	slices.Sort(names)
	return names
}

// dynamicKeys are the keys of member in cg-dynamic-members for group g:
// its mark and its liveness records.
func (e *authEnv) dynamicKeys(member string) []string {
	e.t.Helper()
	kv, err := e.admin.KeyValue(context.Background(), cg.DynamicBucket)
	if err != nil {
		return nil // no bucket: no keys
	}
	lister, err := kv.ListKeysFiltered(context.Background(), "ORDERS.g."+member, "ORDERS.g."+member+".*")
	if err != nil {
		e.t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys
}

// TestPermissionsDynamic proves the entries --dynamic adds, on a server
// whose users hold exactly the json cg prints: a member with them starts
// with --dynamic (its first join makes the bucket and adds it to the
// group), reaps a dynamic member killed with nobody left to drop it (which
// a viewer's check reports meanwhile), and stops cleanly, dropping itself.
// A member without them is refused at the start, naming the right it
// lacks, and nothing of it stays behind; one without the configuration
// write that runs as a member already there is refused when it drops the
// killed one, which stays.
func TestPermissionsDynamic(t *testing.T) {
	dyn := func(m string) *server.Permissions {
		return permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--member", m, "--dynamic")
	}
	e := startAuth(t, map[string]*server.Permissions{
		"op":     permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--role", "operator"),
		"view":   permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--role", "viewer"),
		"w1":     dyn("w1"),
		"w2":     dyn("w2"),
		"plain":  permsJSON(t, "elastic", "permissions", "ORDERS", "g", "--member", "w3"),
		"less":   without(dyn("w3"), "$KV.elastic-consumer-groups.ORDERS.g"),
		"nodrop": without(dyn("w4"), "$KV.elastic-consumer-groups.ORDERS.g"),
	})
	if _, err := e.admin.CreateStream(context.Background(), jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	e.ok("op", "elastic", "create", "ORDERS", "g", "4", "--filter", "orders.*:1")

	// The member role alone does not let a member add itself.
	r := e.refused("plain", "elastic", "consume", "ORDERS", "g", "w3", "--dynamic", "--count", "1")
	errorSays(t, "a --dynamic start with the member role alone", r.Err, "KV_cg-dynamic-members", "member (for w3, with --dynamic)", "--member w3 --dynamic'")
	if _, err := e.admin.KeyValue(context.Background(), cg.DynamicBucket); err == nil {
		t.Fatalf("the refused start made the bucket %s", cg.DynamicBucket)
	}

	// w2 starts with --dynamic's rights (an engine instance on its own
	// connection, which is then cut as a kill -9 would): the first dynamic
	// join makes the bucket and adds w2.
	nc := natstest.Connect(t, e.s, nats.UserInfo("w2", "pw"), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	c2, err := cg.NewFromConn(nc, "")
	if err != nil {
		t.Fatal(err)
	}
	w2, err := c2.JoinElastic(context.Background(), "ORDERS", "g", "w2", func(_ context.Context, m *cg.Msg) { _ = m.Ack() },
		cg.JoinOptions{Dynamic: true, SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("w2 with --dynamic's rights: %v", err)
	}
	t.Cleanup(w2.Stop)
	if got := e.members("g"); !slices.Equal(got, []string{"w2"}) {
		t.Fatalf("after w2's dynamic start the members are %v", got)
	}

	// The viewer's info shows w2 dynamic and when it was last seen: read
	// from the bucket's subject index, which takes no consumer on it.
	clitest.Eventually(t, 10*time.Second, "the viewer's info showing w2 dynamic and seen", func() bool {
		r := e.as("view", "--json", "elastic", "info", "ORDERS", "g")
		if r.Code != 0 {
			t.Fatalf("the viewer's info: exit %d\n%s", r.Code, r.Err)
		}
		var gi struct {
			Members []struct {
				Member   string    `json:"member"`
				Dynamic  bool      `json:"dynamic"`
				LastSeen time.Time `json:"last_seen"`
			} `json:"members"`
		}
		if err := json.Unmarshal([]byte(r.Out), &gi); err != nil {
			t.Fatalf("info --json: %v\n%s", err, r.Out)
		}
		return len(gi.Members) == 1 && gi.Members[0].Member == "w2" && gi.Members[0].Dynamic && !gi.Members[0].LastSeen.IsZero()
	})

	// Without the right to write the group's configuration a dynamic start
	// is refused naming it, and leaves no mark or record behind.
	r = e.refused("less", "elastic", "consume", "ORDERS", "g", "w3", "--dynamic", "--count", "1")
	errorSays(t, "a --dynamic start without the configuration write", r.Err, "publish to $KV.elastic-consumer-groups.ORDERS.g", "roles that have it: member (for w3, with --dynamic), operator", "--member w3 --dynamic'")
	if keys := e.dynamicKeys("w3"); len(keys) > 0 || slices.Contains(e.members("g"), "w3") {
		t.Fatalf("the refused start left w3's keys %v, members %v", keys, e.members("g"))
	}

	// w2 is killed with no dynamic instance left to drop it: the viewer's
	// check says so once its session timeout has passed.
	nc.Close()
	clitest.Eventually(t, 30*time.Second, "the viewer's check reporting w2 gone", func() bool {
		r := e.as("view", "--json", "check", "ORDERS", "g")
		if strings.Contains(r.Err, "permission") {
			t.Fatalf("the viewer's check hit a permission:\n%s", r.Err)
		}
		var rep struct {
			Findings []struct{ Code, Member, Hint string }
		}
		if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
			t.Fatalf("check --json: %v\n%s", err, r.Out)
		}
		for _, f := range rep.Findings {
			if f.Code == cg.CodeDynamicMemberGone && f.Member == "w2" && strings.Contains(f.Hint, "--dynamic") {
				return true
			}
		}
		return false
	})

	// w4, an operator's member, runs --dynamic without the right to write
	// the group's configuration. It needs none to run as a member already
	// there; when it comes to drop w2 (w2's session timeout after its
	// start) it is refused and stops naming the right, and w2 stays.
	e.ok("op", "elastic", "add", "ORDERS", "g", "w4", "--minimal")
	w4 := clitest.Start(cmd.Run, e.env("nodrop"), "elastic", "consume", "ORDERS", "g", "w4", "--dynamic", "--session-timeout", "2s", "--json", "--sleep", "0s")
	defer w4.Stop(t)
	w4.WaitOut(t, 30*time.Second, "w4 joined", func(out string) bool { return strings.Contains(out, `"event":"joined"`) })
	if code, ended := w4.Within(t, 30*time.Second); !ended || code != 1 {
		t.Fatalf("w4 without the configuration write: ended %v, exit %d; want it refused (exit 1) when it drops w2\n%s", ended, code, w4.Err.String())
	}
	errorSays(t, "a dynamic member dropping another without the configuration write", w4.Err.String(),
		"publish to $KV.elastic-consumer-groups.ORDERS.g", "member (for w4, with --dynamic)")
	if got := e.members("g"); !slices.Equal(got, []string{"w2", "w4"}) {
		t.Fatalf("w4 without the configuration write changed the members: %v", got)
	}

	// w1, with --dynamic's rights, adds itself and drops w2 as gone.
	w1 := clitest.Start(cmd.Run, e.env("w1"), "elastic", "consume", "ORDERS", "g", "w1", "--dynamic", "--session-timeout", "2s", "--json", "--sleep", "0s")
	defer w1.Stop(t)
	clitest.Eventually(t, 30*time.Second, "w1 in the group and w2 reaped", func() bool { return slices.Equal(e.members("g"), []string{"w1", "w4"}) })
	clitest.Eventually(t, 10*time.Second, "w2's mark and records removed", func() bool { return len(e.dynamicKeys("w2")) == 0 })
	e.publish(0, 20)
	// What w1 handled and what waits for w4 (stopped) are, together and
	// apart, everything published; nothing of w1's waits.
	settled := e.elasticSettled("ORDERS-g", "w1", func() int { return e.published })
	clitest.Eventually(t, 30*time.Second, "w1 handling its partitions' messages", func() bool {
		seen := map[string]bool{}
		for _, s := range handled(t, w1.Out.String()) {
			seen[s] = true
		}
		return settled(seen)
	})

	// A clean stop of its only instance drops w1, and its keys go.
	if code := w1.Stop(t); code != 0 {
		t.Fatalf("w1's clean stop: exit %d\n%s", code, w1.Err.String())
	}
	if got := e.members("g"); !slices.Equal(got, []string{"w4"}) {
		t.Fatalf("after w1's clean stop the members are %v, want the operator's w4 alone", got)
	}
	if keys := e.dynamicKeys("w1"); len(keys) > 0 {
		t.Fatalf("w1's keys %v left after its clean stop", keys)
	}
	if strings.Contains(w1.Err.String(), "permission") {
		t.Fatalf("w1 hit a permission:\n%s", w1.Err.String())
	}
}
