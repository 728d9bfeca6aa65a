package cg

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// putRaw stores a group value as another tool would, bypassing cg's checks.
func putRaw(t *testing.T, js jetstream.JetStream, bucket, key, value string) {
	t.Helper()
	ctx := context.Background()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: bucket, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, key, []byte(value)); err != nil {
		t.Fatal(err)
	}
}

func findingsByCode(t *testing.T, c *Client, stream, group string) map[string]health.Finding {
	t.Helper()
	rep, err := c.Check(context.Background(), CheckScope{Stream: stream, Group: group})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]health.Finding{}
	for _, f := range rep.Findings {
		out[f.Code] = f
	}
	return out
}

// check's hints must lead somewhere: each case below once sent the user to
// a command that cg itself then refuses.
func TestCheckHintsThatCgFollows(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	for _, sc := range []jetstream.StreamConfig{
		{Name: "U", Subjects: []string{"u.*"}},
		{Name: "U-g", Subjects: []string{"ug.*"}}, // the user's own stream, named like the work stream
		{Name: "S", Subjects: []string{"s.*"}, SubjectTransform: &jetstream.SubjectTransformConfig{Source: "s.*", Destination: "{{partition(4,1)}}.s.{{wildcard(1)}}"}},
	} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("foreign work stream", func(t *testing.T) {
		// Deleting the group keeps U-g and create then refuses it: the hint
		// must not be "delete and recreate".
		putRaw(t, js, ElasticBucket, "U.g", `{"max_members":4,"partitioning_filters":[{"filter":"u.*","partitioning_wildcards":[1]}],"members":["m1"]}`)
		fs := findingsByCode(t, c, "U", "g")
		f, ok := fs[health.CodeWorkStreamNotOwned]
		if !ok || f.Severity != health.SeverityCritical {
			t.Fatalf("no critical %s finding: %+v", health.CodeWorkStreamNotOwned, fs)
		}
		if !strings.Contains(f.Message, "U-g") || !strings.Contains(f.Message, "not made by cg") || !strings.Contains(f.Hint, "remove the stream") {
			t.Errorf("finding: %+v", f)
		}
		for _, f := range fs {
			// The remedies whose CLI wording ends "then 'cg elastic create ...'".
			if f.Remedy != nil && (f.Remedy.Code == health.RemedyRecreateElastic || f.Remedy.Code == health.RemedyRepairWorkStreamSources) {
				t.Errorf("hint sends the user to a create cg refuses: %+v", f)
			}
		}
		if _, err := js.Stream(ctx, "U-g"); err != nil {
			t.Fatalf("check touched the user's stream: %v", err)
		}
	})

	t.Run("ceiling without work stream", func(t *testing.T) {
		putRaw(t, js, ElasticBucket, "U.huge", `{"max_members":100000,"partitioning_filters":[{"filter":"u.*","partitioning_wildcards":[1]}],"members":["m1"]}`)
		fs := findingsByCode(t, c, "U", "huge")
		if _, ok := fs[health.CodePartitionCeiling]; !ok {
			t.Errorf("no %s finding: %+v", health.CodePartitionCeiling, fs)
		}
		f, ok := fs[health.CodeWorkStreamMissing]
		if !ok {
			t.Fatalf("no %s finding: %+v", health.CodeWorkStreamMissing, fs)
		}
		if strings.Contains(f.Hint, "create U huge 100000") || !strings.Contains(f.Hint, "at most 4096") {
			t.Errorf("hint re-runs a create the ceiling refuses: %s", f.Hint)
		}
	})

	t.Run("group name with a dot", func(t *testing.T) {
		putRaw(t, js, StaticBucket, "S.x.y", `{"max_members":4,"filters":[">"],"members":["m1"]}`)
		f, ok := findingsByCode(t, c, "S", "x.y")[health.CodeMemberUnusable]
		if !ok {
			t.Fatal("no member-unusable finding")
		}
		if strings.Contains(f.Hint, "without that member name") || !strings.Contains(f.Hint, "group name") {
			t.Errorf("hint blames the member for the group's name: %s", f.Hint)
		}
	})
}

// A work stream whose caps drifted (create repairs it) is reported, and
// re-running create, as the hint says, clears the finding.
func TestCheckWorkStreamSettingsDrift(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "R", Subjects: []string{"r.*"}}); err != nil {
		t.Fatal(err)
	}
	cfg := ElasticConfig{MaxMembers: 4, PartitioningFilters: []PartitioningFilter{{Filter: "r.*", PartitioningWildcards: []int{1}}}}
	if _, err := c.CreateElastic(ctx, "R", "g", cfg); err != nil {
		t.Fatal(err)
	}
	if f, ok := findingsByCode(t, c, "R", "g")[health.CodeWorkStreamSettings]; ok {
		t.Fatalf("fresh group: %+v", f)
	}
	ws, err := js.Stream(ctx, "R-g")
	if err != nil {
		t.Fatal(err)
	}
	sc := ws.CachedInfo().Config
	sc.MaxMsgs = 5
	if _, err := js.UpdateStream(ctx, sc); err != nil {
		t.Fatal(err)
	}
	f, ok := findingsByCode(t, c, "R", "g")[health.CodeWorkStreamSettings]
	if !ok || f.Severity != health.SeverityWarning || !strings.Contains(f.Message, "max messages 5 (want unlimited)") || (f.Remedy == nil || f.Remedy.Code != health.RemedyRepairWorkStreamSettings || f.Remedy.Stream != "R" || f.Remedy.Group != "g" || f.Remedy.MaxMembers != 4) {
		t.Fatalf("drifted caps: %+v %v", f, ok)
	}
	if _, err := c.CreateElastic(ctx, "R", "g", cfg); err != nil {
		t.Fatal(err)
	}
	if f, ok := findingsByCode(t, c, "R", "g")[health.CodeWorkStreamSettings]; ok {
		t.Fatalf("after the repairing create: %+v", f)
	}
}

// info over a stream named like the work stream but not the group's
// refuses in one line instead of showing the user's messages as the
// group's backlog.
func TestElasticInfoForeignWorkStream(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx := context.Background()
	c := New(js)
	for _, sc := range []jetstream.StreamConfig{{Name: "U", Subjects: []string{"u.*"}}, {Name: "U-g", Subjects: []string{"ug.*"}}} {
		if _, err := js.CreateStream(ctx, sc); err != nil {
			t.Fatal(err)
		}
	}
	putRaw(t, js, ElasticBucket, "U.g", `{"max_members":4,"partitioning_filters":[{"filter":"u.*","partitioning_wildcards":[1]}],"members":["m1"]}`)
	_, err := c.Info(ctx, KindElastic, "U", "g")
	if !errors.Is(err, ErrNotOwned) || !strings.Contains(err.Error(), "U-g") {
		t.Fatalf("info: %v", err)
	}
}
