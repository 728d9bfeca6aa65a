package cg

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// CodePoisonParked is the check finding for a member holding a parked
// poison message (warning): its key stops until the message is released.
const CodePoisonParked = "poison-parked"

// RemedyReleaseParked: release Member's parked messages (retry them once
// more, or skip them to the dead-letter subject).
const RemedyReleaseParked RemedyCode = "release-parked"

// checkPoison warns on every member of t holding parked messages: the
// messages of their keys wait for a release. A group whose members never
// had a poison message (or a server without the poison bucket) has nothing
// to report.
func (r *checkRun) checkPoison(ctx context.Context, t checkTarget) []Finding {
	if ValidateName("stream", t.stream) != nil || ValidateName("group", t.group) != nil {
		// A name only the reference stores (with '.'): no cg member with
		// a retry policy can run in it, so nothing can be parked.
		return nil
	}
	rep, err := r.c.Poison(ctx, Kind(t.kind), t.stream, t.group)
	if err != nil {
		return []Finding{{Severity: SeverityUnknown, Code: CodeCheckFailed,
			Message: "cannot read the group's parked messages: " + err.Error(), Hint: "check the connection and the permissions on KV bucket " + PoisonBucket}}
	}
	var out []Finding
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
			w := "sequence " + strconv.FormatUint(p.Sequence, 10) + " (" + p.Subject
			if p.Key != "" {
				w += ", key " + p.Key
			}
			w += fmt.Sprintf(", %s", plural(p.Deliveries, "delivery", "deliveries"))
			if p.Release != "" {
				w += ", " + p.Release + " asked"
			}
			what = append(what, w+")")
		}
		slices.Sort(parts)
		rem := t.remedy(RemedyReleaseParked)
		rem.Member = mp.Member
		hint := "fix what makes the handler fail, then release the member's parked messages (retry, or skip them to the dead-letter subject)"
		out = append(out, Finding{Severity: SeverityWarning, Code: CodePoisonParked, Member: mp.Member, Partitions: parts,
			Pending: uint64(len(mp.Parked)),
			Message: fmt.Sprintf("member %s has %s parked, its key waiting: %s", mp.Member, plural(uint64(len(mp.Parked)), "poison message", "poison messages"), strings.Join(what, "; ")),
			Hint:    hint, Remedy: rem})
	}
	return out
}
