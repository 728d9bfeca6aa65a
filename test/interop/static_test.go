package interop_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/pcgroups"

	"github.com/cg-dev/cg/pkg/cg"
)

// refStaticFilters is what the reference computes for a member's consumer
// (StaticConsume's joinMemberConsumerStatic).
func refStaticFilters(c *pcgroups.StaticConsumerGroupConfig, member string) []string {
	var out []string
	if len(c.Filters) == 0 {
		return pcgroups.GeneratePartitionFilters(c.Members, c.MaxMembers, c.MemberMappings, member, ">")
	}
	for _, f := range c.Filters {
		out = append(out, pcgroups.GeneratePartitionFilters(c.Members, c.MaxMembers, c.MemberMappings, member, f)...)
	}
	return out
}

func sameStatic(ref *pcgroups.StaticConsumerGroupConfig, c cg.StaticConfig) bool {
	return int(ref.MaxMembers) == c.MaxMembers && slices.Equal(ref.Filters, c.Filters) &&
		slices.Equal(ref.Members, c.Members) && reflect.DeepEqual(fromRef(ref.MemberMappings), c.MemberMappings)
}

// waitStaticQuiet waits until the member consumers have nothing pending
// or unacknowledged, so no late redelivery can still come.
func (e *env) waitStaticQuiet(members []string) {
	e.t.Helper()
	eventually(e.t, 15*time.Second, "static consumers idle", func() bool {
		for _, m := range members {
			ci := e.consumerInfo(streamName, cg.StaticConsumerName(groupName, m))
			if ci != nil && (ci.NumAckPending > 0 || ci.NumPending > 0) {
				return false
			}
		}
		return true
	})
}

