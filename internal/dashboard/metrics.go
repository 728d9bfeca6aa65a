package dashboard

import (
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"

	"github.com/prometheus/client_golang/prometheus"
)

// Every series has exactly the labels stream, group, member and
// partition, "" where one does not apply.
var labels = []string{"stream", "group", "member", "partition"}

var (
	descPending = prometheus.NewDesc("cg_partition_pending",
		"Messages of the partition not yet acked by its owner (member: the owner).", labels, nil)
	descOldest = prometheus.NewDesc("cg_partition_oldest_age_seconds",
		"How long the partition's oldest pending message has waited, at the last sample.", labels, nil)
	descInstances = prometheus.NewDesc("cg_member_instances",
		"Running instances of the member the server sees (waiting pull requests, the pinned one included).", labels, nil)
	descPinned = prometheus.NewDesc("cg_member_pinned",
		"1 when the server has pinned an instance of the member, else 0.", labels, nil)
	descPinChanges = prometheus.NewDesc("cg_pin_changes_total",
		"Pins and unpins of the member's instances seen since the dashboard started.", labels, nil)
	descRebalances = prometheus.NewDesc("cg_rebalances_total",
		"Changes of the group's partition ownership seen since the dashboard started.", labels, nil)
)

// counters are the dashboard's counts since it started.
type counters struct {
	pins       map[memberKey]float64
	rebalances map[groupKey]float64
}

type memberKey struct {
	groupKey
	member string
}

func newCounters() counters {
	return counters{pins: map[memberKey]float64{}, rebalances: map[groupKey]float64{}}
}

// collector reads the dashboard's current states at each scrape, so a
// partition that changed owner has one series, under its new owner.
type collector struct{ s *Server }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descOldest, descInstances, descPinned, descPinChanges, descRebalances} {
		ch <- d
	}
}

func (c *collector) Collect(out chan<- prometheus.Metric) {
	// A static and an elastic group of one name on one stream would give
	// the same labels (kind is not one of them): the first wins, so a
	// scrape never fails on a duplicate.
	seen := map[string]bool{}
	ch := make(chan prometheus.Metric)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			id := m.Desc().String() + "|" + labelKey(m)
			if !seen[id] {
				seen[id] = true
				out <- m
			}
		}
	}()
	defer func() { close(ch); <-done }()
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, st := range s.states {
		for _, p := range st.PartitionStats {
			if !p.Known {
				continue
			}
			lv := []string{k.stream, k.group, p.Owner, strconv.Itoa(p.Partition)}
			ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(p.Pending), lv...)
			ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, float64(p.OldestAgeMs)/1000, lv...)
		}
		for _, m := range st.Members {
			lv := []string{k.stream, k.group, m.Name, ""}
			ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(len(m.Instances)), lv...)
			pinned := 0.0
			if m.PinID != "" {
				pinned = 1
			}
			ch <- prometheus.MustNewConstMetric(descPinned, prometheus.GaugeValue, pinned, lv...)
			if _, ok := s.counts.pins[memberKey{k, m.Name}]; !ok {
				ch <- prometheus.MustNewConstMetric(descPinChanges, prometheus.CounterValue, 0, lv...)
			}
		}
		if _, ok := s.counts.rebalances[k]; !ok {
			ch <- prometheus.MustNewConstMetric(descRebalances, prometheus.CounterValue, 0, k.stream, k.group, "", "")
		}
	}
	for k, n := range s.counts.pins {
		ch <- prometheus.MustNewConstMetric(descPinChanges, prometheus.CounterValue, n, k.stream, k.group, k.member, "")
	}
	for k, n := range s.counts.rebalances {
		ch <- prometheus.MustNewConstMetric(descRebalances, prometheus.CounterValue, n, k.stream, k.group, "", "")
	}
}

// labelKey is a metric's label values, for spotting duplicates.
func labelKey(m prometheus.Metric) string {
	var pb dto.Metric
	if m.Write(&pb) != nil {
		return ""
	}
	var b strings.Builder
	for _, l := range pb.GetLabel() {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return b.String()
}
