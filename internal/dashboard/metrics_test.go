package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/dashboard"
	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
)

type series struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$`)
	labelPair  = regexp.MustCompile(`([a-z_]+)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads /metrics and returns its cg_ series.
func scrape(t *testing.T, url string) []series {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %s %s\n%s", resp.Status, resp.Header.Get("Content-Type"), b)
	}
	var out []series
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := sampleLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsable /metrics line %q", line)
		}
		if !strings.HasPrefix(m[1], "cg_") {
			t.Fatalf("series %s is not named cg_...", m[1])
		}
		s := series{name: m[1], labels: map[string]string{}}
		for _, p := range labelPair.FindAllStringSubmatch(m[2], -1) {
			s.labels[p[1]] = p[2]
		}
		s.value, err = strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		out = append(out, s)
	}
	return out
}

func find(ss []series, name string, labels ...string) (series, bool) {
	for _, s := range ss {
		if s.name != name {
			continue
		}
		ok := true
		for i := 0; i+1 < len(labels); i += 2 {
			if s.labels[labels[i]] != labels[i+1] {
				ok = false
			}
		}
		if ok {
			return s, true
		}
	}
	return series{}, false
}

// TestMetrics: /metrics carries the cg_ series, each with exactly the
// labels stream, group, member and partition, and values that match the
// group's Info: pending per partition under its owner, instances and the
// pin per member, pin changes and rebalances counted.
func TestMetrics(t *testing.T) {
	f := newFixture(t, nil, "m1", "m2")
	f.join("m1")
	f.join("m1")
	f.start(nil, dashboard.Options{})
	f.publish(40) // m2 has no instance: its partitions keep their messages

	ctx := context.Background()
	var gi health.GroupInfo
	var ss []series
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Stable: Info agrees with the scrape on every partition's pending
		// and every member's instances.
		var err error
		gi, err = f.c.Info(ctx, cg.KindElastic, "ORDERS", "g")
		if err != nil {
			t.Fatal(err)
		}
		ss = scrape(t, f.web.URL)
		// and m1's first pin is in: its instances pull at once, but the
		// server pins one only on its first delivery.
		pin, _ := find(ss, "cg_member_pinned", "member", "m1")
		if metricsMatch(gi, ss) == "" && pin.value == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never matched Info (m1 pinned %v): %s", pin.value, metricsMatch(gi, ss))
		}
		time.Sleep(50 * time.Millisecond)
	}
	want := []string{"group", "member", "partition", "stream"}
	names := map[string]bool{}
	for _, s := range ss {
		names[s.name] = true
		var got []string
		for k := range s.labels {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%s has labels %v, want exactly %v", s.name, got, want)
		}
	}
	for _, n := range []string{"cg_partition_pending", "cg_partition_oldest_age_seconds", "cg_member_instances", "cg_member_pinned", "cg_pin_changes_total", "cg_rebalances_total"} {
		if !names[n] {
			t.Errorf("no %s series", n)
		}
	}
	p3, _ := find(ss, "cg_partition_pending", "partition", "3")
	if p3.labels["member"] != "m2" || p3.labels["stream"] != "ORDERS" || p3.labels["group"] != "g" {
		t.Errorf("partition 3 series %v, want owner m2 of ORDERS/g", p3.labels)
	}
	if age, ok := find(ss, "cg_partition_oldest_age_seconds", "partition", "3"); !ok || p3.value > 0 && age.value <= 0 {
		t.Errorf("partition 3 has %v pending but oldest age %v", p3.value, age.value)
	}
	if pin, _ := find(ss, "cg_member_pinned", "member", "m1"); pin.value != 1 {
		t.Errorf("m1 pinned %v, want 1", pin.value)
	}
	if pin, _ := find(ss, "cg_member_pinned", "member", "m2"); pin.value != 0 {
		t.Errorf("m2 pinned %v, want 0", pin.value)
	}
	if r, _ := find(ss, "cg_rebalances_total", "group", "g"); r.value != 0 || r.labels["member"] != "" || r.labels["partition"] != "" {
		t.Errorf("rebalances %v %v before any change", r.value, r.labels)
	}

	// A rebalance and a step-down are counted.
	if _, err := f.c.AddMembers(ctx, "ORDERS", "g", []string{"m3"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.StepDown(ctx, cg.KindElastic, "ORDERS", "g", "m1"); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		ss = scrape(t, f.web.URL)
		r, _ := find(ss, "cg_rebalances_total", "group", "g")
		pc, _ := find(ss, "cg_pin_changes_total", "member", "m1")
		owners := 0
		for _, s := range ss {
			if s.name == "cg_partition_pending" && s.labels["member"] == "m3" {
				owners++
			}
		}
		if r.value >= 1 && pc.value >= 2 && owners > 0 {
			break // the first pin and the step-down's unpin
		}
		if time.Now().After(deadline) {
			t.Fatalf("after add and step-down: rebalances %v, m1 pin changes %v, m3 partitions %d", r.value, pc.value, owners)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A partition has one pending series, under its current owner.
	for p := range 4 {
		n := 0
		for _, s := range ss {
			if s.name == "cg_partition_pending" && s.labels["partition"] == strconv.Itoa(p) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("partition %d has %d pending series, want 1", p, n)
		}
	}
}

// metricsMatch says how the scrape differs from Info, "" when it does not.
func metricsMatch(gi health.GroupInfo, ss []series) string {
	for _, pl := range gi.PartitionLag {
		s, ok := find(ss, "cg_partition_pending", "partition", strconv.Itoa(pl.Partition))
		if !ok || s.value != float64(pl.Pending) || s.labels["member"] != pl.Owner {
			return "partition " + strconv.Itoa(pl.Partition) + ": Info says " + strconv.FormatUint(pl.Pending, 10) + " pending, owner " + pl.Owner
		}
	}
	for _, ms := range gi.Members {
		if ms.Member == "m1" && !ms.Pinned {
			return "m1 not pinned yet"
		}
		s, ok := find(ss, "cg_member_instances", "member", ms.Member)
		want := ms.Standbys
		if ms.Pinned {
			want++
		}
		if !ok || s.value != float64(want) || want == 0 && ms.Member == "m1" {
			return "member " + ms.Member + ": Info says " + strconv.Itoa(want) + " instances"
		}
	}
	return ""
}
