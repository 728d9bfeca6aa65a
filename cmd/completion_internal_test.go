package cmd

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/iostreams"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

func TestCompletionPositionals(t *testing.T) {
	tests := []struct {
		use     string
		names   []string
		repeats bool
	}{
		{"info <stream> <group>", []string{"stream", "group"}, false},
		{"drop <stream> <group> <member>...", []string{"stream", "group", "member"}, true},
		{"delete-mapping <stream> <group> [member...]", []string{"stream", "group", "member"}, true},
		{"check [<stream> [<group>]]", []string{"stream", "group"}, false},
		{"mapped <stream> <group> <max-members> <member:p,p,...>...", []string{"stream", "group", "max-members", "member:p,p,"}, true},
		{"version", nil, false},
	}
	for _, tt := range tests {
		names, repeats := positionals(tt.use)
		if !slices.Equal(names, tt.names) || repeats != tt.repeats {
			t.Errorf("positionals(%q) = %q, %v; want %q, %v", tt.use, names, repeats, tt.names, tt.repeats)
		}
	}
}

// A command mounted under neither kind completes the groups of both, or
// of the kind its --kind flag names.
func TestCompletionEitherKind(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	for _, sc := range []jetstream.StreamConfig{
		{Name: "ORDERS", Subjects: []string{"orders.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}"}},
		{Name: "EVENTS", Subjects: []string{"events.*"}},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "fulfillment", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateElastic(ctx, "EVENTS", "audit", cg.ElasticConfig{MaxMembers: 4, Members: []string{"e1", "e2"},
		PartitioningFilters: []cg.PartitioningFilter{{Filter: "events.*", PartitioningWildcards: []int{1}}}}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NATS_URL": s.ClientURL()}

	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"look", ""}, []string{"EVENTS", "ORDERS"}},
		{[]string{"look", "--kind", "elastic", ""}, []string{"EVENTS"}},
		{[]string{"look", "ORDERS", ""}, []string{"fulfillment"}},
		{[]string{"look", "--kind", "elastic", "ORDERS", ""}, nil},
		{[]string{"look", "EVENTS", "audit", ""}, []string{"e1", "e2"}},
		{[]string{"look", "ORDERS", "fulfillment", ""}, []string{"m1"}},
	} {
		got := completeOn(t, env, tt.args...)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q: got %q, want %q", tt.args, got, tt.want)
		}
	}
}

// completeOn runs `cg __complete args...` on a tree with one more
// top-level command, look <stream> <group> <member> with a --kind flag,
// and returns the candidates.
func completeOn(t *testing.T, env map[string]string, args ...string) []string {
	t.Helper()
	ios, _, out, errOut := iostreams.Test()
	f := factory.New(ios, func(k string) string { return env[k] })
	defer f.Close()
	root := NewRootCmd(f)
	look := &cobra.Command{Use: "look <stream> <group> <member>", Run: func(*cobra.Command, []string) {}}
	look.Flags().String("kind", "", "static or elastic")
	root.AddCommand(look)
	addCompletion(root, f) // again: it leaves what it already did alone
	if code := execute(context.Background(), f, root, append([]string{"__complete"}, args...)); code != 0 {
		t.Fatalf("%q: exit %d, stderr %q", args, code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if last := lines[len(lines)-1]; last != ":4" {
		t.Fatalf("%q: directive %q, want :4 (stderr %q)", args, last, errOut.String())
	}
	return lines[:len(lines)-1]
}
