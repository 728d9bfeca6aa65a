package worker

import (
	"bytes"
	"io"
	"sync"
)

// Output is where the children's output goes (cg's stderr): one line at a
// time, whole, whatever number of children write at once.
type Output struct {
	mu sync.Mutex
	w  io.Writer
}

// NewOutput writes to w.
func NewOutput(w io.Writer) *Output { return &Output{w: w} }

// Prefixed is a writer for one child stream whose every line is written to
// o with prefix in front; Close writes out a last line without newline.
func (o *Output) Prefixed(prefix string) *LineWriter {
	return &LineWriter{o: o, prefix: []byte(prefix)}
}

// LineWriter prefixes each line (Output.Prefixed).
type LineWriter struct {
	o      *Output
	prefix []byte
	buf    []byte
}

func (l *LineWriter) Write(p []byte) (int, error) {
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.line(l.buf[:i+1])
		l.buf = l.buf[i+1:]
	}
	// A very long line is written in pieces rather than held without
	// bound.
	if len(l.buf) >= 64<<10 {
		l.line(append(l.buf, '\n'))
		l.buf = nil
	}
	return len(p), nil
}

// Close writes out what is left of a last line that had no newline.
func (l *LineWriter) Close() error {
	if len(l.buf) > 0 {
		l.line(append(l.buf, '\n'))
		l.buf = nil
	}
	return nil
}

func (l *LineWriter) line(b []byte) {
	l.o.mu.Lock()
	defer l.o.mu.Unlock()
	_, _ = l.o.w.Write(append(append([]byte{}, l.prefix...), b...))
}
