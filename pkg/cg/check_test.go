package cg

import (
	"context"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestSeverityWorse(t *testing.T) {
	order := []health.Severity{health.SeverityOK, health.SeverityWarning, health.SeverityUnknown, health.SeverityCritical}
	for i, a := range order {
		for j, b := range order {
			want := a
			if j > i {
				want = b
			}
			if got := a.Worse(b); got != want {
				t.Errorf("%s.Worse(%s) = %s, want %s", a, b, got, want)
			}
		}
	}
	var rep health.CheckReport
	if rep.Status() != health.SeverityOK {
		t.Fatalf("empty report: %s", rep.Status())
	}
	rep.Findings = []health.Finding{{Severity: health.SeverityWarning}, {Severity: health.SeverityCritical}, {Severity: health.SeverityWarning}}
	if rep.Status() != health.SeverityCritical || rep.Count(health.SeverityWarning) != 2 {
		t.Fatalf("status %s, warnings %d", rep.Status(), rep.Count(health.SeverityWarning))
	}
}

// An old server cannot be embedded, so the version rules are tested here.
func TestVersionFinding(t *testing.T) {
	for _, tc := range []struct {
		v            Version
		wholeSubject bool
		bad          bool
	}{
		{Version{2, 10, 22}, false, true},
		{Version{2, 11, 0}, false, false},
		{Version{2, 11, 4}, true, true},
		{Version{2, 12, 0}, true, false},
		{Version{3, 0, 0}, true, false},
	} {
		f, bad := versionFinding(tc.v, tc.wholeSubject)
		if bad != tc.bad || (bad && (f.Code != health.CodeServerTooOld || f.Severity != health.SeverityCritical)) {
			t.Errorf("%s whole=%v: %+v bad=%v", tc.v, tc.wholeSubject, f, bad)
		}
	}
}

func TestTransformedPattern(t *testing.T) {
	for dest, want := range map[string]string{
		"{{partition(10,1)}}.orders.{{wildcard(1)}}":                   "orders.*",
		"{{ Partition(3, 2, 1) }}.a.{{ Wildcard(2) }}.{{wildcard(1)}}": "a.*.*",
		"{{partition(4)}}.>":                    ">",
		"{{partition(4)}}":                      ">",
		"{{partition(4,1)}}.x.{{split(1,-)}}.y": "x.>",
	} {
		if got := transformedPattern(dest); got != want {
			t.Errorf("transformedPattern(%q) = %q, want %q", dest, got, want)
		}
	}
}

func TestSubjectsIntersect(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"orders.*", "orders.*", true},
		{">", "orders.*", true},
		{"orders.>", "orders.*", true},
		{"orders.eu.*", "orders.*", false},
		{"orders.eu", "orders.*", true},
		{"payments.*", "orders.*", false},
		{"orders.>", "orders", false},
		{"*.eu", "orders.*", true},
	} {
		if got := subjectsIntersect(tc.a, tc.b); got != tc.want {
			t.Errorf("subjectsIntersect(%q, %q) = %v", tc.a, tc.b, got)
		}
		if got := subjectsIntersect(tc.b, tc.a); got != tc.want {
			t.Errorf("subjectsIntersect(%q, %q) = %v (reversed)", tc.b, tc.a, got)
		}
	}
}

// A consumer with the right filters but no pinning is drift too, and the
// scope is validated before anything is read.
func TestCheckPriorityDriftAndScope(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "O", Subjects: []string{"o.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{Source: "o.*", Destination: "{{partition(2,1)}}.o.{{wildcard(1)}}"}}); err != nil {
		t.Fatal(err)
	}
	c := New(js)
	if _, err := c.CreateStatic(ctx, "O", "g", StaticConfig{MaxMembers: 2, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateConsumer(ctx, "O", jetstream.ConsumerConfig{Durable: "g-m1", FilterSubjects: []string{"0.>", "1.>"}, AckPolicy: jetstream.AckExplicitPolicy}); err != nil {
		t.Fatal(err)
	}
	rep, err := c.Check(ctx, CheckScope{Stream: "O", Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	codes := map[string]bool{}
	for _, f := range rep.Findings {
		codes[f.Code] = true
	}
	if !codes[health.CodeConsumerPriorityDrift] || codes[health.CodeConsumerFilterDrift] || !codes[health.CodeMemberNoInstance] || rep.Status() != health.SeverityCritical {
		t.Fatalf("findings: %+v", rep.Findings)
	}
	for _, scope := range []CheckScope{{Group: "g"}, {Stream: "a.b"}, {Stream: "O", Group: "*"}, {Kind: "dynamic"}} {
		if _, err := c.Check(ctx, scope); err == nil {
			t.Errorf("scope %+v: no error", scope)
		}
	}
}
