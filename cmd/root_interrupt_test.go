package cmd

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// A command stopped by SIGINT/SIGTERM (its context cancelled) says it was
// interrupted, in one line, instead of the raw "context canceled", and
// exits non-zero: it did not finish.
func TestInterruptedCommandSaysSo(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "s.*", Destination: "{{partition(2,1)}}.s.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).CreateStatic(ctx, "S", "g", cg.StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"static", "info", "S", "g"}, {"static", "ls", "S"}} {
		cctx, cancel := context.WithCancel(ctx)
		cancel() // the signal came before the command could finish
		ios, _, _, errOut := iostreams.Test()
		code := Run(cctx, append(args, "--server", s.ClientURL()), ios, func(string) string { return "" })
		msg := errOut.String()
		if code == 0 || strings.Contains(msg, "context canceled") || !strings.Contains(msg, "interrupted") || strings.Count(msg, "\n") != 1 {
			t.Errorf("%v: code %d, stderr %q", args, code, msg)
		}
	}
}
