// Package embedded runs a NATS server with JetStream in process, on
// loopback only: the server of 'cg server', 'cg demo' and 'cg bench'.
package embedded

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/cg-dev/cg/internal/cmdutil"
)

const readyTimeout = 10 * time.Second

// Options configure an embedded server.
type Options struct {
	// Host must be a loopback address or "localhost"; "" is 127.0.0.1.
	// The server has no authentication, so it is never exposed.
	Host string
	// Port is the client port; 0 picks a free one.
	Port int
	// StoreDir keeps JetStream data; "" uses a temporary directory that
	// Shutdown removes.
	StoreDir string
}

// Embedded is a running in-process server.
type Embedded struct {
	Server *natsserver.Server
	// StoreDir is where JetStream keeps its data.
	StoreDir string
	// TempStore reports that StoreDir is removed by Shutdown.
	TempStore bool
}

// ClientURL is the URL clients connect to, e.g. nats://127.0.0.1:4222.
func (e *Embedded) ClientURL() string { return e.Server.ClientURL() }

// Shutdown stops the server, waits until it has stopped, and removes a
// temporary store.
func (e *Embedded) Shutdown() {
	e.Server.Shutdown()
	e.Server.WaitForShutdown()
	if e.TempStore {
		_ = os.RemoveAll(e.StoreDir)
	}
}

// Start starts a JetStream server and returns once it accepts
// clients. A port that is already taken is an error that says so.
func Start(opts Options) (*Embedded, error) {
	host := opts.Host
	if host == "" {
		host = "127.0.0.1"
	}
	if !isLoopback(host) {
		return nil, cmdutil.UsageErrorf("--host %q is not a loopback address: the server has no authentication, so it only listens on 127.0.0.1, ::1 or localhost", host)
	}
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, cmdutil.UsageErrorf("--port %d is out of range: use 0 to 65535 (0 picks a free port)", opts.Port)
	}
	port := opts.Port
	if port == 0 {
		port = natsserver.RANDOM_PORT
	}

	e := &Embedded{StoreDir: opts.StoreDir}
	if e.StoreDir == "" {
		dir, err := os.MkdirTemp("", "cg-server-")
		if err != nil {
			return nil, fmt.Errorf("temporary store: %w", err)
		}
		e.StoreDir, e.TempStore = dir, true
	} else if err := os.MkdirAll(e.StoreDir, 0o750); err != nil {
		return nil, fmt.Errorf("store directory: %w", err)
	}

	s, err := natsserver.NewServer(&natsserver.Options{
		ServerName: "cg",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   e.StoreDir,
		NoSigs:     true, // the caller's context decides when to stop
	})
	if err != nil {
		e.removeTemp()
		return nil, fmt.Errorf("cannot start NATS server: %w", err)
	}
	log := &startLogger{fatal: make(chan string, 1)}
	s.SetLoggerV2(log, false, false, false)
	e.Server = s

	go s.Start()
	ready := make(chan bool, 1)
	go func() { ready <- s.ReadyForConnections(readyTimeout) }()
	select {
	case msg := <-log.fatal:
		e.Shutdown()
		return nil, startError(host, opts.Port, msg)
	case ok := <-ready:
		if !ok {
			e.Shutdown()
			select {
			case msg := <-log.fatal:
				return nil, startError(host, opts.Port, msg)
			default:
				return nil, fmt.Errorf("cannot start NATS server on %s: not ready after %s", net.JoinHostPort(host, fmt.Sprint(opts.Port)), readyTimeout)
			}
		}
	}
	return e, nil
}

func (e *Embedded) removeTemp() {
	if e.TempStore {
		_ = os.RemoveAll(e.StoreDir)
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func startError(host string, port int, msg string) error {
	hp := net.JoinHostPort(host, fmt.Sprint(port))
	lower := strings.ToLower(msg)
	if strings.Contains(lower, "address already in use") || strings.Contains(lower, "only one usage of each socket address") {
		return fmt.Errorf("cannot start NATS server: %s is already in use; pick another with --port (0 picks a free one), or use the server already there with --server nats://%s", hp, hp)
	}
	return fmt.Errorf("cannot start NATS server on %s: %s", hp, msg)
}

// startLogger keeps the server quiet and catches the fatal error that
// nats-server logs (instead of returning) when it cannot listen or start
// JetStream.
type startLogger struct{ fatal chan string }

func (l *startLogger) Fatalf(format string, v ...any) {
	select {
	case l.fatal <- fmt.Sprintf(format, v...):
	default:
	}
}
func (l *startLogger) Noticef(string, ...any) {}
func (l *startLogger) Warnf(string, ...any)   {}
func (l *startLogger) Errorf(string, ...any)  {}
func (l *startLogger) Debugf(string, ...any)  {}
func (l *startLogger) Tracef(string, ...any)  {}
