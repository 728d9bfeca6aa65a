package group

import (
	"bytes"
	"encoding/json"
	"io"
	"sync"
)

// lineWriter is consume's standard output. A concurrent member finishes
// many handler calls at once, each printing a line; one write (a system
// call on a pipe or a file) per line, each waiting for the one before,
// had the calls queue on the output. Here a line is appended to a shared
// buffer and the call then writes out everything pending, its own line
// and any that piled up while it waited its turn, as one write; a call
// whose line another already wrote has nothing to do. Nothing is held
// back: a line is out when Write returns, so a killed process loses no
// more output than before.
type lineWriter struct {
	w io.Writer

	mu      sync.Mutex // guards pending and spare
	pending []byte
	spare   []byte

	writing sync.Mutex // one write to w at a time
}

func newLineWriter(w io.Writer) *lineWriter { return &lineWriter{w: w} }

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.pending = append(l.pending, p...)
	l.mu.Unlock()

	l.writing.Lock()
	defer l.writing.Unlock()
	l.mu.Lock()
	out := l.pending
	l.pending, l.spare = l.spare[:0], nil
	l.mu.Unlock()
	var err error
	if len(out) > 0 {
		_, err = l.w.Write(out)
	}
	l.mu.Lock()
	if l.spare == nil && cap(out) <= 1<<20 {
		l.spare = out[:0]
	}
	l.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// lineEncoder encodes one JSON line the way render.JSONStream does (HTML
// characters left as they are), into a buffer of its own, so that handler
// calls encode at once rather than one after another under the stream's
// lock.
type lineEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var lineEncoders = sync.Pool{New: func() any {
	e := &lineEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// writeJSONLine writes v to w as one line of newline-delimited JSON.
func writeJSONLine(w io.Writer, v any) error {
	e := lineEncoders.Get().(*lineEncoder)
	defer lineEncoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(e.buf.Bytes())
	return err
}
