package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Scenario 5: the server restarts (same port, same store) twice under
// traffic; the members reconnect and carry on, nothing is lost.
func TestServerRestart(t *testing.T) {
	needBinary(t)
	dir := t.TempDir()
	port := clitest.FreePort(t)
	opts := func() *server.Options {
		o := natstest.Options(dir)
		o.Port = port
		return o
	}
	s, err := startServer(t, opts())
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, "server-restart", s.ClientURL(), envOpts{kind: "static", limit: 120 * time.Second})
	e.setupStatic(4, 1, "m1", "m2")
	e.startJoined("m1")
	e.startJoined("m1")
	e.startJoined("m2")
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1", "m2")
	e.steady(time.Now(), 20, "m1", "m2")
	for range 2 {
		d := e.disrupt("server restart", e.groupInflight(2), "m1", "m2")
		s.Shutdown()
		s.WaitForShutdown()
		s = restartServer(t, opts())
		up := time.Now()
		e.waitHandled("members handling after the restart", up, 5, 30*time.Second, "m1", "m2")
		e.recovered(d)
		e.steady(d.end, 50, "m1", "m2")
	}
	e.finish([]string{"m1", "m2"}, nil)
}

// Scenario 6: a 3-node cluster, the stream and the group's KV replicated
// three times, members given every node's URL. The node leading the stream
// is shut down, then brought back with the same options; then the same for
// the node leading m1's consumer. The members ride it all out and nothing
// is lost.
func TestClusterStreamLeaderLoss(t *testing.T) {
	needBinary(t)
	c := startCluster(t, 3)
	e := newEnv(t, "cluster-leader", c.URLs(), envOpts{kind: "static", limit: 150 * time.Second})
	e.setupStatic(4, 3, "m1", "m2")
	e.startJoined("m1")
	e.startJoined("m1")
	e.startJoined("m2")
	e.publish(4, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 20, 30*time.Second, "m1", "m2")
	e.steady(time.Now(), 20, "m1", "m2")

	// Round 1 takes down the node leading the stream; round 2 the node
	// leading m1's consumer, which holds the pin (on the partition layout,
	// the consumer of m1's first partition).
	var resumedIn time.Duration
	consumer, part := e.leadConsumer("m1")
	for round := range 2 {
		var leader string
		e.waitFor("a stream leader", 20*time.Second, func() bool {
			leader, _ = e.streamCluster()
			if round == 1 {
				leader = ""
				if ci, err := e.namedConsumerInfo(consumer); err == nil && ci.Cluster != nil {
					leader = ci.Cluster.Leader
				}
			}
			return leader != ""
		})
		i := -1
		for j, s := range c.Servers {
			if s.Name() == leader {
				i = j
			}
		}
		if i < 0 {
			t.Fatalf("leader %q is none of the cluster's servers", leader)
		}
		port := c.Servers[i].Addr().(*net.TCPAddr).Port
		what := map[int]string{0: "stream", 1: "m1's consumer " + consumer}[round]

		var el *electionWatch
		if round == 1 {
			el = e.watchElections(c.Servers[(i+1)%len(c.Servers)].ClientURL(), c.Servers[(i+2)%len(c.Servers)].ClientURL())
		}
		e.t.Logf("%s: shutting down %s, leading the %s", time.Now().Format("15:04:05.000"), leader, what)
		d := e.disrupt("shut down "+leader+", leading the "+what, e.groupInflight(2), "m1", "m2")
		c.Servers[i].Shutdown()
		c.Servers[i].WaitForShutdown()
		down := time.Now()
		e.waitFor("a new stream leader", 30*time.Second, func() bool {
			l, _ := e.streamCluster()
			return l != "" && l != leader
		})
		e.waitHandled("members handling without "+leader, down, 5, 30*time.Second, "m1", "m2")
		if el != nil {
			resumedIn = e.resumedAfterElection(el, "m1", consumer, part, d.start)
		}
		e.recovered(d)
		e.steady(d.end, 30, "m1", "m2")

		d2 := e.disrupt("restart "+leader, e.groupInflight(2), "m1", "m2")
		o := c.Opts[i].Clone()
		o.Port = port
		c.Servers[i] = restartServer(t, o)
		e.waitFor(leader+" back and current", 30*time.Second, func() bool {
			l, current := e.streamCluster()
			return l != "" && current == 2
		})
		e.waitHandled("members handling with "+leader+" back", d2.start, 5, 30*time.Second, "m1", "m2")
		e.recovered(d2)
		e.steady(d2.end, 30, "m1", "m2")
	}
	e.finish([]string{"m1", "m2"}, func() string {
		return fmt.Sprintf("resumed_after_election=%v", resumedIn.Round(time.Millisecond))
	})
	// The election is the server's; what follows it is cg's.
	if resumedIn > resumeLimit {
		t.Errorf("m1 handled its first message %v after its consumer's new leader was elected, want at most %v", resumedIn, resumeLimit)
	}
}

