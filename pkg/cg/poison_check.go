package cg

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
)

// Check's part for poison messages: a parked message holds its key (and a
// serial member as a whole) until someone releases it, so each member with
// one gets a warning.

// CodeParkedMessage is the Check finding for a member with parked
// messages (warning): their keys wait for a release.
const CodeParkedMessage = "parked-message"

// RemedyReleaseParked: release the member's parked messages (Remedy.Member)
// once their cause is fixed, to retry them or skip them to the dead-letter
// subject.
const RemedyReleaseParked health.RemedyCode = "release-parked"

// poisonFindings are the parked-message warnings of one group. A poison
// bucket that is missing or cannot be read gives none: the rest of the
// check does not depend on it.
func (r *checkRun) poisonFindings(ctx context.Context, t checkTarget) []health.Finding {
	rep, err := r.c.Poison(ctx, t.kind, t.stream, t.group)
	if err != nil {
		return nil
	}
	var fs []health.Finding
	for _, mp := range rep.Members {
		if len(mp.Parked) == 0 {
			continue
		}
		var parts []int
		var what []string
		for _, p := range mp.Parked {
			if !slices.Contains(parts, p.Partition) {
				parts = append(parts, p.Partition)
			}
			w := fmt.Sprintf("sequence %d (subject %s", p.Sequence, p.Subject)
			if p.Key != "" {
				w += ", key " + p.Key
			}
			w += fmt.Sprintf(", partition %d, %s", p.Partition, plural(p.Deliveries, "delivery", "deliveries"))
			if p.Error != "" {
				w += ": " + p.Error
			}
			w += ")"
			if p.Release != "" {
				w += ", " + p.Release + " requested"
			}
			what = append(what, w)
		}
		slices.Sort(parts)
		fs = append(fs, health.Finding{Severity: health.SeverityWarning, Code: CodeParkedMessage, Member: mp.Member, Partitions: parts,
			Pending: uint64(len(mp.Parked)),
			Message: fmt.Sprintf("member %s has %s parked: %s; %s until released",
				mp.Member, plural(uint64(len(mp.Parked)), "poison message", "poison messages"), strings.Join(what, "; "),
				map[bool]string{true: "its key waits", false: "their keys wait"}[len(mp.Parked) == 1]),
			Hint:   "fix the cause, then release the parked messages: retry them once more, or skip them to the dead-letter subject",
			Remedy: &health.Remedy{Code: RemedyReleaseParked, Kind: t.kind.String(), Stream: t.stream, Group: t.group, Member: mp.Member}})
	}
	return fs
}
