package interop_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
)

// The `cg elastic` commands administer a group whose members run the
// reference library, from create to delete.
func TestElasticCLIAdministersReferenceMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 60*time.Second)
	cli := func(args ...string) cliResult {
		t.Helper()
		r := e.cliRun(args...)
		if r.Code != 0 {
			t.Fatalf("cg %s: exit %d\nstdout %s\nstderr %s", strings.Join(args, " "), r.Code, r.Out, r.Err)
		}
		return r
	}
	cli("elastic", "create", streamName, groupName, fmt.Sprint(elasticN), "--filter", "orders.*:1", "--max-buffered-msgs", "10000")
	ref := e.elasticConfig()
	if ref.MaxMembers != elasticN || ref.MaxBufferedMsgs != 10000 || len(ref.PartitioningFilters) != 1 ||
		ref.PartitioningFilters[0].Filter != "orders.*" || !slices.Equal(ref.PartitioningFilters[0].PartitioningWildcards, []int{1}) {
		t.Fatalf("reference reads the CLI's group as %+v", *ref)
	}
	cli("elastic", "add", streamName, groupName, "m1", "m2")
	if got := sortedCopy(e.elasticConfig().Members); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Fatalf("reference reads members %v after elastic add", got)
	}

	rec := newRecorder()
	rec.diagnose = e.consumerState
	insts := map[string]*instance{}
	for _, m := range []string{"m1", "m2"} {
		insts[m] = refElastic(t, e.conn(), m, "ref-1", rec)
	}
	e.waitConverged(20*time.Second, "reference members of the CLI's group")
	p := newPublisher(t, e.js, keysCovering(elasticN, 18, nil))
	p.publish(120)
	rec.waitHandled(t, p, 20*time.Second)

	// ls and info show the group as the reference runs it.
	var ls []struct {
		Group   string   `json:"group"`
		Members []string `json:"members"`
	}
	if r := cli("elastic", "ls", streamName, "--json"); json.Unmarshal([]byte(r.Out), &ls) != nil || len(ls) != 1 || ls[0].Group != groupName {
		t.Fatalf("elastic ls: %s", r.Out)
	}
	var info struct {
		WorkStream string                `json:"work_stream"`
		Members    []health.MemberStatus `json:"members"`
	}
	if r := cli("elastic", "info", streamName, groupName, "--json"); json.Unmarshal([]byte(r.Out), &info) != nil || info.WorkStream != workStream() || len(info.Members) != 2 {
		t.Fatalf("elastic info: %s", r.Out)
	}
	for _, ms := range info.Members {
		if want := pcgroups.ElasticGetPartitionFilters(*e.elasticConfig(), ms.Member); !slices.Equal(ms.Filters, want) || !ms.ConsumerExists || !ms.Active {
			t.Errorf("elastic info %s: filters %v (reference %v), consumer %v, active %v", ms.Member, ms.Filters, want, ms.ConsumerExists, ms.Active)
		}
	}

	// step-down unpins the reference instance; it is pinned afresh.
	pin := pinOf(e.consumerInfo(workStream(), "m1"))
	var sd cg.StepDownResult
	if r := cli("elastic", "step-down", streamName, groupName, "m1", "--json"); json.Unmarshal([]byte(r.Out), &sd) != nil || pin == "" || sd.PrevPinID != pin {
		t.Fatalf("elastic step-down: %s (pin was %q)", r.Out, pin)
	}
	p.publish(30)
	rec.waitHandled(t, p, 20*time.Second)
	eventually(t, 10*time.Second, "m1 re-pinned", func() bool {
		now := pinOf(e.consumerInfo(workStream(), "m1"))
		return now != "" && now != pin
	})

	// drop: m2 takes everything while traffic flows.
	stop := p.paced(10 * time.Millisecond)
	cli("elastic", "drop", streamName, groupName, "m1")
	e.waitConverged(20*time.Second, "after elastic drop m1")
	stop()
	mark := p.snapshot()
	p.publish(60)
	rec.waitHandled(t, p, 20*time.Second)
	if n := rec.countWhere(func(d delivery) bool { return d.member == "m1" && d.keySeq > mark[d.key] }); n != 0 {
		t.Errorf("dropped m1 handled %d messages published after the rebalance", n)
	}

	// create-mapping (alias cm) brings m1 back on explicit partitions;
	// delete-mapping (alias dm) returns to a balanced list.
	cli("elastic", "cm", streamName, groupName, "m2:0-2", "m1:3-5")
	if ref := e.elasticConfig(); len(ref.Members) != 0 || len(ref.MemberMappings) != 2 || ref.MemberMappings[1].Member != "m1" ||
		!slices.Equal(ref.MemberMappings[1].Partitions, []int{3, 4, 5}) {
		t.Fatalf("reference reads %+v after elastic create-mapping", *ref)
	}
	e.waitConverged(20*time.Second, "after elastic create-mapping")
	p.publish(60)
	rec.waitHandled(t, p, 20*time.Second)
	cli("elastic", "dm", streamName, groupName)
	if ref := e.elasticConfig(); len(ref.MemberMappings) != 0 || !slices.Equal(sortedCopy(ref.Members), []string{"m1", "m2"}) {
		t.Fatalf("reference reads %+v after elastic delete-mapping", *ref)
	}
	e.waitConverged(20*time.Second, "after elastic delete-mapping")
	p.publish(60)
	e.waitElasticQuiet(rec, p)
	rec.check(t, p, maxElasticDup)

	// delete: the reference instances end cleanly and nothing is left.
	cli("elastic", "delete", streamName, groupName, "--force")
	for m, in := range insts {
		if err, ok := in.done(10 * time.Second); !ok || err != nil {
			t.Errorf("reference %s after elastic delete: ended %v, err %v", m, ok, err)
		}
	}
	if _, err := e.js.Stream(ctx, workStream()); err == nil {
		t.Errorf("work stream %s left after delete", workStream())
	}
	if _, err := pcgroups.GetElasticConsumerGroupConfig(ctx, e.js, streamName, groupName); err == nil {
		t.Errorf("reference still reads the deleted group")
	}
	if names, _ := pcgroups.ListElasticConsumerGroups(ctx, e.js, streamName); slices.Contains(names, groupName) {
		t.Errorf("reference still lists the deleted group: %v", names)
	}
}

