// Package memberhttp serves a member instance's health and metrics over
// HTTP, for an orchestrator's probes and a Prometheus scrape:
//
//	/healthz  200 while the instance runs (before its join, and while only
//	          its NATS connection is down and reconnecting); 503 once it
//	          stopped, or once the client gave up reconnecting
//	/readyz   200 while joined and connected, pinned or standby; 503 while
//	          joining, while the NATS connection is down, and once stopped
//	/metrics  the member's metrics (pkg/cg/plugin/cgprom) and the Go
//	          runtime's, on a registry of its own
//
// The server is an observer of the member (Observers), so it learns of
// the join, the pins and the stop from the runtime itself.
package memberhttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgprom"
)

// Server is one member instance's health and metrics endpoint.
type Server struct {
	status  func() nats.Status
	metrics *cgprom.Metrics
	reg     *prometheus.Registry
	srv     *http.Server
	ln      net.Listener
	served  chan struct{}

	mu       sync.Mutex
	joined   bool
	stopped  bool
	stopErr  error
	pinned   map[int]bool
	sawStop  chan struct{} // closed once /readyz answered after the stop
	sawClose sync.Once
}

// New makes a server over ln; status reports the member's NATS connection
// state (nats.Conn.Status). Serve it with Start.
func New(ln net.Listener, status func() nats.Status) (*Server, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	met, err := cgprom.New(reg)
	if err != nil {
		return nil, err
	}
	s := &Server{status: status, metrics: met, reg: reg, ln: ln, served: make(chan struct{}),
		pinned: map[int]bool{}, sawStop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return s, nil
}

// Start serves in the background until Close.
func (s *Server) Start() {
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(s.ln)
	}()
}

// URL is the address to reach the server at.
func (s *Server) URL() string { return URL(s.ln.Addr()) }

// URL is the http:// address of addr, with a loopback host for an
// unspecified one (what a person on the machine can open).
func URL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String()
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Observers are what the member must be given (cg.JoinOptions.Observers):
// the metrics and the server's own readiness tracking.
func (s *Server) Observers() []cg.Observer { return []cg.Observer{s.metrics, (*tracker)(s)} }

// tracker is the server's view of the member's life.
type tracker Server

func (t *tracker) OnJoin(*cg.Member) {
	t.mu.Lock()
	t.joined = true
	t.mu.Unlock()
}

func (t *tracker) OnPin(c cg.PinChange) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range c.Partitions {
		if c.Pinned {
			t.pinned[p] = true
		} else {
			delete(t.pinned, p)
		}
	}
}

func (t *tracker) OnStop(_ *cg.Member, _ cg.EventCause, err error) {
	t.mu.Lock()
	t.stopped, t.stopErr = true, err
	t.mu.Unlock()
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	stopped, err := s.stopped, s.stopErr
	s.mu.Unlock()
	if stopped {
		http.Error(w, "stopped: "+stopWords(err), http.StatusServiceUnavailable)
		return
	}
	if s.status() == nats.CLOSED {
		// The client gave up reconnecting: only a restart brings it back.
		http.Error(w, "NATS connection closed for good (reconnects exhausted)", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintln(w, "ok")
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	joined, stopped, err := s.joined, s.stopped, s.stopErr
	pinned := make([]int, 0, len(s.pinned))
	for p := range s.pinned {
		pinned = append(pinned, p)
	}
	s.mu.Unlock()
	slices.Sort(pinned)
	st := s.status()
	switch {
	case stopped:
		http.Error(w, "not ready: stopped: "+stopWords(err), http.StatusServiceUnavailable)
		s.sawClose.Do(func() { close(s.sawStop) })
	case st != nats.CONNECTED:
		http.Error(w, "not ready: NATS connection "+strings.ToLower(st.String()), http.StatusServiceUnavailable)
	case !joined:
		http.Error(w, "not ready: joining", http.StatusServiceUnavailable)
	case len(pinned) > 0:
		fmt.Fprintf(w, "ready: pinned, partitions %s\n", partition.Ranges(pinned))
	default:
		fmt.Fprintln(w, "ready: standby")
	}
}

func stopWords(err error) string {
	if err == nil {
		return "clean stop"
	}
	return err.Error()
}

// Linger keeps serving after the member stopped, so that a readiness
// probe sees the stop: it returns once /readyz answered since the stop,
// after d at most, or when ctx ends.
func (s *Server) Linger(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.sawStop:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Close stops serving.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = s.srv.Close()
	}
	<-s.served
}
