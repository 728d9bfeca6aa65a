package interop_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/internal/clitest"
	"github.com/cg-dev/cg/pkg/cg"
)

const elasticN = 6

// How many duplicates a run with one add and one drop may show: each
// handoff can redeliver the message in hand of each member losing
// partitions (the reference says so in processMembershipChange).
const maxElasticDup = 12

func ordersFilter(t *testing.T) []cg.PartitioningFilter {
	pf, err := cg.ParsePartitioningFilter("orders.*:1")
	if err != nil {
		t.Fatal(err)
	}
	return []cg.PartitioningFilter{pf}
}

func workStream() string { return cg.WorkStreamName(streamName, groupName) }

// elasticConfig reads the group through the reference: what its members see.
func (e *env) elasticConfig() *pcgroups.ElasticConsumerGroupConfig {
	e.t.Helper()
	c, err := pcgroups.GetElasticConsumerGroupConfig(ctxT(e.t, 5*time.Second), e.js, streamName, groupName)
	if err != nil {
		e.t.Fatalf("reference cannot read the group: %v", err)
	}
	return c
}

// consumerState describes the work stream's consumers, for failure logs.
func (e *env) consumerState() string {
	var parts []string
	for _, n := range e.consumerNames(workStream()) {
		ci := e.consumerInfo(workStream(), n)
		if ci == nil {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s filters=%v waiting=%d ackpending=%d pending=%d pin=%q created=%s",
			n, ci.Config.FilterSubjects, ci.NumWaiting, ci.NumAckPending, ci.NumPending, pinOf(ci), ci.Created.Format("15:04:05.000")))
	}
	s, err := e.js.Stream(ctxT(e.t, 5*time.Second), workStream())
	if err == nil {
		si := s.CachedInfo()
		parts = append(parts, fmt.Sprintf("work stream msgs=%d first=%d last=%d", si.State.Msgs, si.State.FirstSeq, si.State.LastSeq))
	}
	return strings.Join(parts, "\n  ")
}

// waitConverged waits until each member of the stored config has its
// consumer on the work stream with exactly its filters: the rebalance is
// done (a work queue refuses overlapping filters, so every member that
// lost partitions has let go of them).
func (e *env) waitConverged(timeout time.Duration, what string) {
	e.t.Helper()
	var missing []string
	converged := func() bool {
		ref := e.elasticConfig()
		ok := true
		missing = nil
		cfg := cgConfigOf(ref)
		for _, m := range cfg.MemberNames() {
			// Either implementation's filters (they differ for mapped
			// groups with filters: the reference writes <p>.>).
			refWant := sortedCopy(pcgroups.ElasticGetPartitionFilters(*ref, m))
			cgWant := sortedCopy(cfg.MemberFilters(m))
			ci := e.consumerInfo(workStream(), m)
			if ci == nil || !(slices.Equal(sortedCopy(ci.Config.FilterSubjects), refWant) || slices.Equal(sortedCopy(ci.Config.FilterSubjects), cgWant)) {
				ok = false
				missing = append(missing, m)
			}
		}
		return ok
	}
	if !clitest.Poll(nil, timeout, converged) {
		e.t.Fatalf("%s: not converged after %v (members %v not consuming their partitions):\n  %s", what, timeout, missing, e.consumerState())
	}
}

func cgConfigOf(ref *pcgroups.ElasticConsumerGroupConfig) cg.ElasticConfig {
	c := cg.ElasticConfig{MaxMembers: int(ref.MaxMembers), MaxBufferedMsgs: ref.MaxBufferedMsgs, MaxBufferedBytes: ref.MaxBufferedBytes,
		Members: slices.Clone(ref.Members), MemberMappings: fromRef(ref.MemberMappings)}
	for _, pf := range ref.PartitioningFilters {
		c.PartitioningFilters = append(c.PartitioningFilters, cg.PartitioningFilter{Filter: pf.Filter, PartitioningWildcards: slices.Clone(pf.PartitioningWildcards)})
	}
	return c
}

