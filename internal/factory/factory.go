// Package factory holds what every cg command needs and builds it lazily:
// the IO streams, the environment, the connection settings bound from the
// root flags, and a NATS JetStream client that is dialled on first use, so
// --help, --version and usage errors never touch the network.
package factory

import (
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
)

// Factory is shared by all commands of one invocation.
type Factory struct {
	IOStreams *iostreams.IOStreams
	// Env looks up environment variables; tests inject their own.
	Env func(string) string
	// Conn is bound to the root's persistent connection flags.
	Conn *ConnOptions
	// JSON is the root --json flag: print machine-readable output.
	JSON bool
	// Client connects on its first call and returns the same client (or
	// the same error) on every later call. Tests may replace it.
	Client func() (*cg.Client, error)

	once   sync.Once
	client *cg.Client
	err    error

	mu     sync.Mutex
	nc     *nats.Conn
	closed bool

	refusals refusals
}

// New returns a factory for one invocation; env nil means an empty
// environment.
func New(ios *iostreams.IOStreams, env func(string) string) *Factory {
	if env == nil {
		env = func(string) string { return "" }
	}
	f := &Factory{
		IOStreams: ios,
		Env:       env,
		Conn:      &ConnOptions{Timeout: DefaultTimeout},
	}
	f.Client = f.connectOnce
	return f
}

func (f *Factory) connectOnce() (*cg.Client, error) {
	f.once.Do(func() {
		c, nc, err := f.connect()
		f.mu.Lock()
		defer f.mu.Unlock()
		if err == nil && f.closed {
			// Close ran while we were dialling: do not leak the connection.
			nc.Close()
			c, err = nil, errClosed
		}
		f.client, f.nc, f.err = c, nc, err
	})
	return f.client, f.err
}

// Close closes the NATS connection if one was made. It is safe to call
// more than once, and before or without any connection.
func (f *Factory) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	if f.nc != nil {
		f.nc.Close()
		f.nc = nil
	}
}

// Refused is the server's wording of the last permission violation it
// reported on the connection ("Permissions Violation for Publish to
// ..."), or "" if none. A command whose request was refused sees only a
// timeout; this says why.
func (f *Factory) Refused() string {
	return f.refusals.lastRefusal()
}

// RefusedC is closed as soon as the server reports a permission violation
// on the connection: a command waiting on a refused request stops at once
// instead of waiting out its timeout.
func (f *Factory) RefusedC() <-chan struct{} {
	return f.refusals.refused()
}
