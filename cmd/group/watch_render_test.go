package group

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// TestRenderSnapshotLargeGroupAndEvents: a large group lists only the
// partitions worth a look, worst first in partition order, and pin events
// newest first in words.
func TestRenderSnapshotLargeGroupAndEvents(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := health.Snapshot{Seq: 3, Time: at, Kind: "static", Stream: "S", Group: "g", Pending: 7,
		Statuses: map[health.PartitionStatus]int{health.StatusOK: 254, health.StatusStalled: 1, health.StatusLagging: 1},
		Members:  []health.MemberSnapshot{{Member: "m1", Partitions: []int{0, 1, 2}, Status: health.StatusStalled, Live: true, Instances: 2, Standbys: 1, PinID: "abcdefghijkl", PinnedSince: at.Add(-time.Minute)}},
		Events: []health.PinEvent{
			{Time: at.Add(-2 * time.Second), Event: "unpinned", Member: "m1", Reason: "admin"},
			{Time: at.Add(-time.Second), Event: "pinned", Member: "m1", PinID: "abcdefghijkl"},
		}}
	for p := range 256 {
		ps := health.PartitionSnapshot{Partition: p, Owner: "m1", Status: health.StatusOK, Known: true}
		switch p {
		case 7:
			ps.Status, ps.Lag = health.StatusStalled, health.Lag{Pending: 5, OldestSeq: 1, Oldest: at.Add(-3 * time.Second), AgeSeconds: 3}
		case 200:
			ps.Status, ps.Lag = health.StatusLagging, health.Lag{Pending: 2, OldestSeq: 9, Oldest: at.Add(-time.Second), AgeSeconds: 1}
		}
		s.Partitions = append(s.Partitions, ps)
	}
	var b strings.Builder
	renderSnapshot(&b, render.NewColorScheme(false), s, time.Second)
	out := b.String()
	t.Logf("\n%s", out)
	for _, w := range []string{
		"Pending 7, oldest waiting 3s (partition 7)",
		"partitions: 254 ok, 1 lagging, 1 stalled",
		"m1 stalled 2 efghijkl for 1m0s 1 0-2 ? ? -",
		"7 m1 stalled 5 - 3s",
		"200 m1 lagging 2 - 1s",
		"(254 more partitions ok with nothing pending)",
		"Recent pin events:",
	} {
		if !strings.Contains(squash(out), w) {
			t.Errorf("output lacks %q", w)
		}
	}
	if i, j := strings.Index(out, "pinned    pin efghijkl"), strings.Index(out, "unpinned  step-down (unpin request)"); i < 0 || j < 0 || i > j {
		t.Errorf("events not newest first, in words")
	}
	if strings.Count(out, "\n") > 40 {
		t.Errorf("%d lines for a 256-partition group", strings.Count(out, "\n"))
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("colors with color off")
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing space: %q", l)
		}
	}
}

func TestFormatAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		850 * time.Millisecond:                 "850ms",
		3240 * time.Millisecond:                "3.2s",
		4*time.Minute + 12400*time.Millisecond: "4m12s",
		2*time.Hour + 5*time.Minute:            "2h5m",
	} {
		if got := FormatAge(d); got != want {
			t.Errorf("FormatAge(%v) = %q, want %q", d, got, want)
		}
	}
}

func squash(s string) string { return regexp.MustCompile(` +`).ReplaceAllString(s, " ") }

// TestWatchRedrawsOnATerminal: on a terminal each frame clears the screen
// first; colors follow the streams' decision (NO_COLOR turns them off).
func TestWatchRedrawsOnATerminal(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "s.*", Destination: "{{partition(2,1)}}.s.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := cg.New(js).CreateStatic(ctx, "S", "g", cg.StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	for _, color := range []bool{false, true} {
		ios, _, out, _ := iostreams.Test()
		ios.SetStdoutTTY(true)
		ios.SetColorEnabled(color)
		f := factory.New(ios, func(k string) string { return map[string]string{"NATS_URL": s.ClientURL()}[k] })
		defer f.Close()
		cmd := NewCmdWatch(f, cg.KindStatic)
		cmd.SetArgs([]string{"S", "g", "--count", "2", "--interval", "10ms"})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
		frames := strings.Split(out.String(), clearScreen)
		if len(frames) != 3 || frames[0] != "" || !strings.Contains(frames[2], "sample 2") {
			t.Fatalf("color %v: want 2 frames each after a clear screen, got %q", color, out.String())
		}
		if got := strings.Contains(strings.ReplaceAll(out.String(), clearScreen, ""), "\x1b["); got != color {
			t.Fatalf("color %v: ANSI colors in output: %v", color, got)
		}
	}
}
