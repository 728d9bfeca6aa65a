package cg_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// dynamicGone is the check's dynamic-member-gone finding for member, if
// any.
func (f *dynFixture) dynamicGone(member string) (health.Finding, bool) {
	f.t.Helper()
	rep, err := f.c.Check(ctxT(f.t), cg.CheckScope{Stream: "ORDERS", Group: "g"})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, fd := range rep.Findings {
		if fd.Code == cg.CodeDynamicMemberGone {
			if fd.Member != member {
				f.t.Fatalf("dynamic-member-gone for %s, want only %s: %+v", fd.Member, member, fd)
			}
			return fd, true
		}
	}
	return health.Finding{}, false
}

// A dynamic member killed with nobody left to reap it stays in the group:
// check says so once its session timeout has passed (and not before),
// naming its partitions and the fix; an operator's member that never ran
// gets no such finding. A dynamic instance started then drops it, and the
// finding goes.
func TestCheckDynamicMemberGone(t *testing.T) {
	forLayouts(t, func(t *testing.T, layout cg.Layout) {
		f := dynSetup(t, 4, layout)
		const timeout = 2 * time.Second
		if _, err := f.c.AddMembers(ctxT(t), "ORDERS", "g", []string{"op"}, cg.Minimal()); err != nil {
			t.Fatal(err)
		}
		victim := f.mustJoin("a", "a", timeout)
		f.waitMembers("a joined", "a", "op")
		if fd, ok := f.dynamicGone("a"); ok {
			t.Fatalf("a running, yet: %+v", fd)
		}
		cfg, err := f.c.ElasticConfig(ctxT(t), "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		parts := cfg.Assignment().MemberPartitions("a")
		killed := time.Now()
		f.kill(victim)

		var fd health.Finding
		natstest.Eventually(t, 30*time.Second, "check reporting a gone", func() bool {
			var ok bool
			fd, ok = f.dynamicGone("a")
			return ok
		})
		took := time.Since(killed)
		// Its last write came at most a refresh (a starved one: about 1s)
		// before the kill, and check waits its timeout and a second more.
		if took < timeout {
			t.Fatalf("reported %v after the kill, before a's session timeout %v", took, timeout)
		}
		if fd.Severity != health.SeverityWarning || !slices.Equal(fd.Partitions, parts) || fd.Remedy == nil ||
			fd.Remedy.Code != cg.RemedyStartDynamicOrDrop || fd.Remedy.Member != "a" {
			t.Fatalf("finding %+v (remedy %+v), want a warning on a's partitions %v with the start-dynamic-or-drop remedy", fd, fd.Remedy, parts)
		}
		for _, w := range []string{"dynamic member a was last seen", "session timeout of 2s", "no dynamic instance of the group is running to drop it"} {
			if !strings.Contains(fd.Message, w) {
				t.Fatalf("message %q does not say %q", fd.Message, w)
			}
		}
		t.Logf("kill -> check reports it %v: %s; %s", took.Round(time.Millisecond), fd.Message, fd.Hint)

		// A liveness record of the operator's member op, fresh, as a
		// --dynamic instance of it writes: check names op as running yet
		// not dropping a (here it is not running at all, so it never
		// will; in life its user may lack the write of the configuration).
		kv, err := f.js.KeyValue(ctxT(t), cg.DynamicBucket)
		if err != nil {
			t.Fatal(err)
		}
		fake := "ORDERS.g.op.feedfacefeedface"
		if _, err := kv.Put(ctxT(t), fake, []byte(`{"member":"op","instance":"feedfacefeedface","session_timeout":"10s","refresh":"500ms","beat":1}`)); err != nil {
			t.Fatal(err)
		}
		if fd, ok := f.dynamicGone("a"); !ok || !strings.Contains(fd.Message, "dynamic instances of op run but none has dropped it") {
			t.Fatalf("with op's fresh record, check says %q (found %v), want op named as running", fd.Message, ok)
		}
		if err := kv.Delete(ctxT(t), fake); err != nil {
			t.Fatal(err)
		}

		// The remedy: any dynamic instance drops it.
		f.mustJoin("b", "b", timeout)
		f.waitMembers("a reaped by b", "b", "op")
		if fd, ok := f.dynamicGone("a"); ok {
			t.Fatalf("a dropped, yet: %+v", fd)
		}
	})
}
