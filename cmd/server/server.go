// Package server is `cg server`: a throwaway NATS server with JetStream on
// loopback (internal/embedded), for trying cg without installing anything.
package server

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/embedded"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
)

// DefaultPort is the standard NATS client port.
const DefaultPort = 4222

type serveOptions struct {
	IO       *iostreams.IOStreams
	JSON     bool
	Embedded embedded.Options
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
	e, err := embedded.Start(opts.Embedded)
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