// waitElasticQuiet waits until the work stream is empty: everything
// sourced was acknowledged, so no redelivery can still come.
func (e *env) waitElasticQuiet(rec *recorder, p *publisher) {
	e.t.Helper()
	rec.waitHandled(e.t, p, 30*time.Second)
	eventually(e.t, 15*time.Second, "work stream drained", func() bool {
		s, err := e.js.Stream(ctxT(e.t, 5*time.Second), workStream())
		return err == nil && s.CachedInfo().State.Msgs == 0
	})
}

// member starts one instance of a member with either implementation.
type starter func(t *testing.T, member, name string) *instance

// elasticRun is the shared traffic plan: traffic before, during and
// after an add and a drop, administered by cg, counted at the end.
type elasticRun struct {
	e     *env
	rec   *recorder
	start map[string]starter // member -> how its instance runs
	isCg  map[string]bool    // members whose instances run cg
	// The member added and the member dropped in the middle.
	add, drop string
}

func (r *elasticRun) run(t *testing.T) tally {
	e, rec := r.e, r.rec
	c := cg.New(e.js)
	ctx := ctxT(t, 60*time.Second)
	rec.diagnose = e.consumerState
	running := map[string]*instance{}
	members := cgConfigOf(e.elasticConfig()).MemberNames()
	for _, m := range members {
		running[m] = r.start[m](t, m, "1")
	}
	// The member to add runs from the start, as a waiting instance, when
	// its implementation lets a non-member join.
	if in := r.tryStart(t, r.add); in != nil {
		running[r.add] = in
	}
	e.waitConverged(20*time.Second, "initial members")

	p := newPublisher(t, e.js, keysCovering(elasticN, 24, nil))
	p.publish(100)
	rec.waitHandled(t, p, 20*time.Second)

	stop := p.paced(10 * time.Millisecond)
	defer stop()
	flowing := func(what string) {
		start := p.count()
		eventually(t, 20*time.Second, what, func() bool { return p.count() > start+20 })
	}
	flowing("traffic before the add")
	t0 := time.Now()
	if _, err := c.AddMembers(ctx, streamName, groupName, []string{r.add}); err != nil {
		t.Fatal(err)
	}
	if running[r.add] == nil {
		running[r.add] = r.start[r.add](t, r.add, "1")
	}
	e.waitConverged(20*time.Second, "after adding "+r.add)
	t.Logf("add %s converged in %v", r.add, time.Since(t0).Round(time.Millisecond))
	flowing("traffic between the add and the drop")
	t0 = time.Now()
	if _, err := c.DropMembers(ctx, streamName, groupName, []string{r.drop}); err != nil {
		t.Fatal(err)
	}
	e.waitConverged(20*time.Second, "after dropping "+r.drop)
	t.Logf("drop %s converged in %v", r.drop, time.Since(t0).Round(time.Millisecond))
	flowing("traffic after the drop")
	stop()

	mark := p.snapshot()
	p.publish(100)
	e.waitElasticQuiet(rec, p)
	tl := rec.check(t, p, maxElasticDup)

	// The last batch, published after both rebalances settled, went to
	// the owners of the final configuration only.
	final := cgConfigOf(e.elasticConfig())
	owner := final.Assignment().Owner
	wrong := 0
	for _, d := range rec.deliveries() {
		if d.keySeq <= mark[d.key] {
			continue
		}
		if part := partition.PartitionOfKey(d.key, elasticN); owner[part] != d.member {
			wrong++
			if wrong <= 3 {
				t.Errorf("%s#%d (partition %d of %s) handled by %s", d.key, d.keySeq, part, owner[part], d.member)
			}
		}
		if d.partition >= 0 && d.partition != partition.PartitionOfKey(d.key, elasticN) {
			t.Errorf("cg handed %s#%d as partition %d, cg's math says %d", d.key, d.keySeq, d.partition, partition.PartitionOfKey(d.key, elasticN))
		}
		if d.subject != "orders."+d.key {
			t.Errorf("handler saw subject %q for key %s", d.subject, d.key)
		}
	}
	if n := rec.countWhere(func(d delivery) bool { return d.member == r.add }); n == 0 {
		t.Errorf("added member %s handled nothing", r.add)
	}
	if n := rec.countWhere(func(d delivery) bool { return d.member == r.drop && d.keySeq > mark[d.key] }); n != 0 {
		t.Errorf("dropped member %s handled %d messages of the last batch", r.drop, n)
	}
	return tl
}

