package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestStartEmbeddedKeepsAGivenStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	e, err := StartEmbedded(Options{Port: 0, StoreDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if e.TempStore || e.StoreDir != dir || !strings.HasPrefix(e.ClientURL(), "nats://127.0.0.1:") {
		t.Fatalf("embedded = %+v, url %s", e, e.ClientURL())
	}
	nc, err := nats.Connect(e.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	nc.Close()
	e.Shutdown()
	if _, err := os.Stat(filepath.Join(dir, "jetstream")); err != nil {
		t.Fatalf("given store must be kept: %v", err)
	}
}

func TestStartEmbeddedRejects(t *testing.T) {
	for _, o := range []Options{{Host: "0.0.0.0"}, {Host: "example.com"}, {Port: -1}, {Port: 70000}} {
		_, err := StartEmbedded(o)
		if !cmdutil.IsUsage(err) {
			t.Errorf("%+v: err = %v, want a usage error", o, err)
		}
	}
}

func TestServeJSON(t *testing.T) {
	var out, errOut clitest.SyncBuffer
	opts := &serveOptions{
		IO:       &iostreams.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		JSON:     true,
		Embedded: Options{Host: "localhost", Port: 0},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serveRun(ctx, opts) }()
	natstest.Eventually(t, 10*time.Second, "the JSON document", func() bool {
		return strings.HasSuffix(out.String(), "}\n")
	})
	var v serverView
	if err := json.Unmarshal([]byte(out.String()), &v); err != nil {
		t.Fatal(err)
	}
	if !v.TempStore || !strings.HasPrefix(v.URL, "nats://") || !strings.Contains(errOut.String(), "export NATS_URL="+v.URL) {
		t.Fatalf("view %+v, stderr %q", v, errOut.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("serveRun did not return after cancel")
	}
	if _, err := os.Stat(v.StoreDir); !os.IsNotExist(err) {
		t.Fatalf("temporary store %s left behind", v.StoreDir)
	}
}
