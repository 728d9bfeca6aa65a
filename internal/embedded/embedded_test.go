package embedded

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/cmdutil"
)

func TestStartKeepsAGivenStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	e, err := Start(Options{Port: 0, StoreDir: dir})
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

func TestStartRejects(t *testing.T) {
	for _, o := range []Options{{Host: "0.0.0.0"}, {Host: "example.com"}, {Port: -1}, {Port: 70000}} {
		_, err := Start(o)
		if !cmdutil.IsUsage(err) {
			t.Errorf("%+v: err = %v, want a usage error", o, err)
		}
	}
}
