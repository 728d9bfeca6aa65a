// Command mkstream creates (or confirms) a JetStream stream for the
// walkthrough scripts, so that they need cg alone and no nats CLI:
//
//	go run ./scripts/mkstream --subjects 'orders.*' \
//	  --transform-source 'orders.*' \
//	  --transform-destination '{{partition(10,1)}}.orders.{{wildcard(1)}}' ORDERS
//
// It connects to --server (default $NATS_URL, then nats://127.0.0.1:4222),
// which must be on loopback. Creating a stream that already exists with the
// same configuration succeeds; a different one is an error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"
)

func main() { os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr)) }

func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mkstream", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.StringP("server", "s", "", "NATS server URL (default $NATS_URL, then nats://127.0.0.1:4222)")
	subjects := fs.StringSlice("subjects", nil, "subjects the stream stores, comma separated (required)")
	src := fs.String("transform-source", "", "subject transform source, e.g. 'orders.*'")
	dst := fs.String("transform-destination", "", "subject transform destination, e.g. '{{partition(10,1)}}.orders.{{wildcard(1)}}'")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: mkstream [--server URL] --subjects S[,S...] [--transform-source S --transform-destination D] <stream>")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "mkstream: %v\n", err)
		return 2
	}
	usage := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "mkstream: "+format+"\n", a...)
		return 2
	}
	if fs.NArg() != 1 {
		return usage("need exactly one stream name, e.g. mkstream --subjects 'orders.*' ORDERS")
	}
	if len(*subjects) == 0 {
		return usage("--subjects is required, e.g. --subjects 'orders.*'")
	}
	if (*src == "") != (*dst == "") {
		return usage("--transform-source and --transform-destination go together")
	}
	if *server == "" {
		*server = env("NATS_URL")
	}
	if *server == "" {
		*server = nats.DefaultURL
	}
	if err := loopbackOnly(*server); err != nil {
		return usage("%v", err)
	}

	cfg := jetstream.StreamConfig{Name: fs.Arg(0), Subjects: *subjects}
	if *src != "" {
		cfg.SubjectTransform = &jetstream.SubjectTransformConfig{Source: *src, Destination: *dst}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	nc, err := nats.Connect(*server, nats.Name("cg-mkstream"), nats.Timeout(5*time.Second))
	if err != nil {
		fmt.Fprintf(stderr, "mkstream: connect to %s: %v (start a server with 'cg server')\n", *server, err)
		return 1
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		fmt.Fprintf(stderr, "mkstream: %v\n", err)
		return 1
	}
	s, err := js.CreateStream(ctx, cfg)
	if err != nil {
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			fmt.Fprintf(stderr, "mkstream: stream %s exists with another configuration; delete it first (or use another name)\n", cfg.Name)
			return 1
		}
		fmt.Fprintf(stderr, "mkstream: create stream %s: %v\n", cfg.Name, err)
		return 1
	}
	info := s.CachedInfo()
	line := fmt.Sprintf("stream %s on %s", info.Config.Name, strings.Join(info.Config.Subjects, ","))
	if t := info.Config.SubjectTransform; t != nil {
		line += fmt.Sprintf(", transform %s -> %s", t.Source, t.Destination)
	}
	fmt.Fprintln(stdout, line)
	return 0
}

// loopbackOnly refuses servers off this machine: the scripts are for
// local walkthroughs.
func loopbackOnly(servers string) error {
	for _, s := range strings.Split(servers, ",") {
		s = strings.TrimSpace(s)
		if !strings.Contains(s, "://") {
			s = "nats://" + s
		}
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("server %q is not a URL", s)
		}
		host := u.Hostname()
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return fmt.Errorf("server %q is not on loopback; these scripts only set up a local server (127.0.0.1, ::1 or localhost)", s)
		}
	}
	return nil
}
