// Package dashboard serves cg's live web view of consumer groups: the
// embedded page, a Server-Sent Events stream of group states and a
// timeline, Prometheus metrics, and controls that call the engine.
//
// Routes:
//
//	GET  /                 the page (web/index.html), /static/... its assets
//	GET  /events           text/event-stream, one JSON Event per data: line
//	GET  /metrics          Prometheus text, series cg_...
//	GET  /api/state        every group's current state (JSON), for scripts
//	POST /api/elastic/add, /api/elastic/drop, /api/mapping/create,
//	     /api/mapping/delete, /api/step-down
package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cg-dev/cg/pkg/cg"
)

//go:embed web
var webFS embed.FS

// Options configure a Server.
type Options struct {
	// Stream and Group narrow the view to one stream, or one group of it;
	// "" shows every group.
	Stream, Group string
	// ReadOnly turns the controls off: they answer 403.
	ReadOnly bool
	// Every is the time between samples (default DefaultEvery).
	Every time.Duration
	// Logf, when set, is told of failed samples and the like.
	Logf func(format string, args ...any)
	// KeepAlive is the time between SSE keep-alive comments (default 15 s).
	KeepAlive time.Duration
	// Buffer is how many events are kept for Last-Event-ID resumes
	// (default 1024).
	Buffer int
}

// DefaultEvery is the default time between samples.
const DefaultEvery = 300 * time.Millisecond

// groupKey names one group.
type groupKey struct{ kind, stream, group string }

// Server is one dashboard: it samples the groups (Run) and serves them
// (Handler).
type Server struct {
	client *cg.Client
	opts   Options
	reg    *prometheus.Registry

	mu     sync.Mutex
	nextID uint64
	ring   []Event // the last opts.Buffer events, oldest first
	subs   map[*subscriber]struct{}
	states map[groupKey]*GroupState
	conn   string // the connection's last reported state, "" while fine
	counts counters
	watch  watchState
	gone   map[groupKey]bool // removed since the last listing

	relist atomic.Bool // list the groups again at the next sample

	wake chan struct{}
}

type subscriber struct {
	ch   chan Event
	gone chan struct{} // closed when the subscriber fell behind
	once sync.Once
}

// New returns a dashboard for the groups client sees.
func New(client *cg.Client, opts Options) (*Server, error) {
	if client == nil {
		return nil, errors.New("dashboard: no client")
	}
	if opts.Group != "" && opts.Stream == "" {
		return nil, errors.New("dashboard: a group needs its stream")
	}
	if opts.Every < 0 {
		return nil, fmt.Errorf("dashboard: interval %s must be more than 0", opts.Every)
	}
	if opts.Every == 0 {
		opts.Every = DefaultEvery
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = 15 * time.Second
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 1024
	}
	if opts.Logf == nil {
		opts.Logf = func(string, ...any) {}
	}
	s := &Server{
		client: client,
		opts:   opts,
		subs:   map[*subscriber]struct{}{},
		states: map[groupKey]*GroupState{},
		gone:   map[groupKey]bool{},
		wake:   make(chan struct{}, 1),
		counts: newCounters(),
		// Ids go on from the clock, so a browser resuming with an id of
		// an earlier dashboard process gets a fresh snapshot, not
		// someone else's events.
		nextID: uint64(time.Now().UnixMicro()),
	}
	s.reg = prometheus.NewRegistry()
	s.reg.MustRegister(&collector{s: s})
	return s, nil
}

// Registry is the dashboard's private Prometheus registry (the one
// /metrics serves).
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Handler serves the page, /events, /metrics and the controls.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	web, _ := fs.Sub(webFS, "web")
	files := http.FileServerFS(web)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		http.ServeFileFS(w, r, web, "index.html")
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	mux.HandleFunc("GET /events", s.serveEvents)
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /api/state", s.serveState)
	s.controls(mux)
	return mux
}

// Emit adds an event to the timeline (an in-process producer's, such as
// the demo's "handled"): it gets the next id and reaches every subscriber.
func (s *Server) Emit(e Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.emitLocked(e)
}

// emitLocked numbers e, keeps it in the ring and fans it out. s.mu held.
func (s *Server) emitLocked(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.Member != "" && e.Color == "" {
		e.Color = MemberColor(e.Member)
	}
	s.nextID++
	e.ID = s.nextID
	s.ring = append(s.ring, e)
	if len(s.ring) > s.opts.Buffer {
		s.ring = slices.Delete(s.ring, 0, len(s.ring)-s.opts.Buffer)
	}
	for sub := range s.subs {
		select {
		case sub.ch <- e:
		default:
			// Fell behind: end its stream; the browser reconnects with
			// Last-Event-ID and resumes from the ring or a snapshot.
			sub.once.Do(func() { close(sub.gone) })
			delete(s.subs, sub)
		}
	}
}

