// Package server is `cg server`: a throwaway NATS server with JetStream on
// loopback, for trying cg without installing anything. StartEmbedded is
// exported so other commands (a demo) can run the same server in process.
package server

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
)

// DefaultPort is the standard NATS client port.
const DefaultPort = 4222

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

// StartEmbedded starts a JetStream server and returns once it accepts
// clients. A port that is already taken is an error that says so.
func StartEmbedded(opts Options) (*Embedded, error) {
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

type serveOptions struct {
	IO       *iostreams.IOStreams
	JSON     bool
	Embedded Options
}

// serverView is the --json document, printed once the server is ready.
type serverView struct {
	URL       string `json:"url"`
	StoreDir  string `json:"store_dir"`
	TempStore bool   `json:"temporary_store"`
}

// NewCmd returns `cg server`.
func NewCmd(f *factory.Factory) *cobra.Command {
	return newCmdServer(f)
}

func newCmdServer(f *factory.Factory) *cobra.Command {
	opts := &serveOptions{IO: f.IOStreams}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run a local NATS server with JetStream until interrupted",
		Long: `Run a NATS server with JetStream on this machine, for trying cg.

It listens on loopback only, has no authentication, and keeps its data in a
temporary directory removed on exit unless --store-dir is given. It runs until
interrupted (Ctrl-C or SIGTERM).`,
		Example: `  cg server
  cg server --port 4223 --store-dir ./nats-data
  export NATS_URL=nats://127.0.0.1:4222   # in another shell`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			opts.JSON = f.JSON
			return serveRun(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Embedded.Host, "host", "127.0.0.1", "loopback address to listen on")
	cmd.Flags().IntVarP(&opts.Embedded.Port, "port", "p", DefaultPort, "client port (0 picks a free one)")
	cmd.Flags().StringVar(&opts.Embedded.StoreDir, "store-dir", "", "keep JetStream data here (default: a temporary directory removed on exit)")
	return cmd
}

func serveRun(ctx context.Context, opts *serveOptions) error {
	e, err := StartEmbedded(opts.Embedded)
	if err != nil {
		return err
	}
	defer e.Shutdown()

	url := e.ClientURL()
	store := e.StoreDir
	if e.TempStore {
		store += ", removed on exit"
	}
	fmt.Fprintf(opts.IO.ErrOut, "NATS with JetStream at %s (store %s); in another shell: export NATS_URL=%s; Ctrl-C stops it\n", url, store, url)
	if opts.JSON {
		if err := render.JSON(opts.IO.Out, serverView{URL: url, StoreDir: e.StoreDir, TempStore: e.TempStore}); err != nil {
			return err
		}
	}

	// Being stopped is how this command ends: exit 0.
	<-ctx.Done()
	return nil
}
