package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestMkstream(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	env := func(k string) string {
		if k == "NATS_URL" {
			return s.ClientURL()
		}
		return ""
	}
	mk := func(args ...string) (int, string, string) {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, env, &out, &errOut)
		return code, out.String(), errOut.String()
	}
	args := []string{"--subjects", "orders.*", "--transform-source", "orders.*", "--transform-destination", "{{partition(10,1)}}.orders.{{wildcard(1)}}", "ORDERS"}
	code, out, errOut := mk(args...)
	if code != 0 || !strings.Contains(out, "stream ORDERS on orders.*, transform orders.* -> {{partition(10,1)}}") {
		t.Fatalf("create: %d %q %q", code, out, errOut)
	}
	st, err := js.Stream(context.Background(), "ORDERS")
	if err != nil {
		t.Fatal(err)
	}
	if tr := st.CachedInfo().Config.SubjectTransform; tr == nil || tr.Destination != "{{partition(10,1)}}.orders.{{wildcard(1)}}" {
		t.Fatalf("transform %+v", tr)
	}
	if code, _, errOut := mk(args...); code != 0 {
		t.Fatalf("identical re-create: %d %s", code, errOut)
	}
	if code, _, errOut := mk("--subjects", "orders.*", "ORDERS"); code != 1 || !strings.Contains(errOut, "another configuration") {
		t.Fatalf("different re-create: %d %s", code, errOut)
	}
	if code, _, errOut := mk("--subjects", "plain.*", "PLAIN"); code != 0 {
		t.Fatalf("plain stream: %d %s", code, errOut)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"ORDERS"}, "--subjects"},
		{[]string{"--subjects", "x.*"}, "one stream name"},
		{[]string{"--subjects", "x.*", "--transform-source", "x.*", "X"}, "go together"},
		{[]string{"--server", "nats://192.0.2.1:4222", "--subjects", "x.*", "X"}, "not on loopback"},
		{[]string{"--bogus"}, "unknown flag"},
	} {
		if code, _, errOut := mk(tc.args...); code != 2 || !strings.Contains(errOut, tc.says) {
			t.Errorf("%v: %d %q, want 2 and %q", tc.args, code, errOut, tc.says)
		}
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, ok := range []string{"nats://127.0.0.1:4222", "localhost:4222", "nats://[::1]:4222", "nats://u:p@127.0.0.1:1,nats://localhost:2"} {
		if err := loopbackOnly(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"nats://demo.nats.io:4222", "10.0.0.1:4222", "nats://127.0.0.1:1,nats://example.com:2"} {
		if loopbackOnly(bad) == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}
