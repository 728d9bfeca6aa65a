package group_test

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/cmd"
	"github.com/cg-dev/cg/internal/clitest"
)

// Bad poison flags: one line naming the mistake, exit 2, nothing joined
// (no member consumer made), for both kinds.
func TestConsumePoisonBadInput(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1")
	e.plainStream("PLAIN", "plain.*")
	e.mustRun("elastic", "create", "PLAIN", "e", "4", "--filter", "plain.*:1")
	e.mustRun("elastic", "add", "PLAIN", "e", "m1")
	before := clitest.Inventory(t, e.js)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--max-deliver", "0"}, []string{"--max-deliver", "minimum 1"}},
		{[]string{"--max-deliver", "x"}, []string{"--max-deliver", "whole number"}},
		{[]string{"--backoff", "1s,x"}, []string{"--backoff", "delay 2", "not a duration"}},
		{[]string{"--backoff", "5"}, []string{"--backoff", "no unit"}},
		{[]string{"--backoff", "1s,,2s"}, []string{"--backoff", "delay 2 is empty"}},
		{[]string{"--backoff", "-1s"}, []string{"--backoff", "negative"}},
		{[]string{"--max-deliver", "1", "--backoff", "1s"}, []string{"--backoff", "--max-deliver 1"}},
		{[]string{"--on-poison", "drop"}, []string{"--on-poison", "dead-letter, park or stop"}},
		{[]string{"--on-poison", "dead-letter"}, []string{"--dead-letter SUBJECT"}},
		{[]string{"--dead-letter", "dlq.>"}, []string{"--dead-letter", "without wildcards"}},
		{[]string{"--dead-letter", "dlq.*.x"}, []string{"--dead-letter", "without wildcards"}},
		{[]string{"--dead-letter", "dlq..x"}, []string{"--dead-letter", "not a valid subject"}},
		{[]string{"--dead-letter", ""}, []string{"--dead-letter", "name the subject"}},
		{[]string{"--dead-letter", "$JS.x"}, []string{"--dead-letter", "server's"}},
		{[]string{"--on-poison", "stop", "--dead-letter", "dlq.x"}, []string{"--dead-letter dlq.x", "--on-poison stop"}},
		{[]string{"--fail-subject", "orders..x"}, []string{"--fail-subject", "pattern"}},
		{[]string{"--fail-subject", ""}, []string{"--fail-subject", "pattern"}},
	} {
		for _, kind := range []string{"static", "elastic"} {
			where := map[string][]string{"static": {"ORDERS", "g"}, "elastic": {"PLAIN", "e"}}[kind]
			args := append([]string{kind, "consume", where[0], where[1], "m1", "--count", "1"}, c.args...)
			r := clitest.Run(t, cmd.Run, e.env, args...)
			if r.Code != 2 {
				t.Errorf("%v: exit %d, want 2; stderr %q", c.args, r.Code, r.Err)
				continue
			}
			// One error line; cobra's usage errors add a "Run ... --help" line.
			errs := clitest.ErrorLines(r.Err)
			if len(errs) != 1 {
				t.Errorf("%v: %d error lines, want 1: %q", c.args, len(errs), r.Err)
				continue
			}
			clitest.OneLine(t, strings.Join(c.args, " "), errs[0], c.want...)
		}
	}
	if after := clitest.Inventory(t, e.js); after != before {
		t.Fatalf("a refused consume changed the server:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// plainStream makes a stream without a partition transform, for elastic groups.
func (e *env) plainStream(name, subject string) {
	e.t.Helper()
	if _, err := e.js.CreateStream(context.Background(), jetstream.StreamConfig{Name: name, Subjects: []string{subject}}); err != nil {
		e.t.Fatal(err)
	}
}
