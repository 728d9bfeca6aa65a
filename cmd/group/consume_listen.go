package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/memberhttp"
	"github.com/cg-dev/cg/pkg/cg"
)

// ListenFlags are consume's health and metrics endpoint (--listen,
// --listen-linger; internal/memberhttp serves it).
type ListenFlags struct {
	Addr   string
	Linger time.Duration
	// addr is Addr with its host filled in (loopback when none was given).
	addr string
}

// DefaultListenLinger is how long a member stopped by an error keeps
// answering /readyz at most, so that a readiness probe sees it fail.
const DefaultListenLinger = 5 * time.Second

func (l *ListenFlags) bind(fs *pflag.FlagSet) {
	fs.StringVar(&l.Addr, "listen", "", "serve /healthz, /readyz and /metrics on this address (host:port; no host means 127.0.0.1, port 0 picks a free one; 0.0.0.0:PORT for every interface)")
	cmdutil.DurationVar(fs, &l.Linger, "listen-linger", DefaultListenLinger, "5s", "with --listen, when the instance stops on an error: keep serving (/readyz answers 503) until a readiness probe has seen it, or this long at most, before exiting")
}

// check validates --listen before anything is dialled: host:port with a
// numeric port; a missing host is loopback.
func (l *ListenFlags) check() error {
	if l.Addr == "" {
		return nil
	}
	bad := func(why string) error {
		return cmdutil.UsageErrorf("invalid argument %q for \"--listen\" flag: %s; use host:port such as 127.0.0.1:9090 (port 0 picks a free one)", l.Addr, why)
	}
	host, port, err := net.SplitHostPort(l.Addr)
	if err != nil {
		return bad("not host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return bad("the port must be a number from 0 to 65535")
	}
	if host == "" {
		host = "127.0.0.1"
	}
	l.addr = net.JoinHostPort(host, port)
	return nil
}

// listenServer is the running endpoint, nil without --listen.
type listenServer struct {
	srv    *memberhttp.Server
	linger time.Duration
}

// start listens (before the join: a taken port creates nothing) and
// serves; it prints the URL on errOut.
func (l *ListenFlags) start(c *cg.Client, errOut io.Writer, who string) (*listenServer, error) {
	if l.Addr == "" {
		return nil, nil
	}
	if l.addr == "" {
		if err := l.check(); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen on %s: %w; pick another address with --listen (127.0.0.1:0 picks a free port)", l.addr, err)
	}
	nc := c.Conn()
	srv, err := memberhttp.New(ln, func() nats.Status { return nc.Status() })
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	srv.Start()
	if host, _, _ := net.SplitHostPort(l.addr); !isLoopbackHost(host) {
		fmt.Fprintf(errOut, "[%s] warning: listening on %s: health and metrics are reachable from other machines\n", who, ln.Addr())
	}
	fmt.Fprintf(errOut, "[%s] listening: %s (/healthz /readyz /metrics)\n", who, srv.URL())
	return &listenServer{srv: srv, linger: l.Linger}, nil
}

func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// observers are what the join must be given.
func (s *listenServer) observers() []cg.Observer {
	if s == nil {
		return nil
	}
	return s.srv.Observers()
}

// stopped holds the exit after a stop on an error until a readiness probe
// saw it (or the linger passed); ctx is the command's (a signal ends it).
func (s *listenServer) stopped(ctx context.Context, stopErr error) {
	if s == nil || stopErr == nil || errors.Is(stopErr, context.Canceled) {
		return
	}
	s.srv.Linger(ctx, s.linger)
}

func (s *listenServer) close() {
	if s != nil {
		s.srv.Close()
	}
}