// resumeLimit is the most a member may take, after its consumer's new
// leader (and the stream's, when the same node led both) was elected, to
// handle a message again.
const resumeLimit = time.Second

// electionWatch records the elections of the stream's leader and its
// consumers' leaders, by when they were first known: from the servers' own
// notices (in-process, so not lost to a route being rebuilt) and from the
// leader-elected advisories heard through the servers that stay up.
type electionWatch struct {
	mu      sync.Mutex
	elected map[string]time.Time // "stream" or the consumer's name: the latest election
	seen    []string             // every election heard, for a failure
}

func (w *electionWatch) record(what string, at time.Time, how string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if at.After(w.elected[what]) {
		w.elected[what] = at
	}
	if len(w.seen) < 50 {
		w.seen = append(w.seen, fmt.Sprintf("%s %s (%s)", at.Format("15:04:05.000"), what, how))
	}
}

// heard takes a server's notice of an election (when serverElections
// is being watched).
func (w *electionWatch) heard(at time.Time, notice string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	watching := w.elected != nil
	w.mu.Unlock()
	if !watching {
		return
	}
	// "JetStream cluster new stream leader for '$G > orders'" or
	// "... new consumer leader for '$G > orders > g-m1'".
	i, j := strings.Index(notice, "'"), strings.LastIndex(notice, "'")
	if i < 0 || j <= i {
		return
	}
	parts := strings.Split(notice[i+1:j], " > ")
	switch {
	case len(parts) == 2 && strings.Contains(notice, " stream leader ") && parts[1] == streamName:
		w.record("stream", at, "server notice")
	case len(parts) == 3 && strings.HasPrefix(parts[1], streamName):
		w.record(parts[2], at, "server notice")
	}
}

// serverElections hears every in-process server's election notices
// (errLog.Noticef); watchElections starts it listening.
var serverElections = &electionWatch{}

// watchElections starts recording elections: the servers' notices, and
// the leader-elected advisories through each of urls (servers that stay
// up) until the test ends.
func (e *env) watchElections(urls ...string) *electionWatch {
	e.t.Helper()
	w := serverElections
	w.mu.Lock()
	w.elected, w.seen = map[string]time.Time{}, nil
	w.mu.Unlock()
	e.t.Cleanup(func() {
		w.mu.Lock()
		w.elected, w.seen = nil, nil
		w.mu.Unlock()
	})
	on := func(what func(consumer string) string) nats.MsgHandler {
		return func(m *nats.Msg) {
			var ev struct {
				Time     time.Time `json:"timestamp"`
				Consumer string    `json:"consumer"`
			}
			if json.Unmarshal(m.Data, &ev) == nil {
				w.record(what(ev.Consumer), ev.Time, "advisory")
			}
		}
	}
	for _, url := range urls {
		nc, err := nats.Connect(url)
		if err != nil {
			e.t.Fatalf("connect %s: %v", url, err)
		}
		e.t.Cleanup(nc.Close)
		for subj, what := range map[string]func(string) string{
			"$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + streamName:          func(string) string { return "stream" },
			"$JS.EVENT.ADVISORY.CONSUMER.LEADER_ELECTED." + streamName + ".*": func(c string) string { return c },
		} {
			if _, err := nc.Subscribe(subj, on(what)); err != nil {
				e.t.Fatal(err)
			}
		}
		if err := nc.Flush(); err != nil {
			e.t.Fatal(err)
		}
	}
	return w
}

