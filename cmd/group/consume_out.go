package group

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"strconv"
	"sync"
	"time"
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
	buf  bytes.Buffer
	enc  *json.Encoder
	line []byte // a message's line, written by hand
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
	if l, ok := v.(*MsgLine); ok {
		return e.writeMsgLine(w, l)
	}
	return e.encode(w, v)
}

func (e *lineEncoder) encode(w io.Writer, v any) error {
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(e.buf.Bytes())
	return err
}

// writeMsgLine writes a message's line, the one printed for every
// message, as writeJSONLine does: by hand, byte for byte what the encoder
// writes (reflection was a tenth of the command's CPU), and through the
// encoder what it does not write plainly. l stays the caller's: a line
// made on the stack is not moved to the heap.
func writeMsgLine(w io.Writer, l *MsgLine) error {
	e := lineEncoders.Get().(*lineEncoder)
	defer lineEncoders.Put(e)
	return e.writeMsgLine(w, l)
}

func (e *lineEncoder) writeMsgLine(w io.Writer, l *MsgLine) error {
	var ok bool
	if e.line, ok = appendMsgLine(e.line[:0], l); ok {
		_, err := w.Write(e.line)
		return err
	}
	cp := *l
	return e.encode(w, &cp)
}

// appendMsgLine appends l as encoding/json writes it (HTML characters left
// as they are, a newline after) and reports true; false when a string
// needs escaping or a number or time is written in a form it leaves to
// the encoder.
func appendMsgLine(b []byte, l *MsgLine) ([]byte, bool) {
	ok := true
	str := func(name, s string) {
		b = append(b, name...)
		b = append(b, '"')
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
				ok = false
				return
			}
		}
		b = append(b, s...)
		b = append(b, '"')
	}
	str(`{"type":`, l.Type)
	str(`,"member":`, l.Member)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(l.Partition), 10)
	str(`,"subject":`, l.Subject)
	b = append(b, `,"stream_seq":`...)
	b = strconv.AppendUint(b, l.StreamSeq, 10)
	b = append(b, `,"delivered":`...)
	b = strconv.AppendUint(b, l.Delivered, 10)
	str(`,"pin_id":`, l.PinID)
	b = append(b, `,"processing_ms":`...)
	if f := math.Abs(l.Millis); f != 0 && (f < 1e-6 || f >= 1e21) || math.IsNaN(l.Millis) {
		return b, false // exponent form or no JSON at all: the encoder's
	}
	b = strconv.AppendFloat(b, l.Millis, 'f', -1, 64)
	b = append(b, `,"acked":`...)
	b = strconv.AppendBool(b, l.Acked)
	if l.AckError != "" {
		str(`,"ack_error":`, l.AckError)
	}
	if l.Failed {
		b = append(b, `,"failed":true`...)
	}
	if l.Error != "" {
		str(`,"error":`, l.Error)
	}
	if l.Key != "" {
		str(`,"key":`, l.Key)
	}
	if l.KeySeq != 0 {
		b = append(b, `,"key_seq":`...)
		b = strconv.AppendUint(b, l.KeySeq, 10)
	}
	if l.Check != "" {
		str(`,"check":`, l.Check)
	}
	if l.Batch != 0 {
		b = append(b, `,"batch":`...)
		b = strconv.AppendUint(b, l.Batch, 10)
	}
	if l.Attempt != 0 {
		b = append(b, `,"attempt":`...)
		b = strconv.AppendInt(b, int64(l.Attempt), 10)
	}
	if !l.Time.IsZero() {
		if y := l.Time.Year(); y < 0 || y > 9999 {
			return b, false // the encoder refuses it
		}
		b = append(b, `,"time":"`...)
		b = l.Time.AppendFormat(b, time.RFC3339Nano)
		b = append(b, '"')
	}
	b = append(b, "}\n"...)
	return b, ok
}

// msgText is what a message's text line says.
type msgText struct {
	who                           string // the member, colored
	line                          *MsgLine
	took                          time.Duration
	outcome, redelivered, verdict string
}

// writeMsgText writes t's line: what
//
//	fmt.Sprintf("[%s] p%-3d %s seq=%d pin=%s %s %s%s%s\n", who, partition, subject, seq,
//		shortPin(pin), took.Round(100*time.Microsecond), outcome, redelivered, verdict)
//
// writes, appended piece by piece into a pooled buffer (the formatting
// took as much as the JSON encoding did).
func writeMsgText(w io.Writer, t *msgText) error {
	e := lineEncoders.Get().(*lineEncoder)
	defer lineEncoders.Put(e)
	b := append(e.line[:0], '[')
	b = append(b, t.who...)
	b = append(b, "] p"...)
	n := len(b)
	b = strconv.AppendInt(b, int64(t.line.Partition), 10)
	for len(b)-n < 3 {
		b = append(b, ' ')
	}
	b = append(b, ' ')
	b = append(b, t.line.Subject...)
	b = append(b, " seq="...)
	b = strconv.AppendUint(b, t.line.StreamSeq, 10)
	b = append(b, " pin="...)
	b = append(b, shortPin(t.line.PinID)...)
	b = append(b, ' ')
	b = append(b, t.took.Round(100*time.Microsecond).String()...)
	b = append(b, ' ')
	b = append(b, t.outcome...)
	b = append(b, t.redelivered...)
	b = append(b, t.verdict...)
	b = append(b, '\n')
	e.line = b
	_, err := w.Write(b)
	return err
}
