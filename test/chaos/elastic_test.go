package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Scenario 4: an add/drop storm on an elastic group. Members m1…m4 run as
// processes; 20 membership changes, some concurrent, are made with `cg
// elastic add|drop` while traffic flows, each step as soon as some traffic
// has been handled since the last. At the end every member pulls its final
// partitions, everything is handled, order kept, and duplicates are no more
// than one in-flight message per member whose partitions each change moved.
func TestElasticAddDropStorm(t *testing.T) {
	needBinary(t)
	s := natstest.RunServer(t)
	e := newEnv(t, "elastic-storm", s.ClientURL(), envOpts{kind: "elastic"})
	e.partitionGaps = true
	all := []string{"m1", "m2", "m3", "m4"}
	e.setupElastic(8, all...)
	hist := e.watchElastic()
	for _, m := range all {
		e.startJoined(m)
	}
	e.publish(3, 10*time.Millisecond)
	e.waitHandled("warm-up", e.began, 10, 30*time.Second, all...)
	e.steady(time.Now(), 10, all...)

	// Each step's changes run at once; the membership never empties and
	// ends with all four.
	plan := [][]string{
		{"drop m4"}, {"drop m3"}, {"add m3", "add m4"}, {"drop m1"}, {"drop m2", "add m1"},
		{"add m2"}, {"drop m3", "drop m4"}, {"add m4"}, {"drop m1", "add m3"}, {"drop m2"},
		{"add m1", "add m2"}, {"drop m2", "drop m4"}, {"add m2", "add m4"},
	}
	configsBefore := hist.len()
	d := e.disrupt("add/drop storm", 0, all...)
	changes := 0
	for _, step := range plan {
		var wg sync.WaitGroup
		errs := make([]string, len(step))
		for i, c := range step {
			verb, member, _ := strings.Cut(c, " ")
			wg.Add(1)
			go func() {
				defer wg.Done()
				if out, err := e.cli("elastic", verb, streamName, groupName, member); err != nil {
					errs[i] = fmt.Sprintf("cg elastic %s: %v\n%s", c, err, out)
				}
			}()
		}
		wg.Wait()
		for _, msg := range errs {
			if msg != "" {
				t.Fatal(msg)
			}
		}
		changes += len(step)
		since := time.Now()
		t.Logf("%s storm step %v done", since.Format("15:04:05.000"), step)
		e.waitFor("traffic during the storm", 20*time.Second, func() bool { return len(e.msgs("", since)) >= 10 })
	}
	stormEnd := time.Now()

	final := cg.ElasticConfig{MaxMembers: e.n, Members: all}.Assignment()
	e.waitFor("every member pulling its final partitions", 30*time.Second, func() bool {
		for _, m := range all {
			var last *line
			for _, p := range e.allProcs() {
				if p.member != m {
					continue
				}
				for _, l := range p.snapshot() {
					if l.isEvent("rebalanced") && (last == nil || l.at.After(last.at)) {
						last = l
					}
				}
			}
			if last == nil || !slices.Equal(last.Partitions, final.MemberPartitions(m)) {
				return false
			}
			since := last.at
			if stormEnd.After(since) {
				since = stormEnd
			}
			if len(e.msgs(m, since)) < 3 {
				return false
			}
		}
		return true
	})
	e.recovered(d)
	moved := hist.moved(configsBefore-1, all)
	d.inflight = moved * e.maxAckPending
	if e.layout == "partition" {
		// Each partition's consumer has its own window: a change may
		// leave that much in flight on every partition it moved.
		d.inflight = hist.partitionMoves(configsBefore-1) * e.maxAckPending
	}
	e.steady(d.end, 20, all...)
	e.finish(all, func() string {
		return fmt.Sprintf("changes=%d configs=%d member_moves=%d", changes, hist.len()-configsBefore, moved)
	})
}

// elasticHistory records every stored configuration of the group.
type elasticHistory struct {
	mu   sync.Mutex
	cfgs []cg.ElasticConfig
}

func (e *env) watchElastic() *elasticHistory {
	e.t.Helper()
	h := &elasticHistory{}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(cancel)
	bucket := cg.ElasticBucket
	if e.layout == "partition" {
		bucket = cg.ElasticPartitionBucket
	}
	kv, err := e.js.KeyValue(ctx, bucket)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := kv.Watch(ctx, streamName+"."+groupName)
	if err != nil {
		e.t.Fatal(err)
	}
	initial := make(chan struct{})
	go func() {
		for u := range w.Updates() {
			if u == nil {
				close(initial)
				continue
			}
			if u.Operation() != jetstream.KeyValuePut {
				continue
			}
			var c cg.ElasticConfig
			if json.Unmarshal(u.Value(), &c) == nil {
				h.mu.Lock()
				h.cfgs = append(h.cfgs, c)
				h.mu.Unlock()
			}
		}
	}()
	select {
	case <-initial:
	case <-time.After(10 * time.Second):
		e.t.Fatal("no initial value from the group's KV watch")
	}
	return h
}

func (h *elasticHistory) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.cfgs)
}

// moved counts, over every change after configuration from, the members
// whose partitions it changed.
func (h *elasticHistory) moved(from int, members []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := max(from, 0) + 1; i < len(h.cfgs); i++ {
		a, b := h.cfgs[i-1].Assignment(), h.cfgs[i].Assignment()
		for _, m := range members {
			if !slices.Equal(a.MemberPartitions(m), b.MemberPartitions(m)) {
				n++
			}
		}
	}
	return n
}

// partitionMoves counts, over every change after configuration from, the
// partitions whose owner it changed.
func (h *elasticHistory) partitionMoves(from int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for i := max(from, 0) + 1; i < len(h.cfgs); i++ {
		a, b := h.cfgs[i-1].Assignment().Owner, h.cfgs[i].Assignment().Owner
		for k := range min(len(a), len(b)) {
			if a[k] != b[k] {
				n++
			}
		}
	}
	return n
}
