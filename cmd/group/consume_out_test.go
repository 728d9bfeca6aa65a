package group

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// countingWriter records each write it is given.
type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.writes++
	return c.buf.Write(p)
}

// Every line is out, whole, by the time its Write returns, however many
// goroutines write at once; lines that piled up go out together.
func TestLineWriterConcurrent(t *testing.T) {
	cw := &countingWriter{}
	lw := newLineWriter(cw)
	const writers, lines = 16, 500
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				line := strings.Repeat(string(rune('a'+w)), 10+i%7) + "\n"
				if _, err := lw.Write([]byte(line)); err != nil {
					t.Error(err)
					return
				}
				// Out already: our line is in what the writer was given.
				cw.mu.Lock()
				out := cw.buf.String()
				cw.mu.Unlock()
				if !strings.Contains(out, line) {
					t.Errorf("line %q not written when Write returned", line)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(cw.buf.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		if len(l) < 10 || strings.Count(l, l[:1]) != len(l) {
			t.Fatalf("line torn or mixed: %q", l)
		}
	}
	if cw.writes > writers*lines {
		t.Fatalf("%d writes for %d lines", cw.writes, writers*lines)
	}
}

// writeJSONLine writes what render.JSONStream writes: one compact line,
// HTML characters as they are.
func TestWriteJSONLine(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSONLine(&buf, &MsgLine{Type: "msg", Subject: "a<b>&c", Acked: true, Millis: 0.25,
		Time: time.Date(2026, 12, 3, 10, 0, 0, 250e6, time.UTC)}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"msg","member":"","partition":0,"subject":"a<b>&c","stream_seq":0,"delivered":0,"pin_id":"","processing_ms":0.25,"acked":true,"time":"2026-12-03T10:00:00.25Z"}` + "\n"
	if buf.String() != want {
		t.Fatalf("got  %s\nwant %s", buf.String(), want)
	}
}
