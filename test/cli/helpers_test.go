package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

func TestMain(m *testing.M) { clitest.Main(m, cmd.Main) }

type result = clitest.Result

// run runs cg as a separate process (see clitest.Exec).
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return clitest.Exec(t, env, args...)
}

// usageHint is the line cg adds after a usage error.
var usageHint = regexp.MustCompile(`^Run 'cg( [a-z-]+)* --help' for usage\.$`)

// snapshot is everything on the server a command could create or change:
// each stream's configuration and state, each durable consumer's
// configuration, and every key of every KV bucket with its revision and
// value.
type snapshot map[string]string

func takeSnapshot(t *testing.T, js jetstream.JetStream) snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	snap := snapshot{}
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var streams []string
	lister := js.ListStreams(ctx)
	for si := range lister.Info() {
		streams = append(streams, si.Config.Name)
		st := si.State
		snap["stream "+si.Config.Name] = enc(si.Config) + fmt.Sprintf(" msgs=%d bytes=%d first=%d last=%d", st.Msgs, st.Bytes, st.FirstSeq, st.LastSeq)
	}
	if err := lister.Err(); err != nil {
		t.Fatalf("snapshot: list streams: %v", err)
	}
	sort.Strings(streams)
	for _, name := range streams {
		s, err := js.Stream(ctx, name)
		if err != nil {
			t.Fatalf("snapshot: stream %s: %v", name, err)
		}
		cl := s.ListConsumers(ctx)
		for ci := range cl.Info() {
			// KV readers (ours and cg's) list and watch through ordered
			// consumers that the server removes by inactivity: not state.
			if strings.HasPrefix(name, "KV_") && ci.Config.Durable == "" && ci.Config.AckPolicy == jetstream.AckNonePolicy {
				continue
			}
			snap["consumer "+name+" "+ci.Name] = enc(ci.Config)
		}
		if err := cl.Err(); err != nil {
			t.Fatalf("snapshot: consumers of %s: %v", name, err)
		}
		bucket, ok := strings.CutPrefix(name, "KV_")
		if !ok {
			continue
		}
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatalf("snapshot: bucket %s: %v", bucket, err)
		}
		keys, err := kv.ListKeys(ctx)
		if err != nil {
			t.Fatalf("snapshot: keys of %s: %v", bucket, err)
		}
		for k := range keys.Keys() {
			e, err := kv.Get(ctx, k)
			if err != nil {
				t.Fatalf("snapshot: %s %s: %v", bucket, k, err)
			}
			snap["kv "+bucket+" "+k] = fmt.Sprintf("rev=%d %s", e.Revision(), e.Value())
		}
	}
	return snap
}

// diff lists what differs between two snapshots.
func (a snapshot) diff(b snapshot) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "gone: "+k)
		} else if v != w {
			out = append(out, fmt.Sprintf("changed: %s\n  before %s\n  after  %s", k, v, w))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new: "+k+" "+v)
		}
	}
	sort.Strings(out)
	return out
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// rewriteInfo copies the server-to-client half of the NATS protocol from
// r to w, passing every INFO line (the first and any update) through fix
// and message payloads through untouched.
func rewriteInfo(w io.Writer, r *bufio.Reader, fix func(string) string) error {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		switch {
		case strings.HasPrefix(line, "INFO "):
			line = fix(line)
		case strings.HasPrefix(line, "MSG "), strings.HasPrefix(line, "HMSG "):
			f := strings.Fields(line)
			n, err := strconv.Atoi(f[len(f)-1])
			if err != nil {
				return err
			}
			payload := make([]byte, n+2) // and its CRLF
			if _, err := io.ReadFull(r, payload); err != nil {
				return err
			}
			line += string(payload)
		}
		if _, err := io.WriteString(w, line); err != nil {
			return err
		}
	}
}

// versionProxy forwards to the server at target, rewriting the version in
// the server's INFO lines: an old server as the client sees it, the
// only thing cg's version check looks at.
func versionProxy(t *testing.T, target, version string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  []net.Conn
		closed bool
		wg     sync.WaitGroup
	)
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			c.Close()
			return
		}
		conns = append(conns, c)
	}
	versionField := regexp.MustCompile(`"version":"[^"]*"`)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := l.Accept()
			if err != nil {
				return
			}
			track(client)
			srv, err := net.Dial("tcp", target)
			if err != nil {
				client.Close()
				continue
			}
			track(srv)
			wg.Add(2)
			go func() {
				defer wg.Done()
				defer client.Close()
				_ = rewriteInfo(client, bufio.NewReader(srv), func(line string) string {
					return versionField.ReplaceAllLiteralString(line, `"version":"`+version+`"`)
				})
			}()
			go func() {
				defer wg.Done()
				defer srv.Close()
				_, _ = io.Copy(srv, client)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "nats://" + l.Addr().String()
}
