package group

// What info, member-info and watch show of poison messages (consume's
// retry policy): dead-lettered and parked counts per member and partition,
// and the parked messages with their keys. Nothing is added, in text or
// JSON, while a group has none, so the views of groups without a retry
// policy are as they were.

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// PartitionPoisonView is one partition's poison counts in info and watch --json.
type PartitionPoisonView struct {
	Partition    int    `json:"partition"`
	Member       string `json:"member"`
	DeadLettered uint64 `json:"dead_lettered"`
	Parked       int    `json:"parked"`
}

// hasPoison says whether a report has anything to show.
func hasPoison(rep cg.PoisonReport) bool {
	dl, parked := rep.Totals()
	return dl > 0 || parked > 0
}

// poisonPartitions lists the partitions with poison counts, by partition.
func poisonPartitions(rep cg.PoisonReport) []PartitionPoisonView {
	var out []PartitionPoisonView
	for _, mp := range rep.Members {
		for _, pp := range mp.Partitions {
			if pp.DeadLettered == 0 && pp.Parked == 0 {
				continue
			}
			out = append(out, PartitionPoisonView{Partition: pp.Partition, Member: mp.Member, DeadLettered: pp.DeadLettered, Parked: pp.Parked})
		}
	}
	sortPartitionPoison(out)
	return out
}

func sortPartitionPoison(ps []PartitionPoisonView) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && (ps[j].Partition < ps[j-1].Partition || (ps[j].Partition == ps[j-1].Partition && ps[j].Member < ps[j-1].Member)); j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

// memberPoisonFields fills a member view's poison fields from the report.
func memberPoisonFields(rep cg.PoisonReport, member string) (uint64, []ParkedView) {
	mp, ok := rep.Member(member)
	if !ok {
		return 0, nil
	}
	var parked []ParkedView
	for _, p := range mp.Parked {
		parked = append(parked, parkedView(p))
	}
	return mp.DeadLettered, parked
}

// withPoison adds the report to info --json.
func withPoison(v GroupInfoView, rep cg.PoisonReport) GroupInfoView {
	if !hasPoison(rep) {
		return v
	}
	for i := range v.Members {
		v.Members[i].DeadLettered, v.Members[i].Parked = memberPoisonFields(rep, v.Members[i].Member)
	}
	v.PoisonPartitions = poisonPartitions(rep)
	return v
}

// snapshotWithPoison adds the report to a watch --json line.
func snapshotWithPoison(v SnapshotView, rep cg.PoisonReport) SnapshotView {
	if !hasPoison(rep) {
		return v
	}
	for i := range v.Members {
		v.Members[i].DeadLettered, v.Members[i].Parked = memberPoisonFields(rep, v.Members[i].Member)
	}
	v.PoisonPartitions = poisonPartitions(rep)
	return v
}

// poisonLine sums a report up for info's and watch's header: "2
// dead-lettered, 1 parked; by partition (partition:dead-lettered/parked):
// 3:2/0 7:0/1", each partition in its member's color.
func poisonLine(cs *render.ColorScheme, rep cg.PoisonReport) string {
	dl, parked := rep.Totals()
	s := fmt.Sprintf("%d dead-lettered, %d parked", dl, parked)
	if parked > 0 {
		s = fmt.Sprintf("%d dead-lettered, %s", dl, cs.Yellow(fmt.Sprintf("%d parked", parked)))
	}
	var cells []string
	for _, p := range poisonPartitions(rep) {
		cells = append(cells, cs.MemberColor(p.Member)(fmt.Sprintf("%d:%d/%d", p.Partition, p.DeadLettered, p.Parked)))
	}
	if len(cells) > 0 {
		s += "; by partition (partition:dead-lettered/parked): " + strings.Join(cells, " ")
	}
	return s
}