// tryStart starts the instance of a member not yet in the group, or
// returns nil when its implementation only lets members join (logged: a
// behaviour difference; the reference lets it wait for its add).
func (r *elasticRun) tryStart(t *testing.T, member string) *instance {
	if !r.isCg[member] {
		return r.start[member](t, member, "1")
	}
	m, err := cg.New(r.e.conn()).JoinElastic(ctxT(t, 10*time.Second), streamName, groupName, member, r.rec.cg(member, "cg-1"), cg.JoinOptions{})
	if errors.Is(err, cg.ErrMemberNotFound) {
		t.Logf("NOTE: cg JoinElastic refuses %s before it is a member (%v); the reference lets it wait. Starting it after the add.", member, err)
		return nil
	}
	if err != nil {
		t.Fatalf("cg JoinElastic %s before it is a member: %v", member, err)
	}
	t.Cleanup(m.Stop)
	return cgInstance("cg-1", m)
}

func (e *env) refStarter(rec *recorder) starter {
	return func(t *testing.T, member, name string) *instance {
		return refElastic(t, e.conn(), member, "ref-"+name, rec)
	}
}

func (e *env) cgStarter(rec *recorder) starter {
	return func(t *testing.T, member, name string) *instance {
		in, _ := cgElastic(t, e.conn(), member, "cg-"+name, rec)
		return in
	}
}

