package chaos

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"
)

// printReport prints every scenario's figures as one table (seen with
// go test -v, or when the package fails).
func printReport(buildTook time.Duration) {
	reportsMu.Lock()
	defer reportsMu.Unlock()
	if len(reports) == 0 {
		return
	}
	race := "race-built"
	if !raceBuilt {
		race = "built without -race"
	}
	ttl := "pinned TTL via --ack-wait"
	if hasPinnedTTL {
		ttl = "pinned TTL via --pinned-ttl"
	}
	fmt.Printf("\nchaos: cg %s in %v, %s\n", race, buildTook.Round(100*time.Millisecond), ttl)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "scenario\tmsgs\tlost\tvouched\torder\tjitter\tdups\tbound\tgap med\tgap max\tgaps\tflaps\tpin changes\tother\ttook")
	for _, rp := range reports {
		r := rp.r
		med, mx := medianMax(r.gaps)
		fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t%d\t%d\t%d\t%s\t%v\n", rp.scenario, r.published, len(r.lost), len(r.vouched),
			len(r.violations), r.jitter, r.dups, r.bound, med.Round(time.Millisecond), mx.Round(time.Millisecond), len(r.gaps),
			len(r.flaps), r.pinChanges, rp.extra, rp.took.Round(100*time.Millisecond))
	}
	w.Flush()
}
