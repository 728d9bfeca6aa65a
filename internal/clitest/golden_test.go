package clitest

import "testing"

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc", "a\nx\nc")
	want := "  a\n- \"b\"\n+ \"x\"\n  c\n"
	if got != want {
		t.Fatalf("Diff:\n%s\nwant:\n%s", got, want)
	}
	if n := Normalize("port 4222 at 12:00:01", Replace(`\d\d:\d\d:\d\d`, "HH:MM:SS"), Replace(`port \d+`, "port PORT")); n != "port PORT at HH:MM:SS" {
		t.Fatalf("Normalize: %q", n)
	}
}
