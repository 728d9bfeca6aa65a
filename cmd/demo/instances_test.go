package demo

import (
	"testing"
	"time"
)

func TestClockHandoffs(t *testing.T) {
	c := newClock()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	if _, ok := c.holder("m1"); ok {
		t.Fatal("holder before any message")
	}
	c.observe("m1", "m1/a", "p1", at(0))
	c.observe("m2", "m2/a", "q1", at(5)) // another member changes nothing for m1
	c.observe("m1", "m1/a", "p1", at(10))
	c.observe("m1", "m1/b", "p2", at(50))
	c.observe("m1", "m1/b", "p2", at(60))
	c.observe("m1", "m1/a", "p3", at(2060))
	if h, _ := c.holder("m1"); h != "m1/a" {
		t.Fatalf("holder %s", h)
	}
	h, ok := c.handoffAfter("m1", at(20))
	if !ok || h.From != "m1/a" || h.To != "m1/b" || h.Gap != 40*time.Millisecond {
		t.Fatalf("first handoff %+v", h)
	}
	h, ok = c.handoffAfter("m1", at(50))
	if !ok || h.From != "m1/b" || h.To != "m1/a" || h.Gap != 2*time.Second || h.FromPin != "p2" || h.ToPin != "p3" {
		t.Fatalf("second handoff %+v", h)
	}
	if _, ok := c.handoffAfter("m1", at(3000)); ok {
		t.Fatal("handoff after the last")
	}
	if _, ok := c.handoffAfter("m2", t0); ok {
		t.Fatal("m2 never handed off")
	}
	// Re-pinning the same instance is a handoff too: the pin changed.
	c.observe("m1", "m1/a", "p4", at(2100))
	if h, ok := c.handoffAfter("m1", at(2070)); !ok || h.From != "m1/a" || h.To != "m1/a" {
		t.Fatalf("re-pin %+v", h)
	}
}

func TestServedFirstsSinceMark(t *testing.T) {
	s := newServed()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	s.observe("m1", "m1/a", 3, at(0))
	s.mark(at(10))
	if _, ok := s.firstBy("m1"); ok {
		t.Fatal("a first message from before the mark")
	}
	s.observe("m1", "m1/a", 3, at(5)) // handled before the mark, seen after it
	s.observe("m2", "m2/a", 3, at(20))
	s.observe("m2", "m2/a", 4, at(30))
	s.observe("m2", "m2/a", 3, at(40))
	if f, ok := s.firstBy("m2"); !ok || !f.Equal(at(20)) {
		t.Fatalf("first by m2 %v %v", f, ok)
	}
	if f, ok := s.firstIn(4, "m2"); !ok || !f.Equal(at(30)) {
		t.Fatalf("first in 4 by m2 %v %v", f, ok)
	}
	if _, ok := s.firstIn(3, "m1"); ok {
		t.Fatal("m1 in 3 before the mark counted")
	}
	if h, ok := s.lastIn(3); !ok || h.inst != "m2/a" || !h.at.Equal(at(40)) {
		t.Fatalf("last in 3 %+v", h)
	}
	s.mark(at(50))
	if _, ok := s.firstBy("m2"); ok {
		t.Fatal("mark kept old firsts")
	}
	if _, ok := s.lastIn(3); !ok {
		t.Fatal("mark forgot the latest handler")
	}
}
