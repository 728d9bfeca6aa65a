package bench

import (
	"time"

	"github.com/cg-dev/cg/pkg/cg"
)

// Matrix is what a run covers: every combination of its lists.
type Matrix struct {
	Members       []int
	Partitions    []int
	Handlers      []time.Duration
	MaxAckPending []int
	// Concurrency of the cg members (nil: serial only); other systems
	// run serial whatever it says.
	Concurrency []int
	Messages    int
	Keys        int
	// Preload publishes before the consumers start (Scenario.Preload).
	Preload bool
	// Layouts of the groups (nil: the member layout only).
	Layouts []string
	// ElasticDrain measures elastic groups on a drained backlog: their
	// members join once the work stream holds it all (Scenario.Filled),
	// and Plain adds the plain consumer draining a work queue of the same
	// backlog (Scenario.WorkQueue), their baseline.
	ElasticDrain bool
}

// Groups are the group scenarios of system, members × partitions ×
// handler × max ack pending, skipping members above the partitions.
func (m Matrix) Groups(system string) []Scenario {
	var out []Scenario
	for _, p := range m.Partitions {
		for _, h := range m.Handlers {
			for _, mp := range m.MaxAckPending {
				for _, n := range m.Members {
					if n > p {
						continue
					}
					cs := m.Concurrency
					if (system != SystemCG && system != SystemElastic && system != SystemCLI && system != SystemCLIElastic) || len(cs) == 0 {
						cs = []int{1}
					}
					layouts := m.Layouts
					if len(layouts) == 0 {
						layouts = []string{LayoutMember}
					}
					for _, l := range layouts {
						for _, c := range cs {
							sc := Scenario{System: system, Members: n, Partitions: p, Handler: h, MaxAckPending: mp, Messages: m.Messages, Keys: m.Keys, Preload: m.Preload, Layout: l}
							sc.Filled = m.ElasticDrain && m.Preload && sc.kind() == cg.KindElastic
							if c > 1 {
								sc.Concurrency = c
							}
							out = append(out, sc)
						}
					}
				}
			}
		}
	}
	return out
}

// Plain are the baselines: a plain pull consumer with one filter and one
// per partition, for every partitions × handler × max ack pending.
func (m Matrix) Plain() []Scenario {
	var out []Scenario
	for _, p := range m.Partitions {
		for _, h := range m.Handlers {
			for _, mp := range m.MaxAckPending {
				filters := []int{1}
				if p > 1 {
					filters = append(filters, p)
				}
				for _, f := range filters {
					out = append(out, Scenario{System: SystemPlain, Members: 1, Partitions: p, Handler: h, MaxAckPending: mp, Filters: f, Messages: m.Messages, Keys: m.Keys, Preload: m.Preload})
				}
				if m.ElasticDrain {
					out = append(out, Scenario{System: SystemPlain, Members: 1, Partitions: p, Handler: h, MaxAckPending: mp, Filters: 1, WorkQueue: true, Messages: m.Messages, Keys: m.Keys, Preload: m.Preload})
				}
			}
		}
	}
	return out
}

// Baseline finds, among results, the plain single-filter run with the
// same partitions, handler and max ack pending as sc: the server's
// ceiling for one ordered consumer in that setting. An elastic group
// draining a filled work stream (Scenario.Filled) is set beside the plain
// consumer draining a work queue of the same backlog.
func Baseline(results []Result, sc Scenario) (Result, bool) {
	for _, r := range results {
		if r.System == SystemPlain && r.Filters == 1 && r.WorkQueue == sc.Filled && r.Partitions == sc.Partitions && r.Handler == sc.Handler && r.mapOr1() == sc.mapOr1() {
			return r, true
		}
	}
	return Result{}, false
}