// leadConsumer is the consumer of member whose leader round 2 of the
// cluster scenario takes down, and the partition it serves (-1: all of the
// member's, on the member layout).
func (e *env) leadConsumer(member string) (string, int) {
	if e.layout == "partition" {
		k := e.owned(member)[0]
		_, c := e.partitionConsumer(k)
		return c, k
	}
	_, c := e.memberConsumer(member)
	return c, -1
}

// namedConsumerInfo is the group's consumer named consumer.
func (e *env) namedConsumerInfo(consumer string) (*jetstream.ConsumerInfo, error) {
	s := streamName
	if e.kind == "elastic" {
		s = streamName + "-" + groupName
	}
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	cons, err := e.js.Consumer(ctx, s, consumer)
	if err != nil {
		return nil, err
	}
	return cons.CachedInfo(), nil
}

// resumedAfterElection is how long after the election that let consumer's
// messages flow again (its new leader, or the stream's when that came
// later) member handled its first message of them (of partition part, or
// of any when part is -1).
func (e *env) resumedAfterElection(w *electionWatch, member, consumer string, part int, since time.Time) time.Duration {
	e.t.Helper()
	var elected time.Time
	if !e.poll(30*time.Second, func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		elected = w.elected[consumer]
		if st := w.elected["stream"]; st.After(elected) {
			elected = st
		}
		return elected.After(since)
	}) {
		leader := "unknown"
		if ci, err := e.namedConsumerInfo(consumer); err != nil {
			leader = err.Error()
		} else if ci.Cluster != nil {
			leader = ci.Cluster.Leader
		}
		w.mu.Lock()
		seen := strings.Join(w.seen, "; ")
		w.mu.Unlock()
		e.t.Fatalf("%s: no election of %s's leader or the stream's after %s in 30s (its leader now %s; heard: %s)\n%s",
			e.name, consumer, since.Format("15:04:05.000"), leader, seen, e.dump())
	}
	// Nothing can be handled before a message is stored: the traffic
	// may have stalled too (its publish lost with the server).
	avail := elected
	e.waitFor("a publish acknowledged after the election", 30*time.Second, func() bool {
		e.pub.mu.Lock()
		defer e.pub.mu.Unlock()
		i, _ := slices.BinarySearchFunc(e.pub.pubAt, elected, func(a, b time.Time) int { return a.Compare(b) })
		if i == len(e.pub.pubAt) {
			return false
		}
		if i > 0 && elected.Sub(e.pub.pubAt[i-1]) > 100*time.Millisecond {
			avail = e.pub.pubAt[i] // the traffic was stalled: none waiting
		}
		return true
	})
	var first time.Time
	e.waitFor(member+" handling after the election", 30*time.Second, func() bool {
		for _, l := range e.msgs(member, elected) {
			if part >= 0 && l.Partition != part {
				continue
			}
			if first.IsZero() || l.at.Before(first) {
				first = l.at
			}
		}
		return !first.IsZero()
	})
	if first.Before(avail) {
		avail = elected // one was there to handle after all
	}
	e.t.Logf("%s: new leader elected %v after the shutdown, a message to handle %v after that, the first handled %v after that",
		member, elected.Sub(since).Round(time.Millisecond), avail.Sub(elected).Round(time.Millisecond), first.Sub(avail).Round(time.Millisecond))
	return first.Sub(avail)
}

// streamCluster is the stream's leader and how many followers are current.
func (e *env) streamCluster() (leader string, current int) {
	ctx, cancel := context.WithTimeout(e.ctx, 2*time.Second)
	defer cancel()
	s, err := e.js.Stream(ctx, streamName)
	if err != nil {
		return "", 0
	}
	ci := s.CachedInfo().Cluster
	if ci == nil {
		return "", 0
	}
	for _, r := range ci.Replicas {
		if r.Current && !r.Offline {
			current++
		}
	}
	return ci.Leader, current
}
