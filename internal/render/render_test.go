package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestTableAlignsVisibleText(t *testing.T) {
	cs := NewColorScheme(true)
	var buf bytes.Buffer
	tb := NewTable(&buf, "MEMBER", "PARTITIONS", "ACTIVE")
	tb.AddRow(cs.Member("m1"), "0-4", "yes")
	tb.AddRow(cs.Member("member-two"), "5-9", "no")
	if err := tb.Render(); err != nil {
		t.Fatal(err)
	}
	got := ansiSGR.ReplaceAllString(buf.String(), "")
	want := "" +
		"MEMBER      PARTITIONS  ACTIVE\n" +
		"m1          0-4         yes\n" +
		"member-two  5-9         no\n"
	if got != want {
		t.Fatalf("table:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(buf.String(), "\x1b[") {
		t.Fatal("expected colored cells")
	}
}

func TestTableNoTrailingSpaces(t *testing.T) {
	var buf bytes.Buffer
	tb := NewTable(&buf)
	tb.AddRow("a", "long value")
	tb.AddRow("bbb")
	if err := tb.Render(); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "a    long value\nbbb\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestKeyValues(t *testing.T) {
	var buf bytes.Buffer
	kv := NewKeyValues(&buf)
	kv.Add("Stream", "orders")
	kv.Addf("Max members", "%d", 10)
	kv.Add("Members", "")
	if err := kv.Render(); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Stream:      orders\n" +
		"Max members: 10\n" +
		"Members:\n"
	if buf.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestJSON(t *testing.T) {
	var buf bytes.Buffer
	if err := JSON(&buf, map[string]any{"filter": "a.>", "n": 1}); err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"filter\": \"a.>\",\n  \"n\": 1\n}\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

func TestJSONStreamConcurrent(t *testing.T) {
	var buf bytes.Buffer
	s := NewJSONStream(&buf)
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.Encode(map[string]int{"i": i})
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 50 {
		t.Fatalf("got %d lines, want 50", len(lines))
	}
	for _, l := range lines {
		var v map[string]int
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
	}
}

func TestMemberColor(t *testing.T) {
	on := NewColorScheme(true)
	if a, b := on.Member("m1"), on.Member("m1"); a != b {
		t.Fatal("member color must be stable")
	}
	if on.Member("m1") == "m1" {
		t.Fatal("expected a colored name")
	}
	seen := map[string]bool{}
	for _, n := range []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8", "alice", "bob"} {
		seen[on.MemberColor(n)("x")] = true
	}
	if len(seen) < 3 {
		t.Fatalf("names should spread over the palette, got %d colors", len(seen))
	}
	off := NewColorScheme(false)
	if off.Member("m1") != "m1" || off.Bold("x") != "x" || off.Red("x") != "x" {
		t.Fatal("colors must be identity when disabled")
	}
}