// 1. A group cg makes is read, listed and joined by the reference: every
// message is handled exactly once, by its owner per cg's math, in order.
func TestStaticCgGroupJoinedByReference(t *testing.T) {
	t.Parallel()
	const n = 8
	for _, tc := range []struct {
		name   string
		create func(e *env) cg.StaticConfig
	}{
		{"engine-balanced", func(e *env) cg.StaticConfig {
			cfg := cg.StaticConfig{MaxMembers: n, Members: []string{"m1", "m2", "m3"}}
			if _, err := cg.New(e.js).CreateStatic(ctxT(e.t, 10*time.Second), streamName, groupName, cfg); err != nil {
				e.t.Fatal(err)
			}
			return cfg
		}},
		{"cli-balanced-filter", func(e *env) cg.StaticConfig {
			r := e.cliRun("static", "create", "balanced", streamName, groupName, fmt.Sprint(n), "m3", "m1", "m2", "--filter", "orders.*")
			if r.Code != 0 {
				e.t.Fatalf("cli create: %d %s %s", r.Code, r.Out, r.Err)
			}
			return cg.StaticConfig{MaxMembers: n, Filters: []string{"orders.*"}, Members: []string{"m3", "m1", "m2"}}
		}},
		{"cli-mapped", func(e *env) cg.StaticConfig {
			r := e.cliRun("static", "create", "mapped", streamName, groupName, fmt.Sprint(n), "m1:5,0,2", "m2:1,3", "m3:4,6-7")
			if r.Code != 0 {
				e.t.Fatalf("cli create: %d %s %s", r.Code, r.Out, r.Err)
			}
			return cg.StaticConfig{MaxMembers: n, MemberMappings: []partition.MemberMapping{
				{Member: "m1", Partitions: []int{5, 0, 2}}, {Member: "m2", Partitions: []int{1, 3}}, {Member: "m3", Partitions: []int{4, 6, 7}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.staticStream(n)
			asked := tc.create(e)
			ctx := ctxT(t, 30*time.Second)

			ref, err := pcgroups.GetStaticConsumerGroupConfig(ctx, e.js, streamName, groupName)
			if err != nil {
				t.Fatalf("reference cannot read cg's group: %v", err)
			}
			if !sameStatic(ref, asked) {
				t.Fatalf("reference reads %+v, we asked for %+v", *ref, asked)
			}
			names, err := pcgroups.ListStaticConsumerGroups(ctx, e.js, streamName)
			if err != nil || !slices.Equal(names, []string{groupName}) {
				t.Fatalf("reference lists %v, %v", names, err)
			}

			rec := newRecorder()
			members := asked.MemberNames()
			for _, m := range members {
				refStatic(t, e.conn(), m, "ref", rec)
				ci := e.consumerInfo(streamName, cg.StaticConsumerName(groupName, m))
				if ci == nil {
					t.Fatalf("reference made no consumer for %s", m)
				}
				if want := asked.MemberFilters(m); !slices.Equal(ci.Config.FilterSubjects, want) {
					t.Errorf("reference consumer for %s filters %v, cg computes %v", m, ci.Config.FilterSubjects, want)
				}
			}

			keys := keysCovering(n, 24, nil)
			p := newPublisher(t, e.js, keys)
			p.publish(240)
			rec.waitHandled(t, p, 20*time.Second)
			e.waitStaticQuiet(members)
			rec.check(t, p, 0)

			// Each message went to the member owning its partition by cg's
			// math, and the server stamped the partition cg computes.
			owner := asked.Assignment().Owner
			s, err := e.js.Stream(ctx, streamName)
			if err != nil {
				t.Fatal(err)
			}
			wrong := 0
			for _, d := range rec.deliveries() {
				part := partition.PartitionOfKey(d.key, n)
				if owner[part] != d.member {
					wrong++
					if wrong < 5 {
						t.Errorf("%s#%d (partition %d, owner %s) handled by %s", d.key, d.keySeq, part, owner[part], d.member)
					}
				}
				if d.subject != "orders."+d.key {
					t.Errorf("handler saw subject %q for key %s", d.subject, d.key)
				}
				// Key order is stream order: key-seq n is the n-th stream
				// sequence published on its key.
				if want := p.streamSeq(d.key, d.keySeq); d.seq != want {
					t.Errorf("%s#%d delivered as stream seq %d, published as %d", d.key, d.keySeq, d.seq, want)
				}
				raw, err := s.GetMsg(ctx, d.seq)
				if err != nil {
					t.Fatal(err)
				}
				if want := fmt.Sprintf("%d.orders.%s", part, d.key); raw.Subject != want {
					t.Errorf("stream stores %q, cg computes %q", raw.Subject, want)
				}
			}
			if wrong > 0 {
				t.Errorf("%d messages handled by a member not owning their partition", wrong)
			}
		})
	}
}

// 2. One member, two instances: one cg, one reference, sharing the
// member's consumer. Both orders of creation, with a failover each way.
func TestStaticMixedInstancesOneMember(t *testing.T) {
	t.Parallel()
	const n = 6
	for _, tc := range []struct {
		name    string
		cfg     cg.StaticConfig
		cgFirst bool
		member  string
	}{
		{"balanced/cg-first", cg.StaticConfig{MaxMembers: n, Members: []string{"m1", "m2"}}, true, "m1"},
		{"balanced/reference-first", cg.StaticConfig{MaxMembers: n, Members: []string{"m1", "m2"}}, false, "m1"},
		// Unsorted mapped partitions: the consumer's FilterSubjects order
		// must be the reference's, or the two would conflict.
		{"mapped-unsorted/cg-first", cg.StaticConfig{MaxMembers: n, MemberMappings: []partition.MemberMapping{{Member: "m1", Partitions: []int{4, 0, 2}}, {Member: "m2", Partitions: []int{5, 1, 3}}}}, true, "m1"},
		{"mapped-unsorted/reference-first", cg.StaticConfig{MaxMembers: n, MemberMappings: []partition.MemberMapping{{Member: "m1", Partitions: []int{4, 0, 2}}, {Member: "m2", Partitions: []int{5, 1, 3}}}}, false, "m1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.staticStream(n)
			if _, err := cg.New(e.js).CreateStatic(ctxT(t, 10*time.Second), streamName, groupName, tc.cfg); err != nil {
				t.Fatal(err)
			}
			mine := tc.cfg.Assignment().MemberPartitions(tc.member)
			keys := keysCovering(n, 12, func(p int) bool { return slices.Contains(mine, p) })
			consumer := cg.StaticConsumerName(groupName, tc.member)
			rec := newRecorder()
			rec.diagnose = func() string {
				ci := e.consumerInfo(streamName, consumer)
				j, _ := json.Marshal(ci)
				ds := rec.deliveries()
				var tail []string
				for _, d := range ds[max(0, len(ds)-6):] {
					tail = append(tail, fmt.Sprintf("%s#%d by %s pin %s delivered %d", d.key, d.keySeq, d.instance, d.pin, d.delivered))
				}
				return fmt.Sprintf("consumer now: %s\nlast deliveries: %s", j, strings.Join(tail, "; "))
			}

			startCg := func(name string) *instance {
				in, _ := cgStatic(t, e.conn(), tc.member, name, rec)
				return in
			}
			startRef := func(name string) *instance { return refStatic(t, e.conn(), tc.member, name, rec) }
			kindOf := map[string]func(string) *instance{"cg": startCg, "ref": startRef}

			first, second := "ref", "cg"
			if tc.cgFirst {
				first, second = "cg", "ref"
			}
			running := map[string]*instance{}
			running[first+"-1"] = kindOf[first](first + "-1")
			orig := e.consumerInfo(streamName, consumer)
			if orig == nil {
				t.Fatalf("%s instance made no consumer", first)
			}
			running[second+"-1"] = kindOf[second](second + "-1")
			assertSameConsumer(t, orig, e.consumerInfo(streamName, consumer), second+" joined")

			p := newPublisher(t, e.js, keys)
			p.publish(100)
			rec.waitHandled(t, p, 20*time.Second)

			// Two failovers: stop the instance handling traffic while traffic
			// flows; the standby of the other implementation takes over; a
			// fresh instance of the stopped kind joins as the new standby.
			for round := 0; round < 2; round++ {
				ds := rec.deliveries()
				active := ds[len(ds)-1].instance
				kind := strings.Split(active, "-")[0]
				othersBefore := rec.countWhere(func(d delivery) bool { return d.instance != active })
				start := p.count()
				stop := p.paced(10 * time.Millisecond)
				eventually(t, 10*time.Second, "traffic flowing before the stop", func() bool {
					return p.count() > start+20 && rec.unique() >= p.count()-3
				})
				running[active].stop()
				if err, ok := running[active].done(10 * time.Second); !ok || err != nil {
					t.Errorf("stopped %s: ended %v, err %v", active, ok, err)
				}
				delete(running, active)
				stoppedAt := time.Now()
				eventually(t, 15*time.Second, "the standby takes over", func() bool {
					return rec.countWhere(func(d delivery) bool { return d.instance != active }) > othersBefore
				})
				took := time.Since(stoppedAt)
				stop()
				rec.waitHandled(t, p, 20*time.Second)
				t.Logf("round %d: stopped %s, the other implementation's standby took over in %v; published %d so far", round, active, took.Round(time.Millisecond), p.count())
				name := fmt.Sprintf("%s-%d", kind, round+2)
				running[name] = kindOf[kind](name)
				assertSameConsumer(t, orig, e.consumerInfo(streamName, consumer), name+" rejoined")
			}
			p.publish(50)
			rec.waitHandled(t, p, 20*time.Second)
			e.waitStaticQuiet([]string{tc.member})
			rec.check(t, p, 3)
			assertSameConsumer(t, orig, e.consumerInfo(streamName, consumer), "after two failovers")
			byKind := map[string]int{}
			for _, d := range rec.deliveries() {
				byKind[strings.Split(d.instance, "-")[0]]++
			}
			if byKind["cg"] == 0 || byKind["ref"] == 0 {
				t.Errorf("one implementation never handled anything: %v", byKind)
			}
		})
	}
}

// assertSameConsumer fails when the consumer was deleted and recreated
// (a new Created time) or reconfigured.
func assertSameConsumer(t *testing.T, a, b *jetstream.ConsumerInfo, when string) {
	t.Helper()
	if a == nil || b == nil {
		t.Fatalf("%s: consumer missing (before %v, after %v)", when, a != nil, b != nil)
	}
	if !a.Created.Equal(b.Created) {
		t.Errorf("%s: consumer %s was recreated (created %v, now %v)", when, a.Name, a.Created, b.Created)
	}
	ca, cb := a.Config, b.Config
	if !reflect.DeepEqual(ca, cb) {
		ja, _ := json.Marshal(ca)
		jb, _ := json.Marshal(cb)
		t.Errorf("%s: consumer %s config changed:\n was %s\n now %s", when, a.Name, ja, jb)
	}
}

// 3. A group the reference makes is listed, inspected, consumed, stepped
// down and deleted by cg.
func TestStaticReferenceGroupAdministeredByCg(t *testing.T) {
	t.Parallel()
	const n = 6
	for _, tc := range []struct {
		name     string
		members  []string
		mappings []pcgroups.MemberMapping
	}{
		{"balanced", []string{"m2", "m1"}, nil},
		{"mapped", nil, []pcgroups.MemberMapping{{Member: "m1", Partitions: []int{4, 0, 2}}, {Member: "m2", Partitions: []int{5, 1, 3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.staticStream(n)
			ctx := ctxT(t, 30*time.Second)
			ref, err := pcgroups.CreateStatic(ctx, e.js, streamName, groupName, n, nil, tc.members, tc.mappings)
			if err != nil {
				t.Fatal(err)
			}
			c := cg.New(e.js)

			// Listed, by the engine and the CLI.
			if names, err := c.List(ctx, cg.KindStatic, streamName); err != nil || !slices.Equal(names, []string{groupName}) {
				t.Fatalf("cg lists %v, %v", names, err)
			}
			r := e.cliRun("static", "ls", streamName, "--json")
			var ls []struct {
				Group      string   `json:"group"`
				Partitions int      `json:"partitions"`
				Mode       string   `json:"mode"`
				Members    []string `json:"members"`
			}
			if r.Code != 0 || json.Unmarshal([]byte(r.Out), &ls) != nil || len(ls) != 1 || ls[0].Group != groupName || ls[0].Partitions != n ||
				!slices.Equal(sortedCopy(ls[0].Members), []string{"m1", "m2"}) {
				t.Fatalf("static ls: %d %q %q", r.Code, r.Out, r.Err)
			}

			// Inspected: members, partitions and filters as the reference has them.
			r = e.cliRun("static", "info", streamName, groupName, "--json")
			var raw struct {
				Members []health.MemberStatus `json:"members"`
				Owners  []string              `json:"owners"`
			}
			if r.Code != 0 || json.Unmarshal([]byte(r.Out), &raw) != nil {
				t.Fatalf("static info: %d %q %q", r.Code, r.Out, r.Err)
			}
			if len(raw.Members) != 2 {
				t.Fatalf("info members %+v", raw.Members)
			}
			share := map[string][]int{}
			for _, ms := range raw.Members {
				want := refStaticFilters(ref, ms.Member)
				if !slices.Equal(ms.Filters, want) {
					t.Errorf("info: %s filters %v, reference generates %v", ms.Member, ms.Filters, want)
				}
				var parts []int
				for _, f := range want {
					var p int
					fmt.Sscanf(f, "%d.", &p)
					parts = append(parts, p)
				}
				slices.Sort(parts)
				if !slices.Equal(ms.Partitions, parts) {
					t.Errorf("info: %s partitions %v, reference's filters say %v", ms.Member, ms.Partitions, parts)
				}
				share[ms.Member] = ms.Partitions
				for _, p := range ms.Partitions {
					if raw.Owners[p] != ms.Member {
						t.Errorf("info owners[%d] = %q, want %q", p, raw.Owners[p], ms.Member)
					}
				}
			}

			// Consumed: m1 by `static consume --count`, m2 by JoinStatic.
			keys := keysCovering(n, 18, nil)
			p := newPublisher(t, e.js, keys)
			p.publish(120)
			m1Count := 0
			for _, k := range keys {
				if slices.Contains(share["m1"], partition.PartitionOfKey(k, n)) {
					m1Count += int(p.snapshot()[k])
				}
			}
			// --reference-compatible: the reference takes m1 over next, and
			// refuses a consumer that has a threshold or cg's marks.
			r = e.cliRun("static", "consume", streamName, groupName, "m1", "--count", fmt.Sprint(m1Count), "--sleep", "0s", "--json", "--reference-compatible")
			if r.Code != 0 {
				t.Fatalf("static consume: %d %s", r.Code, r.Err)
			}
			msgs, seenCLI := 0, map[string]bool{}
			for _, l := range strings.Split(strings.TrimSpace(r.Out), "\n") {
				var kind struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal([]byte(l), &kind); err != nil {
					t.Fatalf("consume line %q: %v", l, err)
				}
				var line struct {
					Type      string `json:"type"`
					Partition int    `json:"partition"`
					Subject   string `json:"subject"`
					StreamSeq uint64 `json:"stream_seq"`
					Acked     bool   `json:"acked"`
					Handled   int    `json:"handled"`
				}
				if kind.Type == "msg" || kind.Type == "summary" {
					var err error
					if kind.Type == "msg" {
						err = json.Unmarshal([]byte(l), &line)
					} else {
						var sum struct {
							Handled int `json:"handled"`
						}
						err = json.Unmarshal([]byte(l), &sum)
						line.Type, line.Handled = "summary", sum.Handled
					}
					if err != nil {
						t.Fatalf("consume line %q: %v", l, err)
					}
				}
				switch line.Type {
				case "msg":
					msgs++
					if !slices.Contains(share["m1"], line.Partition) || !line.Acked || seenCLI[fmt.Sprint(line.StreamSeq)] {
						t.Errorf("consume line %s", l)
					}
					seenCLI[fmt.Sprint(line.StreamSeq)] = true
				case "summary":
					if line.Handled != m1Count {
						t.Errorf("summary %s, want %d handled", l, m1Count)
					}
				}
			}
			if msgs != m1Count {
				t.Errorf("static consume --count %d printed %d messages", m1Count, msgs)
			}
			t.Logf("COUNTS %s: CLI consume m1 handled %d of %d published, all distinct, all acked", t.Name(), msgs, p.count())

			rec := newRecorder()
			_, m2 := cgStatic(t, e.conn(), "m2", "cg", rec)
			eventually(t, 20*time.Second, "m2's share handled", func() bool { return rec.unique() == p.count()-m1Count })
			e.waitStaticQuiet([]string{"m1", "m2"})
			if rec.unique() != p.count()-m1Count || len(rec.deliveries()) != rec.unique() {
				t.Errorf("m2 handled %d (%d unique), want %d exactly once", len(rec.deliveries()), rec.unique(), p.count()-m1Count)
			}
			for _, d := range rec.deliveries() {
				if !slices.Contains(share["m2"], d.partition) {
					t.Errorf("m2 handled partition %d", d.partition)
				}
			}

			// m1 now runs on the reference, bound to the consumer the CLI made.
			refM1 := refStatic(t, e.conn(), "m1", "ref", rec)

			// Stepped down by cg: the CLI unpins the reference instance, the
			// reference unpins cg's (pcgroups.StaticMemberStepDown).
			p.publish(60)
			rec.waitHandled2(t, p, m1Count, 20*time.Second)
			ci := e.consumerInfo(streamName, cg.StaticConsumerName(groupName, "m1"))
			pin1 := pinOf(ci)
			if pin1 == "" {
				t.Fatalf("m1 not pinned after handling")
			}
			r = e.cliRun("static", "step-down", streamName, groupName, "m1", "--json")
			var sd cg.StepDownResult
			if r.Code != 0 || json.Unmarshal([]byte(r.Out), &sd) != nil || sd.PrevPinID != pin1 {
				t.Fatalf("step-down: %d %q %q (pin was %s)", r.Code, r.Out, r.Err, pin1)
			}
			pin2 := pinOf(e.consumerInfo(streamName, cg.StaticConsumerName(groupName, "m2")))
			if err := pcgroups.StaticMemberStepDown(ctx, e.js, streamName, groupName, "m2"); err != nil {
				t.Fatal(err)
			}
			p.publish(60)
			rec.waitHandled2(t, p, m1Count, 20*time.Second)
			eventually(t, 10*time.Second, "both members re-pinned under new pins", func() bool {
				a := pinOf(e.consumerInfo(streamName, cg.StaticConsumerName(groupName, "m1")))
				b := pinOf(e.consumerInfo(streamName, cg.StaticConsumerName(groupName, "m2")))
				return a != "" && a != pin1 && b != "" && b != pin2
			})
			e.waitStaticQuiet([]string{"m1", "m2"})
			if d := len(rec.deliveries()) - rec.unique(); d != 0 {
				t.Errorf("%d duplicates around the step-downs", d)
			}
			t.Logf("COUNTS %s: after step-downs, %d handled by instances (%v), duplicates %d", t.Name(), len(rec.deliveries()), rec.handledBy(), len(rec.deliveries())-rec.unique())

			// Deleted by cg: nothing of the group is left, both running
			// instances end cleanly, and the reference sees it gone.
			r = e.cliRun("static", "delete", streamName, groupName, "--force", "--json")
			if r.Code != 0 {
				t.Fatalf("delete: %d %q %q", r.Code, r.Out, r.Err)
			}
			if err, ok := refM1.done(10 * time.Second); !ok || err != nil {
				t.Errorf("reference m1 after delete: ended %v err %v", ok, err)
			}
			select {
			case <-m2.Done():
				if m2.Err() != nil {
					t.Errorf("cg m2 after delete: %v", m2.Err())
				}
			case <-time.After(10 * time.Second):
				t.Errorf("cg m2 still running after delete")
			}
			for _, cn := range e.consumerNames(streamName) {
				if strings.HasPrefix(cn, groupName+"-") {
					t.Errorf("consumer %s left after delete", cn)
				}
			}
			if _, err := pcgroups.GetStaticConsumerGroupConfig(ctx, e.js, streamName, groupName); err == nil {
				t.Errorf("reference still reads the deleted group")
			}
			if names, _ := pcgroups.ListStaticConsumerGroups(ctx, e.js, streamName); slices.Contains(names, groupName) {
				t.Errorf("reference still lists the deleted group: %v", names)
			}
			if names, _ := c.List(ctx, cg.KindStatic, streamName); len(names) != 0 {
				t.Errorf("cg still lists %v", names)
			}
		})
	}
}

// waitHandled2 waits until every message but the `skip` the CLI consumed
// (which this recorder never saw) was handled.
func (r *recorder) waitHandled2(t *testing.T, p *publisher, skip int, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, "all messages handled", func() bool { return r.unique() >= p.count()-skip })
}

// TestStaticDefaultThresholdAndReference pins down what the default
// inactive threshold means for reference instances of the same member:
// the reference's default consumer config is refused (10148, as
// docs/reliability.md says), and a reference program whose consumer config
// carries the same threshold shares the member.
func TestStaticDefaultThresholdAndReference(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.staticStream(4)
	if _, err := cg.New(e.js).CreateStatic(ctxT(t, 10*time.Second), streamName, groupName, cg.StaticConfig{MaxMembers: 4, Members: []string{"m1", "m2"}}); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	m, err := cg.New(e.conn()).JoinStatic(ctxT(t, 10*time.Second), streamName, groupName, "m1", rec.cg("m1", "cg-1"), cg.JoinOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Stop)
	consumer := cg.StaticConsumerName(groupName, "m1")
	ci := e.consumerInfo(streamName, consumer)
	if ci == nil || ci.Config.InactiveThreshold != cg.DefaultInactiveThreshold {
		t.Fatalf("cg's default static consumer: want inactive threshold %s, got %+v", cg.DefaultInactiveThreshold, ci)
	}
	_, err = pcgroups.StaticConsume(ctxT(t, 5*time.Second), e.conn(), streamName, groupName, "m1", rec.ref("m1", "ref-1"), refConsumerConfig())
	if err == nil || !strings.Contains(err.Error(), "10148") {
		t.Fatalf("reference with its default config on cg's consumer: want error 10148, got %v", err)
	}
	// The threshold alone is not enough: cg's ownership marks are part of
	// the consumer's configuration too.
	matching := refConsumerConfig()
	matching.InactiveThreshold = cg.DefaultInactiveThreshold
	_, err = pcgroups.StaticConsume(ctxT(t, 5*time.Second), e.conn(), streamName, groupName, "m1", rec.ref("m1", "ref-2"), matching)
	if err == nil || !strings.Contains(err.Error(), "10148") {
		t.Fatalf("reference with the same threshold but no marks on cg's consumer: want error 10148, got %v", err)
	}
	// A reference program whose consumer config carries the threshold and
	// the marks shares the member.
	matching.Metadata = cg.Marks("static", streamName, groupName, "m1")
	cc, err := pcgroups.StaticConsume(ctxT(t, 5*time.Second), e.conn(), streamName, groupName, "m1", rec.ref("m1", "ref-3"), matching)
	if err != nil {
		t.Fatalf("reference with the same threshold and marks: %v", err)
	}
	t.Cleanup(cc.Stop)
	eventually(t, 10*time.Second, "cg and reference instances both pulling on m1", func() bool {
		ci := e.consumerInfo(streamName, consumer)
		return ci != nil && ci.NumWaiting >= 2
	})
	// ReferenceCompatible: cg creates m2's consumer as the reference
	// would, and a reference instance with its default config joins it.
	m2, err := cg.New(e.conn()).JoinStatic(ctxT(t, 10*time.Second), streamName, groupName, "m2", rec.cg("m2", "cg-1"), cg.JoinOptions{ReferenceCompatible: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m2.Stop)
	cc2, err := pcgroups.StaticConsume(ctxT(t, 5*time.Second), e.conn(), streamName, groupName, "m2", rec.ref("m2", "ref-1"), refConsumerConfig())
	if err != nil {
		t.Fatalf("reference with its default config on cg's reference-compatible consumer: %v", err)
	}
	t.Cleanup(cc2.Stop)
	eventually(t, 10*time.Second, "cg and reference instances both pulling on m2", func() bool {
		ci := e.consumerInfo(streamName, cg.StaticConsumerName(groupName, "m2"))
		return ci != nil && ci.NumWaiting >= 2
	})
}
