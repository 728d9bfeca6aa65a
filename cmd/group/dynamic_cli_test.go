package group_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
)

// joinDynamic runs a --dynamic instance of member in this process.
func (e *env) joinDynamic(member string) *cg.Member {
	e.t.Helper()
	m, err := cg.New(e.js).JoinElastic(context.Background(), "ORDERS", "g", member, func(_ context.Context, msg *cg.Msg) { _ = msg.Ack() },
		cg.JoinOptions{Dynamic: true, SessionTimeout: cg.MinSessionTimeout})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(m.Stop)
	return m
}

// TestWatchShowsDynamicMembers: watch shows which members added
// themselves and when each was last seen, in info's words: a joined by
// itself; b is an operator's member running a --dynamic instance; c is an
// operator's member with nothing running, which neither shows.
func TestWatchShowsDynamicMembers(t *testing.T) {
	e := newEnv(t, 2)
	e.mustRun("elastic", "create", "ORDERS", "g", "4", "--filter", "*.orders.*:2")
	e.mustRun("elastic", "add", "ORDERS", "g", "b", "c")
	e.joinDynamic("a")
	e.joinDynamic("b")

	line := regexp.MustCompile(`Dynamic: +a seen [0-9.]+m?s ago, b \(operator's\) seen [0-9.]+m?s ago\n`)
	text := e.mustRun("elastic", "watch", "ORDERS", "g", "--count", "1").Out
	if !line.MatchString(text) {
		t.Fatalf("watch shows no Dynamic line naming a (dynamic) and b (operator's), each last seen:\n%s", text)
	}
	if info := e.mustRun("elastic", "info", "ORDERS", "g").Out; !line.MatchString(info) {
		t.Fatalf("info words dynamic membership differently from watch:\n%s", info)
	}

	out := e.mustRun("elastic", "watch", "ORDERS", "g", "--json", "--count", "1").Out
	var snap struct {
		Time    time.Time `json:"time"`
		Members []struct {
			Member   string     `json:"member"`
			Dynamic  *bool      `json:"dynamic"`
			LastSeen *time.Time `json:"last_seen"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(out), &snap); err != nil {
		t.Fatalf("watch --json: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, m := range snap.Members {
		s := "dynamic=" + map[bool]string{true: "true", false: "absent"}[m.Dynamic != nil]
		if m.Dynamic != nil && !*m.Dynamic {
			s = "dynamic=false"
		}
		switch {
		case m.LastSeen == nil:
			s += " last_seen=absent"
		case m.LastSeen.After(snap.Time.Add(time.Second)) || snap.Time.Sub(*m.LastSeen) > 10*time.Second:
			t.Fatalf("member %s last seen %s, sampled %s: not a recent liveness write", m.Member, m.LastSeen, snap.Time)
		default:
			s += " last_seen=recent"
		}
		got[m.Member] = s
	}
	want := map[string]string{"a": "dynamic=true last_seen=recent", "b": "dynamic=absent last_seen=recent", "c": "dynamic=absent last_seen=absent"}
	for m, w := range want {
		if got[m] != w {
			t.Errorf("watch --json member %s: %s, want %s\n%s", m, got[m], w, out)
		}
	}
}
