package chaos

import (
	"fmt"
	"os"
	"slices"
	"strings"
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
	printResumes()
}

// printResumes prints, per layout, kind and fault, how long the disrupted
// instance's pins took to be handled again (takeover): one figure per
// disruption on the member layout, one per partition the instance held on
// the partition layout. raw is from the fault whatever the traffic.
func printResumes() {
	type row struct{ layout, kind, fault string }
	var rows []row
	took, raw := map[row][]time.Duration{}, map[row][]time.Duration{}
	scen := map[row][]string{}
	for _, rp := range reports {
		for _, r := range rp.resumes {
			k := row{rp.layout, rp.kind, r.fault}
			if _, ok := took[k]; !ok {
				rows = append(rows, k)
			}
			took[k] = append(took[k], r.took)
			raw[k] = append(raw[k], r.raw)
			if !slices.Contains(scen[k], rp.scenario) {
				scen[k] = append(scen[k], rp.scenario)
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Printf("\nresume after each fault (per partition held on the partition layout, limit %v)\n", failoverLimit)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "layout\tkind\tfault\tn\tmin\tmedian\tmax\traw median\traw max\tscenarios")
	for _, k := range rows {
		med, mx := medianMax(took[k])
		rmed, rmx := medianMax(raw[k])
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%v\t%v\t%v\t%v\t%v\t%s\n", k.layout, k.kind, k.fault, len(took[k]), slices.Min(took[k]).Round(time.Millisecond),
			med.Round(time.Millisecond), mx.Round(time.Millisecond), rmed.Round(time.Millisecond), rmx.Round(time.Millisecond), strings.Join(scen[k], ","))
	}
	w.Flush()
}
