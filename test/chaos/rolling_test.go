package chaos

import (
	"fmt"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// rollingEnv=1 runs TestRollingRestartLameDuck (about 16 s; make
// chaos-rolling runs it three times). It is not part of the suite: in about
// one run in eight the cluster serves a member nothing for ~1.9 s around
// a leadership handover, above the 1 s the scenario asserts
// (docs/reliability.md).
const rollingEnv = "CG_CHAOS_ROLLING"

// rollingIdleLimit is the most a partition may go without a message while
// the servers are restarted one by one in lame-duck mode.
const rollingIdleLimit = time.Second

// A rolling restart, the way operators upgrade a cluster: each of the three
// servers in turn enters lame-duck mode (it hands its raft leaderships to
// the others, stops JetStream, then closes its clients over the lame-duck
// duration), stops, and starts again on its store and ports; the next one
// goes once the stream has every replica current again. Members of two
// instances each (every node's URL given), keyed traffic throughout.
// Nothing may be lost or broken out of order, and no partition may go
// without a message for more than rollingIdleLimit.
func TestRollingRestartLameDuck(t *testing.T) {
	needBinary(t)
	if os.Getenv(rollingEnv) != "1" {
		t.Skip("a rolling restart of the cluster's servers: " + rollingEnv + "=1 runs it (make chaos-rolling)")
	}
	c := startClusterWith(t, 3, func(o *server.Options) {
		o.LameDuckDuration = 3 * time.Second
		o.LameDuckGracePeriod = time.Second
	})
	e := newEnv(t, "rolling-ldm", c.URLs(), envOpts{kind: "static", limit: 180 * time.Second})
	members := []string{"m1", "m2"}
	e.setupStatic(4, 3, members...)
	for _, m := range members {
		e.startJoined(m)
		e.startJoined(m)
	}
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, members...)
	e.steady(time.Now(), 20, members...)

	start := time.Now()
	for i := range c.Servers {
		name := c.Servers[i].Name()
		port := c.Servers[i].Addr().(*net.TCPAddr).Port
		d := e.disrupt("lame-duck restart of "+name, e.groupInflight(len(members)), members...)
		c.Servers[i].LameDuckShutdown()
		c.Servers[i].WaitForShutdown()
		o := c.Opts[i].Clone()
		o.Port = port
		c.Servers[i] = restartServer(t, o)
		e.waitFor(name+" back and current", 60*time.Second, func() bool {
			l, current := e.streamCluster()
			return l != "" && current == 2
		})
		e.waitHandled("members handling with "+name+" back", time.Now(), 5, 30*time.Second, members...)
		e.recovered(d)
		e.steady(d.end, 20, members...)
	}
	end := time.Now()

	idle := partitionIdle(e.msgs("", start), start, end)
	pubIdle := e.pub.longestQuiet(start, end)
	var worst time.Duration
	var parts []int
	for p := range idle {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var s string
	for _, p := range parts {
		s += fmt.Sprintf(" p%d=%v", p, idle[p].Round(time.Millisecond))
		worst = max(worst, idle[p])
	}
	e.finish(members, func() string {
		return fmt.Sprintf("idle_max%s publisher_quiet_max=%v rolling_took=%v", s, pubIdle.Round(time.Millisecond), end.Sub(start).Round(100*time.Millisecond))
	})
	for _, p := range parts {
		if idle[p] > rollingIdleLimit {
			t.Errorf("partition %d went %v without a message during the rolling restart, want at most %v (the publisher's longest quiet: %v)",
				p, idle[p], rollingIdleLimit, pubIdle)
		}
	}
}

// partitionIdle is, per partition, the longest time between two messages
// of it handled between start and end (first handlings and redeliveries
// alike: any progress counts).
func partitionIdle(msgs []*line, start, end time.Time) map[int]time.Duration {
	at := map[int][]time.Time{}
	for _, l := range msgs {
		if l.at.Before(end) {
			at[l.Partition] = append(at[l.Partition], l.at)
		}
	}
	out := map[int]time.Duration{}
	for p, ts := range at {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		prev := start
		for _, t := range append(ts, end) {
			out[p] = max(out[p], t.Sub(prev))
			prev = t
		}
	}
	return out
}

// longestQuiet is the longest time between start and end in which the
// stream acknowledged no publish.
func (p *publisher) longestQuiet(start, end time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := start
	var longest time.Duration
	for _, at := range append(slices.Clone(p.pubAt), end) {
		if at.Before(start) || at.After(end) {
			continue
		}
		longest = max(longest, at.Sub(prev))
		prev = at
	}
	return longest
}