// kick asks Run to sample now.
func (s *Server) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// States returns a copy of every group's current state, sorted by stream,
// group and kind.
func (s *Server) States() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snapshotLocked()
}

func (s *Server) snapshotLocked() []Event {
	keys := make([]groupKey, 0, len(s.states))
	for k := range s.states {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		if c := strings.Compare(a.stream, b.stream); c != 0 {
			return c
		}
		if c := strings.Compare(a.group, b.group); c != 0 {
			return c
		}
		return strings.Compare(a.kind, b.kind)
	})
	out := make([]Event, 0, len(keys)+1)
	for _, k := range keys {
		st := *s.states[k]
		out = append(out, Event{Type: TypeGroup, Time: st.SampledAt, Stream: k.stream, Group: k.group, Kind: k.kind, State: &st})
	}
	if s.conn != "" {
		out = append(out, Event{Type: TypeConnection, Time: time.Now(), State: s.conn})
	}
	return out
}

func (s *Server) serveState(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(s.States())
}

// serveEvents streams events. On connect: the events after Last-Event-ID
// when they are all still buffered, else a snapshot (one "group" event per
// group, without ids) and a "ready" carrying the id of the last event
// before it; then every event as it happens.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	sub := &subscriber{ch: make(chan Event, 256), gone: make(chan struct{})}

	last, resume := r.Header.Get("Last-Event-ID"), false
	if last == "" {
		last = r.URL.Query().Get("last_event_id")
	}
	var backlog []Event
	s.mu.Lock()
	head := s.nextID
	if n, err := strconv.ParseUint(last, 10, 64); err == nil && last != "" && n <= head {
		oldest := head + 1 // the id of the oldest event buffered
		if len(s.ring) > 0 {
			oldest = s.ring[0].ID
		}
		if n+1 >= oldest {
			resume = true
			for _, e := range s.ring {
				if e.ID > n {
					backlog = append(backlog, e)
				}
			}
		}
	}
	if !resume {
		backlog = s.snapshotLocked()
	}
	s.subs[sub] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, sub)
		s.mu.Unlock()
	}()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// Reconnect after a second when the stream breaks (browsers wait
	// about three by default).
	if _, err := fmt.Fprint(w, "retry: 1000\n\n"); err != nil {
		return
	}
	for _, e := range backlog {
		if writeEvent(w, e) != nil {
			return
		}
	}
	ready := Event{Type: TypeReady, Time: time.Now(), Resumed: resume}
	if !resume {
		ready.ID = head
	}
	if writeEvent(w, ready) != nil {
		return
	}
	fl.Flush()

	ka := time.NewTicker(s.opts.KeepAlive)
	defer ka.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-sub.gone:
			return
		case <-ka.C:
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case e := <-sub.ch:
			if writeEvent(w, e) != nil {
				return
			}
			// Drain what else is queued before one flush.
			for more := true; more; {
				select {
				case e := <-sub.ch:
					if writeEvent(w, e) != nil {
						return
					}
				default:
					more = false
				}
			}
			fl.Flush()
		}
	}
}

// writeEvent writes one SSE event: an id line when e has an id (the
// snapshot's "group" events have none, the ready after it has the id of
// the last event before it) and one data line of JSON.
func writeEvent(w http.ResponseWriter, e Event) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	var sb strings.Builder
	if e.ID > 0 || e.Type == TypeReady && !e.Resumed {
		sb.WriteString("id: ")
		sb.WriteString(strconv.FormatUint(e.ID, 10))
		sb.WriteString("\n")
	}
	sb.WriteString("data: ")
	sb.Write(b)
	sb.WriteString("\n\n")
	_, err = w.Write([]byte(sb.String()))
	return err
}

// Serve runs the dashboard on ln until ctx ends: the watch loop (Run) and
// an HTTP server with Handler. Open event streams are cut when it ends.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	runDone := make(chan error, 1)
	go func() { runDone <- s.Run(ctx) }()
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-serveDone:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer scancel()
	if srv.Shutdown(sctx) != nil {
		_ = srv.Close()
	}
	<-runDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// URL is the address to open for a listener's address: loopback when
// the dashboard listens on every interface.
func URL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