// 4. A group cg makes and administers, its members all running the
// reference library.
func TestElasticCgGroupReferenceMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 10*time.Second)
	c := cg.New(e.js)
	if _, err := c.CreateElastic(ctx, streamName, groupName, cg.ElasticConfig{MaxMembers: elasticN, PartitioningFilters: ordersFilter(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMembers(ctx, streamName, groupName, []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	ref := e.refStarter(rec)
	r := &elasticRun{e: e, rec: rec, add: "m3", drop: "m1",
		start: map[string]starter{"m1": ref, "m2": ref, "m3": ref}}
	r.run(t)
}

// 5. A group the reference makes is listed, inspected and administered by
// cg, and consumed by cg members.
func TestElasticReferenceGroupCgMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 20*time.Second)
	if _, err := pcgroups.CreateElastic(ctx, e.js, streamName, groupName, elasticN, refFilters(ordersFilter(t)), 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pcgroups.AddMembers(ctx, e.js, streamName, groupName, []string{"m2", "m1"}); err != nil {
		t.Fatal(err)
	}
	c := cg.New(e.js)
	if names, err := c.List(ctx, cg.KindElastic, streamName); err != nil || !slices.Equal(names, []string{groupName}) {
		t.Fatalf("cg lists %v, %v", names, err)
	}
	checkInfo := func(when string) {
		t.Helper()
		gi, err := c.Info(ctx, cg.KindElastic, streamName, groupName)
		if err != nil {
			t.Fatalf("%s: elastic info: %v", when, err)
		}
		ref := e.elasticConfig()
		if gi.WorkStream != workStream() || gi.Partitions != elasticN {
			t.Errorf("%s: info %+v", when, gi)
		}
		var names []string
		for _, ms := range gi.Members {
			names = append(names, ms.Member)
			want := pcgroups.ElasticGetPartitionFilters(*ref, ms.Member)
			if len(ref.MemberMappings) > 0 {
				// For mapped groups the reference writes <p>.>
				// whatever the filters, cg applies them; the partitions agree.
				if got, w := partitionsOf(ms.Filters), partitionsOf(want); !slices.Equal(got, w) || !slices.Equal(got, ms.Partitions) {
					t.Errorf("%s: info %s partitions %v (filters %v), reference filters %v", when, ms.Member, ms.Partitions, ms.Filters, want)
				}
			} else if !slices.Equal(ms.Filters, want) {
				t.Errorf("%s: info %s filters %v, reference %v", when, ms.Member, ms.Filters, want)
			}
		}
		refNames := slices.Clone(ref.Members)
		for _, mm := range ref.MemberMappings {
			refNames = append(refNames, mm.Member)
		}
		if !slices.Equal(sortedCopy(names), sortedCopy(refNames)) {
			t.Errorf("%s: info members %v, reference %v", when, names, refNames)
		}
	}
	checkInfo("as created")

	// Administered by cg, read back by the reference.
	refMembers := func() []string { return sortedCopy(e.elasticConfig().Members) }
	if _, err := c.AddMembers(ctx, streamName, groupName, []string{"m3"}); err != nil {
		t.Fatal(err)
	}
	if got := refMembers(); !slices.Equal(got, []string{"m1", "m2", "m3"}) {
		t.Errorf("after cg add the reference reads %v", got)
	}
	checkInfo("after add")
	if _, err := c.DropMembers(ctx, streamName, groupName, []string{"m3"}); err != nil {
		t.Fatal(err)
	}
	if got := refMembers(); !slices.Equal(got, []string{"m1", "m2"}) {
		t.Errorf("after cg drop the reference reads %v", got)
	}
	mms := []partition.MemberMapping{{Member: "m1", Partitions: []int{5, 0, 1}}, {Member: "m2", Partitions: []int{2, 3, 4}}}
	if _, err := c.SetMappings(ctx, streamName, groupName, mms); err != nil {
		t.Fatal(err)
	}
	if ref := e.elasticConfig(); len(ref.Members) != 0 || !slices.EqualFunc(fromRef(ref.MemberMappings), mms, func(a, b partition.MemberMapping) bool {
		return a.Member == b.Member && slices.Equal(a.Partitions, b.Partitions)
	}) {
		t.Errorf("after cg create-mapping the reference reads %+v", *ref)
	}
	checkInfo("mapped")
	if _, err := c.DeleteMappings(ctx, streamName, groupName, nil); err != nil {
		t.Fatal(err)
	}
	if ref := e.elasticConfig(); len(ref.MemberMappings) != 0 || !slices.Equal(sortedCopy(ref.Members), []string{"m1", "m2"}) {
		t.Errorf("after cg delete-mapping the reference reads %+v", *ref)
	}
	checkInfo("mappings deleted")

	rec := newRecorder()
	cgs := e.cgStarter(rec)
	r := &elasticRun{e: e, rec: rec, add: "m3", drop: "m1",
		start: map[string]starter{"m1": cgs, "m2": cgs, "m3": cgs}, isCg: map[string]bool{"m1": true, "m2": true, "m3": true}}
	r.run(t)
}

// 6. cg and reference members side by side in one elastic group, with an
// add and a drop moving partitions both ways between the implementations.
func TestElasticMixedMembers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 10*time.Second)
	c := cg.New(e.js)
	if _, err := c.CreateElastic(ctx, streamName, groupName, cg.ElasticConfig{MaxMembers: elasticN, PartitioningFilters: ordersFilter(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pcgroups.AddMembers(ctx, e.js, streamName, groupName, []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	// N=6: {m1,m2} own 0-2,3-5; adding m3 gives 0-1,2-3,4-5 (p2 cg->ref,
	// p4-5 ref->cg); dropping m1 gives m2 0-2, m3 3-5 (p0-1 cg->ref,
	// p3 ref->cg).
	r := &elasticRun{e: e, rec: rec, add: "m3", drop: "m1",
		start: map[string]starter{"m1": e.cgStarter(rec), "m2": e.refStarter(rec), "m3": e.cgStarter(rec)},
		isCg:  map[string]bool{"m1": true, "m3": true}}
	r.run(t)
}

// Elastic twin of the static mixed-instance test: one member, one cg and
// one reference instance on its consumer, through a failover each way
// and a rebalance. The reference deletes a same-named consumer whose
// config is not exactly its own, so cg's elastic consumer must match.
func TestElasticMixedInstancesOneMember(t *testing.T) {
	t.Parallel()
	for _, cgFirst := range []bool{true, false} {
		name := "reference-first"
		if cgFirst {
			name = "cg-first"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.plainStream()
			ctx := ctxT(t, 10*time.Second)
			c := cg.New(e.js)
			if _, err := c.CreateElastic(ctx, streamName, groupName, cg.ElasticConfig{MaxMembers: elasticN, PartitioningFilters: ordersFilter(t)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.AddMembers(ctx, streamName, groupName, []string{"m1"}); err != nil {
				t.Fatal(err)
			}
			rec := newRecorder()
			rec.diagnose = e.consumerState
			kinds := map[string]starter{"cg": e.cgStarter(rec), "ref": e.refStarter(rec)}
			first, second := "ref", "cg"
			if cgFirst {
				first, second = "cg", "ref"
			}
			churn := e.countConsumerChurn(workStream(), "m1")
			running := map[string]*instance{}
			running[first+"-1"] = kinds[first](t, "m1", "1")
			e.waitConverged(10*time.Second, first+" instance joined")
			orig := e.consumerInfo(workStream(), "m1")
			running[second+"-1"] = kinds[second](t, "m1", "1")

			p := newPublisher(t, e.js, keysCovering(elasticN, 12, nil))
			p.publish(60)
			rec.waitHandled(t, p, 20*time.Second)
			// The second instance binding must not have replaced the consumer.
			now := e.consumerInfo(workStream(), "m1")
			if now == nil || !now.Created.Equal(orig.Created) {
				t.Errorf("the %s instance replaced the %s instance's consumer:\n was %s\n now %s", second, first, cfgJSON(orig), cfgJSON(now))
			}

			for round := 0; round < 2; round++ {
				ds := rec.deliveries()
				active := ds[len(ds)-1].instance
				kind := strings.Split(active, "-")[0]
				othersBefore := rec.countWhere(func(d delivery) bool { return d.instance != active })
				start := p.count()
				stop := p.paced(10 * time.Millisecond)
				eventually(t, 10*time.Second, "traffic flowing", func() bool { return p.count() > start+20 })
				if debugChurn {
					t.Logf("%s stopping %s", time.Now().Format("15:04:05.000"), active)
				}
				running[active].stop()
				if err, ok := running[active].done(10 * time.Second); !ok || err != nil {
					t.Errorf("stopped %s: ended %v, err %v", active, ok, err)
				}
				delete(running, active)
				t0 := time.Now()
				eventually(t, 15*time.Second, "the standby takes over", func() bool {
					return rec.countWhere(func(d delivery) bool { return d.instance != active }) > othersBefore
				})
				took := time.Since(t0)
				stop()
				rec.waitHandled(t, p, 20*time.Second)
				t.Logf("round %d: stopped %s, the other implementation took over in %v", round, active, took.Round(time.Millisecond))
				n := fmt.Sprint(round + 2)
				if debugChurn {
					t.Logf("%s starting %s-%s", time.Now().Format("15:04:05.000"), kind, n)
				}
				running[kind+"-"+n] = kinds[kind](t, "m1", n)
			}

			// No consumer churn through the failovers: both kinds bound to
			// the one consumer.
			if cr, del := churn(); cr != 1 || del != 0 {
				t.Errorf("m1's consumer was created %d times and deleted %d times before any rebalance (want 1, 0)", cr, del)
			}

			// A rebalance with both implementations on m1: m2 (reference) joins.
			running["m2"] = refElastic(t, e.conn(), "m2", "ref-1", rec)
			if debugChurn {
				t.Logf("%s adding m2", time.Now().Format("15:04:05.000"))
			}
			stop := p.paced(10 * time.Millisecond)
			if _, err := c.AddMembers(ctx, streamName, groupName, []string{"m2"}); err != nil {
				t.Fatal(err)
			}
			e.waitConverged(20*time.Second, "after adding m2")
			stop()
			// Then it must stay put: a reference instance that failed to
			// bind retries every AckWait+500ms, so watch over two of those.
			cr0, del0 := churn()
			p.publish(30)
			rec.waitHandled(t, p, 20*time.Second)
			watchFrom := time.Now()
			eventually(t, 15*time.Second, "m1's consumer steady", func() bool {
				cr, del := churn()
				if cr != cr0 || del != del0 {
					t.Errorf("m1's consumer keeps being replaced after the rebalance settled: %d more creations, %d more deletions within %v",
						cr-cr0, del-del0, time.Since(watchFrom).Round(time.Millisecond))
					return true
				}
				return time.Since(watchFrom) > steadyWindow
			})
			cr, del := churn()
			t.Logf("m1's consumer: created %d times, deleted %d times in all (one rebalance)", cr, del)
			p.publish(60)
			e.waitElasticQuiet(rec, p)
			rec.check(t, p, maxElasticDup)
			byKind := map[string]int{}
			for _, d := range rec.deliveries() {
				if d.member == "m1" {
					byKind[strings.Split(d.instance, "-")[0]]++
				}
			}
			if byKind["cg"] == 0 || byKind["ref"] == 0 {
				t.Errorf("one implementation never handled m1's messages: %v", byKind)
			}
		})
	}
}

func cfgJSON(ci *jetstream.ConsumerInfo) string {
	if ci == nil {
		return "(no consumer)"
	}
	j, _ := json.Marshal(ci.Config)
	return fmt.Sprintf("created %s %s", ci.Created.Format("15:04:05.000000"), j)
}

// partitionsOf reads the partition tokens of consumer filters, sorted.
func partitionsOf(filters []string) []int {
	var out []int
	for _, f := range filters {
		var p int
		if _, err := fmt.Sscanf(f, "%d.", &p); err == nil && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// steadyWindow is how long a settled consumer is watched for churn: two
// retry periods of a reference instance (AckWait + 500ms each).
const steadyWindow = 5500 * time.Millisecond

var debugChurn = os.Getenv("DEBUG_CHURN") != ""

// countConsumerChurn counts the server's created and deleted advisories
// for one consumer from now on.
func (e *env) countConsumerChurn(stream, consumer string) func() (created, deleted int) {
	e.t.Helper()
	nc := e.js.Conn()
	var mu sync.Mutex
	var cr, del int
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.CONSUMER.*."+stream+"."+consumer, func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		if debugChurn {
			e.t.Logf("%s advisory %s", time.Now().Format("15:04:05.000"), m.Subject)
		}
		switch {
		case strings.Contains(m.Subject, ".CREATED."):
			cr++
		case strings.Contains(m.Subject, ".DELETED."):
			del++
		}
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = sub.Unsubscribe() })
	return func() (int, int) {
		_ = nc.Flush()
		mu.Lock()
		defer mu.Unlock()
		return cr, del
	}
}

// A group the reference makes with no partitioning filters hashes the
// whole subject ({{Partition(N)}}.>); cg and reference members share it,
// each message going to the owner of hash(subject) per cg's math.
func TestElasticWholeSubjectGroupMixed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.plainStream()
	ctx := ctxT(t, 10*time.Second)
	if _, err := pcgroups.CreateElastic(ctx, e.js, streamName, groupName, elasticN, nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pcgroups.AddMembers(ctx, e.js, streamName, groupName, []string{"m1", "m2"}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	rec.diagnose = e.consumerState
	cgElastic(t, e.conn(), "m1", "cg-1", rec)
	refElastic(t, e.conn(), "m2", "ref-1", rec)
	e.waitConverged(20*time.Second, "members of the whole-subject group")
	cfg := cgConfigOf(e.elasticConfig())
	if ci := e.consumerInfo(workStream(), "m1"); !slices.Equal(ci.Config.FilterSubjects, cfg.MemberFilters("m1")) {
		t.Errorf("cg m1 filters %v, want %v", ci.Config.FilterSubjects, cfg.MemberFilters("m1"))
	}
	owner := cfg.Assignment().Owner
	p := newPublisher(t, e.js, keysCovering(elasticN, 18, nil))
	p.publish(150)
	e.waitElasticQuiet(rec, p)
	rec.check(t, p, 0)
	wrong := 0
	for _, d := range rec.deliveries() {
		part := partition.PartitionOfKey("orders."+d.key, elasticN)
		if owner[part] != d.member || (d.partition >= 0 && d.partition != part) {
			wrong++
			if wrong <= 3 {
				t.Errorf("%s#%d: whole-subject partition %d (owner %s), handled by %s as partition %d", d.key, d.keySeq, part, owner[part], d.member, d.partition)
			}
		}
	}
	if rec.countWhere(func(d delivery) bool { return d.member == "m1" }) == 0 || rec.countWhere(func(d delivery) bool { return d.member == "m2" }) == 0 {
		t.Errorf("a member handled nothing: %v", rec.handledBy())
	}
}
