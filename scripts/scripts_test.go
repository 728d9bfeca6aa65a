// Package scripts holds the walkthrough shell scripts; its test runs them
// against an embedded server with freshly built cg and mkstream binaries.
package scripts

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func build(t *testing.T, dir, out, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, out)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin
}

func script(t *testing.T, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "./"+name, args...)
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	return string(b), err
}

func TestScripts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds cg and runs the scripts")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	bin := t.TempDir()
	cgBin := build(t, bin, "cg", ".")
	mkBin := build(t, bin, "mkstream", "./scripts/mkstream")
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	env := []string{"NATS_URL=" + s.ClientURL(), "CG=" + cgBin, "MKSTREAM=" + mkBin, "NO_COLOR=1"}
	ctx := context.Background()

	out, err := script(t, env, "static_stream_setup.sh")
	if err != nil {
		t.Fatalf("static setup: %v\n%s", err, out)
	}
	st, err := js.Stream(ctx, "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if tr := st.CachedInfo().Config.SubjectTransform; tr == nil || tr.Destination != "{{partition(10,1)}}.orders.{{wildcard(1)}}" {
		t.Fatalf("ORDERS transform %+v", tr)
	}
	cfg, err := cg.New(js).StaticConfig(ctx, "ORDERS", "fulfillment")
	if err != nil || cfg.MaxMembers != 10 || strings.Join(cfg.Members, ",") != "m1,m2" {
		t.Fatalf("group: %+v %v", cfg, err)
	}
	if !strings.Contains(out, "m1") || !strings.Contains(out, "0-4") {
		t.Errorf("setup output lacks the group info:\n%s", out)
	}
	// Running it again changes nothing and succeeds; this time cg is found
	// on PATH, as after 'go install' (it once called itself there, without
	// end, until bash crashed).
	onPath := []string{"NATS_URL=" + s.ClientURL(), "CG=", "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "MKSTREAM=" + mkBin, "NO_COLOR=1"}
	if out, err := script(t, onPath, "static_stream_setup.sh"); err != nil || !strings.Contains(out, "0-4") {
		t.Fatalf("static setup again, cg on PATH: %v\n%s", err, out)
	}

	out, err = script(t, env, "generate_traffic.sh", "25", "0", "5")
	if err != nil {
		t.Fatalf("traffic: %v\n%s", err, out)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 25 || !strings.Contains(out, "Published:") {
		t.Fatalf("stream holds %d messages after the traffic script:\n%s", info.State.Msgs, out)
	}

	if out, err := script(t, append(env, "NATS_URL=nats://192.0.2.1:4222"), "generate_traffic.sh", "1"); err == nil || !strings.Contains(out, "not on loopback") {
		t.Fatalf("non-loopback NATS_URL: %v\n%s", err, out)
	}

	if err := exec.Command(cgBin, "help", "elastic").Run(); err != nil {
		t.Log("cg has no elastic commands: elastic_stream_setup.sh not run")
		return
	}
	s2 := natstest.RunServer(t)
	_, js2 := natstest.JetStream(t, s2)
	env2 := []string{"NATS_URL=" + s2.ClientURL(), "CG=" + cgBin, "MKSTREAM=" + mkBin, "NO_COLOR=1"}
	if out, err := script(t, env2, "elastic_stream_setup.sh"); err != nil {
		t.Fatalf("elastic setup: %v\n%s", err, out)
	}
	if _, err := js2.Stream(ctx, "ORDERS-fulfillment"); err != nil {
		t.Fatalf("no work-queue stream after elastic setup: %v", err)
	}
}