// memberPoisonCells are a member's DEAD-LETTERED and PARKED cells.
func memberPoisonCells(cs *render.ColorScheme, rep cg.PoisonReport, member string) []string {
	mp, _ := rep.Member(member)
	parked := strconv.Itoa(len(mp.Parked))
	if len(mp.Parked) > 0 {
		parked = cs.Yellow(parked)
	}
	return []string{strconv.FormatUint(mp.DeadLettered, 10), parked}
}

// renderParked lists the parked messages and how to let them go; nothing
// when none is parked.
func renderParked(w io.Writer, cs *render.ColorScheme, k cg.Kind, stream, group string, rep cg.PoisonReport, now time.Time) {
	var rows [][]string
	var members []string
	for _, mp := range rep.Members {
		if len(mp.Parked) > 0 {
			members = append(members, mp.Member)
		}
		for _, p := range mp.Parked {
			key := p.Key
			if key == "" {
				key = "-"
			}
			release := "-"
			if p.Release != "" {
				release = p.Release + " asked"
			}
			errText := p.Error
			if errText == "" {
				errText = strings.ReplaceAll(p.Reason, "_", " ")
			}
			rows = append(rows, []string{cs.Member(mp.Member), strconv.Itoa(p.Partition), strconv.FormatUint(p.Sequence, 10), p.Subject, key,
				strconv.FormatUint(p.Deliveries, 10), FormatAge(now.Sub(p.ParkedAt)), release, errText})
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, cs.Yellow("Parked messages")+" (their keys wait for a release):")
	t := render.NewTable(w, "MEMBER", "PARTITION", "SEQ", "SUBJECT", "KEY", "DELIVERIES", "PARKED FOR", "RELEASE", "ERROR")
	for _, r := range rows {
		t.AddRow(r...)
	}
	_ = t.Render()
	for _, m := range members {
		fmt.Fprintf(w, "%s\n", cs.Faint(fmt.Sprintf("release: cg %s release %s %s %s [--seq N] (retry once more; --skip dead-letters it)", k, stream, group, m)))
	}
}

// readPoison reads the group's poison report for a view; one that cannot
// be read is a warning on stderr, and the view goes on without it.
func readPoison(ctx context.Context, c *cg.Client, k cg.Kind, stream, group string, errOut io.Writer) cg.PoisonReport {
	rep, err := c.Poison(ctx, k, stream, group)
	if err != nil {
		fmt.Fprintf(errOut, "warning: dead-lettered and parked messages unknown: %s\n", hints.Error(err))
		return cg.PoisonReport{}
	}
	return rep
}

// renderWatchPoison is watch's poison block under a snapshot: the counts
// per member and partition and the parked messages; nothing when the group
// has none.
func renderWatchPoison(w io.Writer, cs *render.ColorScheme, k cg.Kind, stream, group string, rep cg.PoisonReport, now time.Time) {
	if !hasPoison(rep) {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Poison: %s\n", poisonLine(cs, rep))
	var parts []string
	for _, mp := range rep.Members {
		cells := memberPoisonCells(cs, rep, mp.Member)
		parts = append(parts, fmt.Sprintf("%s %s dead-lettered, %s parked", cs.Member(mp.Member), cells[0], cells[1]))
	}
	fmt.Fprintf(w, "  by member: %s\n", strings.Join(parts, "; "))
	renderParked(w, cs, k, stream, group, rep, now)
}

// poisonSampler reads the poison report for watch at most once per every:
// each read lists the group's keys in the poison bucket (an ordered
// consumer on the server), too much for every sample of a fast watch.
type poisonSampler struct {
	every time.Duration
	at    time.Time
	rep   cg.PoisonReport
}

func (p *poisonSampler) read(ctx context.Context, c *cg.Client, k cg.Kind, stream, group string, errOut io.Writer) cg.PoisonReport {
	if !p.at.IsZero() && time.Since(p.at) < p.every {
		return p.rep
	}
	p.rep, p.at = readPoison(ctx, c, k, stream, group, errOut), time.Now()
	return p.rep
}
