package cg

import (
	"fmt"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// workStreamJoinProblem refuses to start a member on a work stream that is
// the group's (marked for it) but no longer sources the group's stream
// through the group's transforms: with another partition count, members
// would serve only the partitions the stored configuration names and the
// others would fill up unconsumed; with another source they would consume
// the wrong messages. Re-running the group's create repairs it in place.
func workStreamJoinProblem(si *jetstream.StreamInfo, stream, group string, cfg ElasticConfig) error {
	want := ElasticTransforms(cfg)
	srcs := si.Config.Sources
	if len(srcs) == 1 && srcs[0] != nil && srcs[0].Name == stream && srcs[0].FilterSubject == "" && sameTransforms(srcs[0].SubjectTransforms, want) {
		return nil
	}
	have := sourcesString(srcs)
	filters := make([]string, 0, len(cfg.PartitioningFilters))
	for _, pf := range cfg.PartitioningFilters {
		filters = append(filters, pf.String())
	}
	if len(filters) == 0 {
		filters = append(filters, ">")
	}
	return &health.Error{Err: ErrStreamNotReady,
		Fix: fmt.Sprintf("re-run the group's create with max members %d and filters %s (it repairs the work stream), or delete and recreate the group", cfg.MaxMembers, strings.Join(filters, " ")),
		Remedy: health.Remedy{Code: health.RemedyRepairWorkStreamJoin, Kind: KindElastic.String(), Stream: stream, Group: group, MaxMembers: cfg.MaxMembers, Filters: filters,
			Lead: fmt.Sprintf("%v: work stream %s of elastic group %q sources %s, but the group's configuration gives %s through %s: members would serve only part of what it holds, the rest never; ",
				ErrStreamNotReady, si.Config.Name, group, have, stream, formatTransforms(want))}}
}

// remadeWorkStream is what a create over a stored group reports when it
// had to make the lost work stream again.
func remadeWorkStream(stream string) string {
	return fmt.Sprintf("missing, remade (it sources %s from its start: messages already handled come again)", stream)
}

// foreignWorkStream reports a stream named like a group's work stream that
// is plainly something else: marked for another group, or not a work-queue
// stream sourcing stream alone. info refuses to show such a stream's
// messages as the group's; a work stream that is the group's in all but its
// transforms is still shown (check reports the drift).
func foreignWorkStream(si *jetstream.StreamInfo, stream string) bool {
	if isMarked(si.Config.Metadata) {
		return true // WorkStreamOwned said it is marked, and not for this group
	}
	srcs := si.Config.Sources
	return si.Config.Retention != jetstream.WorkQueuePolicy || len(srcs) != 1 || srcs[0] == nil || srcs[0].Name != stream
}