// `cg elastic consume --verify` joins a group the reference made and
// counts its share.
func TestElasticCLIConsumesReferenceGroup(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 30*time.Second)
	if _, err := pcgroups.CreateElastic(ctx, e.js, streamName, groupName, elasticN, refFilters(ordersFilter(t)), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pcgroups.AddMembers(ctx, e.js, streamName, groupName, []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	// m2 runs on the reference; m1 through the CLI.
	rec := newRecorder()
	refElastic(t, e.conn(), "m2", "ref-1", rec)
	p := newPublisher(t, e.js, keysCovering(elasticN, 18, nil))
	p.publish(150)
	owner := cgConfigOf(e.elasticConfig()).Assignment().Owner
	m1Count := 0
	for k, last := range p.snapshot() {
		if owner[partition.PartitionOfKey(k, elasticN)] == "m1" {
			m1Count += int(last)
		}
	}
	r := e.cliRun("elastic", "consume", streamName, groupName, "m1", "--count", fmt.Sprint(m1Count), "--sleep", "0s", "--verify", "--json")
	if r.Code != 0 {
		t.Fatalf("elastic consume: exit %d: %s", r.Code, r.Err)
	}
	msgs := 0
	keySeqs := map[string][]uint64{}
	var verify struct {
		Processed  uint64 `json:"processed"`
		Duplicates uint64 `json:"duplicates"`
		Violations uint64 `json:"order_violations"`
	}
	for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n") {
		var line struct {
			Type      string          `json:"type"`
			Partition int             `json:"partition"`
			Key       string          `json:"key"`
			KeySeq    uint64          `json:"key_seq"`
			Verify    json.RawMessage `json:"verify"`
		}
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			// the summary's "acked" is a count, msg's a bool: decode what we need
			var kind struct {
				Type   string          `json:"type"`
				Verify json.RawMessage `json:"verify"`
			}
			if json.Unmarshal([]byte(l), &kind) != nil {
				t.Fatalf("consume line %q: %v", l, err)
			}
			line.Type, line.Verify = kind.Type, kind.Verify
		}
		switch line.Type {
		case "msg":
			msgs++
			if owner[line.Partition] != "m1" {
				t.Errorf("CLI m1 handled partition %d (owner %s)", line.Partition, owner[line.Partition])
			}
			keySeqs[line.Key] = append(keySeqs[line.Key], line.KeySeq)
		case "summary":
			if err := json.Unmarshal(line.Verify, &verify); err != nil {
				t.Fatalf("summary %s: %v", l, err)
			}
		}
	}
	for k, seqs := range keySeqs {
		if !slices.IsSorted(seqs) || int(seqs[len(seqs)-1]) != len(seqs) {
			t.Errorf("key %s handled as %v", k, seqs)
		}
	}
	if msgs != m1Count || verify.Processed != uint64(m1Count) || verify.Duplicates != 0 || verify.Violations != 0 {
		t.Errorf("CLI consumed %d messages (want %d); verify %+v", msgs, m1Count, verify)
	}
	eventually(t, 20*time.Second, "m2's share handled by the reference", func() bool { return rec.unique() == p.count()-m1Count })
	t.Logf("COUNTS %s: published %d; CLI m1 handled %d (verify: %+v); reference m2 handled %d (%d unique)",
		t.Name(), p.count(), msgs, verify, len(rec.deliveries()), rec.unique())
}
