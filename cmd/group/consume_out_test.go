package group

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// A message's line written by hand is byte for byte what encoding/json
// writes for it (HTML characters left as they are), and a line it cannot
// write plainly goes through the encoder.
func TestMsgLineByHand(t *testing.T) {
	at := time.Date(2026, 3, 4, 5, 6, 7, 890123000, time.UTC)
	lines := []MsgLine{
		{Type: "msg", Member: "m1", Partition: 3, Subject: "orders.k1", StreamSeq: 42, Delivered: 1, PinID: "Abc123", Millis: 0.125, Acked: true, Time: at},
		{Type: "msg", Member: "m-2", Subject: "a.b.c", Millis: 0, Time: at.In(time.FixedZone("X", 3600+1800))},
		{Type: "msg", Member: "m1", Subject: "<tag>&amp", PinID: "", Millis: 1234567.891, AckError: "nats: timeout", Failed: true, Error: "worker said no"},
		{Type: "msg", Member: "m1", Subject: "k", Key: "k1", KeySeq: 7, Check: "ok", Batch: 3, Attempt: 2, Millis: 12},
		{Type: "msg", Member: "m1", Subject: `quote"d`, Millis: 1},
		{Type: "msg", Member: "m1", Subject: `back\slash`, Millis: 1},
		{Type: "msg", Member: "m1", Subject: "tab\there", Millis: 1},
		{Type: "msg", Member: "m1", Subject: "ünïcode", Millis: 1},
		{Type: "msg", Member: "m1", Subject: "line\u2028sep", Millis: 1},
		{Type: "msg", Member: "m1", Subject: "tiny", Millis: 1e-9},
		{Type: "msg", Member: "m1", Subject: "huge", Millis: 1e22},
		{Type: "msg", Member: "m1", Subject: "neg", Millis: -0.5, Partition: -1},
		{Type: "msg", Member: "m1", Subject: "max", StreamSeq: ^uint64(0), Delivered: ^uint64(0), KeySeq: ^uint64(0), Batch: ^uint64(0)},
		{},
	}
	for i, l := range lines {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(&l); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := writeJSONLine(&got, &l); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("line %d:\n got %s want %s", i, got.String(), want.String())
		}
		if _, plain := appendMsgLine(nil, &l); plain != (i < 4 || i == len(lines)-1 || i == len(lines)-2 || i == len(lines)-3) {
			t.Errorf("line %d written by hand: %v", i, plain)
		}
	}
}

// A message's text line is what the format it replaces writes.
func TestMsgTextByHand(t *testing.T) {
	for i, tc := range []msgText{
		{who: "m1", line: &MsgLine{Partition: 3, Subject: "orders.k1", StreamSeq: 42, PinID: "ABCDEFGHIJKL"}, took: 1234567 * time.Nanosecond, outcome: "acked"},
		{who: "\x1b[36mm-2\x1b[0m", line: &MsgLine{Partition: 123, Subject: "a.b", StreamSeq: 1, PinID: "short"}, took: 0, outcome: "ack failed: nats: timeout", redelivered: " (delivery 2)", verdict: " key=k#3 OUT OF ORDER"},
		{who: "m", line: &MsgLine{Partition: 12345, Subject: "", StreamSeq: ^uint64(0)}, took: 3 * time.Hour, outcome: "acked"},
		{who: "m", line: &MsgLine{Partition: -1, Subject: "ünï%d", StreamSeq: 0}, took: 49 * time.Microsecond, outcome: "acked"},
		{who: "m", line: &MsgLine{Partition: 7}, took: 150 * time.Microsecond, outcome: ""},
	} {
		want := fmt.Sprintf("[%s] p%-3d %s seq=%d pin=%s %s %s%s%s\n", tc.who, tc.line.Partition, tc.line.Subject, tc.line.StreamSeq,
			shortPin(tc.line.PinID), tc.took.Round(100*time.Microsecond), tc.outcome, tc.redelivered, tc.verdict)
		var got bytes.Buffer
		if err := writeMsgText(&got, &tc); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("line %d:\n got %q\nwant %q", i, got.String(), want)
		}
	}
}
