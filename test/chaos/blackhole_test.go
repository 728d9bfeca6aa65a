package chaos

import (
	"io"
	"net"
	"sync"
	"testing"
)

// blackhole is a TCP proxy on loopback that can stop forwarding in both
// directions without closing anything: the socket stays open and nothing
// passes, as in a network partition. Bytes read while it holds wait and
// go on when it lets through again.
type blackhole struct {
	ln   net.Listener
	to   string
	mu   sync.Mutex
	cond *sync.Cond
	held bool
}

func newBlackhole(t *testing.T, to string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, to: to}
	b.cond = sync.NewCond(&b.mu)
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		b.release()
		_ = ln.Close()
		cmu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		cmu.Unlock()
	})
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", to)
			if err != nil {
				_ = in.Close()
				continue
			}
			cmu.Lock()
			conns = append(conns, in, out)
			cmu.Unlock()
			go b.pipe(in, out)
			go b.pipe(out, in)
		}
	}()
	return b
}

func (b *blackhole) url() string { return "nats://" + b.ln.Addr().String() }

func (b *blackhole) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			b.mu.Lock()
			for b.held {
				b.cond.Wait()
			}
			b.mu.Unlock()
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = to.Close()
			}
			return
		}
	}
}

// hold stops forwarding; release resumes it.
func (b *blackhole) hold() {
	b.mu.Lock()
	b.held = true
	b.mu.Unlock()
}

func (b *blackhole) release() {
	b.mu.Lock()
	b.held = false
	b.cond.Broadcast()
	b.mu.Unlock()
}
