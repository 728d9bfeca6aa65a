package chaos

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// The scenarios that stop and restart servers start them here rather than
// with natstest.Start/RunCluster, which fail the test on the first server
// that is not ready: a port chosen free can be taken before the server
// binds it (a check-then-use race), and a restarted server must get back
// its own ports. Here a failed start says why (the server's own errors)
// and is retried.

// startServer starts a server with o, returning the server's errors if it
// is not ready in time. It is shut down when the test ends.
func startServer(t *testing.T, o *server.Options) (*server.Server, error) {
	t.Helper()
	s, err := server.NewServer(o)
	if err != nil {
		return nil, err
	}
	log := &errLog{}
	s.SetLogger(log, false, false)
	go s.Start()
	if !s.ReadyForConnections(20 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, fmt.Errorf("server %s not ready in 20s: %s", o.ServerName, log)
	}
	t.Cleanup(func() {
		s.Shutdown()
		s.WaitForShutdown()
	})
	return s, nil
}

// restartServer starts a server again with its old options (store, ports),
// trying a few times: the old listeners may take a moment to go.
func restartServer(t *testing.T, o *server.Options) *server.Server {
	t.Helper()
	var last error
	for range 3 {
		s, err := startServer(t, o.Clone())
		if err == nil {
			return s
		}
		last = err
		t.Logf("restart: %v; trying again", err)
	}
	t.Fatalf("restart: %v", last)
	return nil
}

// startCluster starts an n-node JetStream cluster on loopback, on fresh
// ports for each attempt, and waits for its meta leader.
func startCluster(t *testing.T, n int) *natstest.Cluster {
	t.Helper()
	return startClusterWith(t, n, nil)
}

// startClusterWith is startCluster with each server's options changed by
// set (when not nil) before it starts.
func startClusterWith(t *testing.T, n int, set func(*server.Options)) *natstest.Cluster {
	t.Helper()
	for attempt := 1; ; attempt++ {
		c, err := tryCluster(t, n, set)
		if err == nil {
			if clitest.Poll(nil, 30*time.Second, func() bool {
				return slices.ContainsFunc(c.Servers, (*server.Server).JetStreamIsLeader)
			}) {
				return c
			}
			err = fmt.Errorf("no JetStream meta leader after 30s")
		}
		for _, s := range c.Servers {
			s.Shutdown()
		}
		if attempt == 3 {
			t.Fatalf("cluster: %v", err)
		}
		t.Logf("cluster start attempt %d: %v; again on fresh ports", attempt, err)
	}
}

func tryCluster(t *testing.T, n int, set func(*server.Options)) (*natstest.Cluster, error) {
	ports := make([]int, n)
	routes := make([]string, n)
	for i := range ports {
		ports[i] = clitest.FreePort(t)
		routes[i] = fmt.Sprintf("nats-route://127.0.0.1:%d", ports[i])
	}
	c := &natstest.Cluster{}
	for i := range n {
		o := natstest.Options(t.TempDir())
		o.ServerName = fmt.Sprintf("S-%d", i+1)
		o.Cluster.Name = "chaos"
		o.Cluster.Host = "127.0.0.1"
		o.Cluster.Port = ports[i]
		o.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if set != nil {
			set(o)
		}
		s, err := startServer(t, o)
		if err != nil {
			return c, err
		}
		c.Opts = append(c.Opts, o)
		c.Servers = append(c.Servers, s)
	}
	return c, nil
}

// errLog keeps what a server warns about, to say why it did not start.
type errLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *errLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) < 20 {
		l.lines = append(l.lines, s)
	}
}

func (l *errLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return "(no errors logged)"
	}
	return strings.Join(l.lines, "; ")
}

// Noticef passes the server's notices of leader elections on to
// serverElections: the server logs one just before it publishes the
// leader-elected advisory.
func (l *errLog) Noticef(f string, v ...any) {
	if strings.Contains(f, " new stream leader ") || strings.Contains(f, " new consumer leader ") {
		serverElections.heard(time.Now(), fmt.Sprintf(f, v...))
	}
}
func (l *errLog) Debugf(string, ...any)     {}
func (l *errLog) Tracef(string, ...any)     {}
func (l *errLog) Warnf(f string, v ...any)  { l.add("warning: " + fmt.Sprintf(f, v...)) }
func (l *errLog) Errorf(f string, v ...any) { l.add("error: " + fmt.Sprintf(f, v...)) }
func (l *errLog) Fatalf(f string, v ...any) { l.add("fatal: " + fmt.Sprintf(f, v...)) }
