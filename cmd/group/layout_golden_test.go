package group_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/internal/clitest"
)

// A partition-layout group through ls, info and member-info: the layout
// shows, and so does each partition's consumer with its pin.
func TestGoldenStaticPartitionLayout(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "m2", "--layout", "partition")
	e.mustRun("static", "create", "balanced", "ORDERS", "h", "4", "m1")
	e.publishPerPartition(4, 2)

	goldenOut(t, "static-ls-layouts", e.mustRun("static", "ls", "ORDERS"))
	goldenOut(t, "static-info-partition-layout-unpinned", e.mustRun("static", "info", "ORDERS", "g"))

	e.joinAll("static", "ORDERS", "g", "m1", "m2")
	clitest.Eventually(t, 20*time.Second, "every partition consumer pinned, nothing pending", func() bool {
		r := e.mustRun("static", "info", "ORDERS", "g", "--json")
		var v struct {
			Members []struct {
				PartitionConsumers []struct {
					Pinned     bool `json:"pinned"`
					Pending    int  `json:"pending"`
					AckPending int  `json:"ack_pending"`
				} `json:"partition_consumers"`
			} `json:"members"`
		}
		_ = json.Unmarshal([]byte(r.Out), &v)
		n := 0
		for _, m := range v.Members {
			for _, pc := range m.PartitionConsumers {
				if !pc.Pinned || pc.Pending+pc.AckPending > 0 {
					return false
				}
				n++
			}
		}
		return n == 4
	})
	goldenOut(t, "static-info-partition-layout-pinned", e.mustRun("static", "info", "ORDERS", "g"))
	goldenOut(t, "static-member-info-partition-layout", e.mustRun("static", "member-info", "ORDERS", "g", "m1"))
	// watch and check read a partition-layout group too.
	if r := e.mustRun("static", "watch", "ORDERS", "g", "--count", "1"); !strings.Contains(r.Out, "m1") {
		t.Fatalf("watch: %s", r.Out)
	}
	r := e.mustRun("static", "ls", "ORDERS", "--json")
	var ls []struct {
		Group  string `json:"group"`
		Layout string `json:"layout"`
	}
	if err := json.Unmarshal([]byte(r.Out), &ls); err != nil || len(ls) != 2 || ls[0].Layout != "partition" || ls[1].Layout != "" {
		t.Fatalf("ls --json: %s (%v)", r.Out, err)
	}
}

// consume --json on a partition-layout group: each partition consumer is
// pinned on its own, and each "pinned" line names its one partition, so
// that a reader of the output can tell which pin is which partition's.
func TestCLIConsumeJSONPartitionPins(t *testing.T) {
	e := newEnv(t, 4)
	e.mustRun("static", "create", "balanced", "ORDERS", "g", "4", "m1", "--layout", "partition")
	e.publishPerPartition(4, 2)
	r := e.mustRun("static", "consume", "ORDERS", "g", "m1", "--count", "8", "--sleep", "0s", "--json")
	pinOf := map[int]string{}
	for _, l := range clitest.Lines(t, r.Out) {
		if l["type"] != "event" || l["event"] != "pinned" {
			continue
		}
		parts, _ := l["partitions"].([]any)
		if len(parts) != 1 {
			t.Fatalf("pinned line names partitions %v, want exactly one: %v", l["partitions"], l)
		}
		k := int(parts[0].(float64))
		if _, dup := pinOf[k]; dup {
			t.Fatalf("partition %d pinned twice: %s", k, r.Out)
		}
		pinOf[k], _ = l["pin_id"].(string)
	}
	if len(pinOf) != 4 {
		t.Fatalf("pinned lines for partitions %v, want 0-3:\n%s", pinOf, r.Out)
	}
	for _, l := range clitest.Lines(t, r.Out) {
		if l["type"] == "msg" {
			if k := int(l["partition"].(float64)); l["pin_id"] != pinOf[k] {
				t.Errorf("message of partition %d under pin %v, its pinned line said %s", k, l["pin_id"], pinOf[k])
			}
		}
	}
}
