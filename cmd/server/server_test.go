package server

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/internal/embedded"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestServeJSON(t *testing.T) {
	var out, errOut clitest.SyncBuffer
	opts := &serveOptions{
		IO:       &iostreams.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut},
		JSON:     true,
		Embedded: embedded.Options{Host: "localhost", Port: 0},
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
