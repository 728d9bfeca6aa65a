package natstest

import (
	"io"
	"net"
	"sync"
	"testing"
)

// Blackhole is a TCP proxy on loopback that can stop forwarding in both
// directions without closing anything: the socket stays open and nothing
// passes, as in a network partition. Bytes read while it holds wait and
// go on when it lets through again.
type Blackhole struct {
	ln   net.Listener
	to   string
	mu   sync.Mutex
	cond *sync.Cond
	held bool
}

// NewBlackhole starts a proxy to the address to, closed when the test ends.
func NewBlackhole(t testing.TB, to string) *Blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &Blackhole{ln: ln, to: to}
	b.cond = sync.NewCond(&b.mu)
	var conns []net.Conn
	var cmu sync.Mutex
	t.Cleanup(func() {
		b.Release()
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

// URL is the proxy's nats:// URL.
func (b *Blackhole) URL() string { return "nats://" + b.ln.Addr().String() }

func (b *Blackhole) pipe(from, to net.Conn) {
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

// Hold stops forwarding; Release resumes it.
func (b *Blackhole) Hold() {
	b.mu.Lock()
	b.held = true
	b.mu.Unlock()
}

func (b *Blackhole) Release() {
	b.mu.Lock()
	b.held = false
	b.cond.Broadcast()
	b.mu.Unlock()
}
