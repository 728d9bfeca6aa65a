// Package hints words the engine's typed remedies as cg command lines.
// The engine (pkg/cg) says what is wrong and what kind of fix it takes,
// without naming any command; the CLI's wording of each fix lives here, so
// what a user of the cg binary reads names the commands to run.
package hints

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/health"
)

// Remedy words r as the cg command line that makes the fix. It returns
// fallback (the engine's wording) for a nil remedy or one it does not know.
func Remedy(r *health.Remedy, fallback string) string {
	if r == nil {
		return fallback
	}
	switch r.Code {
	case health.RemedyListGroups:
		return fmt.Sprintf("list the groups with 'cg static ls %s' and 'cg elastic ls %s'", r.Stream, r.Stream)
	case health.RemedyRecreateStreamOrDelete:
		return fmt.Sprintf("recreate the stream, or remove the group with 'cg %s delete %s %s --force'", r.Kind, r.Stream, r.Group)
	case health.RemedyRecreateInvalidConfig:
		return fmt.Sprintf("delete it with 'cg %s delete %s %s --force' and create the group again", r.Kind, r.Stream, r.Group)
	case health.RemedyRecreateElastic:
		return recreateElastic(r)
	case health.RemedyPartitionLayout:
		return fmt.Sprintf("recreate the group with the partition layout, one single-filter consumer per partition ('cg %s delete %s %s --force', then 'cg %s create ... --layout partition'; docs/layouts.md)", r.Kind, r.Stream, r.Group, r.Kind)
	case health.RemedyRepairWorkStreamSources:
		return fmt.Sprintf("re-run the group's 'cg elastic create %s %s %d ...' (it repairs the work stream's sources), or %s", r.Stream, r.Group, r.MaxMembers, recreateElastic(r))
	case health.RemedyAddMembers:
		return fmt.Sprintf("add members with 'cg elastic add %s %s <member>...'", r.Stream, r.Group)
	case health.RemedyStaticNoMembers:
		return fmt.Sprintf("static membership never changes: delete and recreate the group with members ('cg static delete %s %s --force')", r.Stream, r.Group)
	case health.RemedyStartMember:
		return fmt.Sprintf("start an instance: cg %s consume %s %s %s", r.Kind, r.Stream, r.Group, r.Member)
	case health.RemedyDeleteAndCreate:
		return r.Lead + fmt.Sprintf("delete the group ('cg %s delete %s %s --force') and create it again", r.Kind, r.Stream, r.Group) + r.Tail
	case health.RemedyRemakeWorkStream:
		return fmt.Sprintf("run the group's 'cg elastic create %s %s %d ...' again (it remakes a lost work stream), or delete and recreate the group", r.Stream, r.Group, r.MaxMembers)
	case health.RemedyWorkStreamNotOwned:
		return fmt.Sprintf("delete the group ('cg elastic delete %s %s --force', which keeps the stream) and create it under another name, or remove the stream if it is not needed and re-run the group's create", r.Stream, r.Group)
	case health.RemedyRepairWorkStreamSettings:
		return fmt.Sprintf("re-run the group's create ('cg elastic create %s %s %d ...' with its filters and caps): it repairs them in place", r.Stream, r.Group, r.MaxMembers)
	case cg.RemedyStartDynamicOrDrop:
		return fmt.Sprintf("start a dynamic instance of any member ('cg elastic consume %s %s <member> --dynamic'), which drops %s and hands its partitions to the running members, or drop it: cg elastic drop %s %s %s",
			r.Stream, r.Group, r.Member, r.Stream, r.Group, r.Member)
	case cg.RemedyReleaseParked:
		return fmt.Sprintf("fix what makes the handler fail, then retry the parked messages with 'cg %s release %s %s %s', or dead-letter them with 'cg %s release %s %s %s --skip'",
			r.Kind, r.Stream, r.Group, r.Member, r.Kind, r.Stream, r.Group, r.Member)
	case health.RemedyUpgradeServer:
		return fmt.Sprintf("upgrade the server to %d.%d or later; on %s, delete the group and create it again naming the wildcards to hash (elastic: --filter 'orders.*:1'; static: a stream transform {{partition(N,1)}}), since the same create fails on this server",
			cg.MinWholeSubjectPartition.Major, cg.MinWholeSubjectPartition.Minor, r.Server)
	}
	return fallback
}

func recreateElastic(r *health.Remedy) string {
	return fmt.Sprintf("delete and recreate the group ('cg elastic delete %s %s --force', then 'cg elastic create ...')", r.Stream, r.Group)
}

// Error is err's text with the fix of a *health.Error in it worded as cg
// command lines: what the CLI prints for an engine error.
func Error(err error) string {
	if err == nil {
		return ""
	}
	return Message(err.Error(), err)
}

// Message is msg, made from the engine error cause, with the engine's
// wording of cause's fix replaced by the cg command lines.
func Message(msg string, cause error) string {
	var re *health.Error
	if cause == nil || !errors.As(cause, &re) {
		return msg
	}
	cli, ok := errorFix(re.Remedy)
	if !ok {
		return msg
	}
	return strings.Replace(msg, re.Fix+re.Remedy.Tail, cli+re.Remedy.Tail, 1)
}

// errorFix words the fix of an engine error's remedy.
func errorFix(r health.Remedy) (string, bool) {
	switch r.Code {
	case health.RemedyMinimalOrDeleteMappings:
		return r.Op + " with --minimal to keep even shares with the fewest moves, or delete the mappings first (cg elastic delete-mapping)", true
	case health.RemedyDeleteGroup:
		return fmt.Sprintf("delete it ('cg %s delete %s %s')", r.Kind, r.Stream, r.Group), true
	case health.RemedyRecreateStreamAndGroup:
		return fmt.Sprintf("recreate the stream and the group (cg static create), or delete the group: cg static delete %s %s", r.Stream, r.Group), true
	case health.RemedyRestartMember:
		return fmt.Sprintf("start the member again (cg static consume %s %s %s)", r.Stream, r.Group, r.Member), true
	case health.RemedyRebuildWorkStream:
		return fmt.Sprintf("re-run `cg elastic create %s %s` with the group's partitions and filters (it rebuilds the work stream, re-sourcing %s from its start, so handled messages come again), or delete the group: cg elastic delete %s %s", r.Stream, r.Group, r.Stream, r.Stream, r.Group), true
	case health.RemedyRepairWorkStreamJoin:
		filters := make([]string, 0, len(r.Filters))
		for _, f := range r.Filters {
			filters = append(filters, "--filter '"+f+"'")
		}
		return fmt.Sprintf("re-run `cg elastic create %s %s %d %s` (it repairs the work stream), or delete and recreate the group", r.Stream, r.Group, r.MaxMembers, strings.Join(filters, " ")), true
	case health.RemedyStreamTransformExample:
		return "--transform-source 'orders.*' --transform-destination '{{partition(10,1)}}.orders.{{wildcard(1)}}'", true
	}
	return "", false
}

// Wrap words an engine error about a group for people, as the group verbs
// do: what went wrong and which command shows more.
func Wrap(err error, k cg.Kind, stream, group string) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, cg.ErrGroupNotFound):
		return fmt.Errorf("%w; list groups with 'cg %s ls %s'", err, k, stream)
	case errors.Is(err, cg.ErrMemberNotFound):
		return fmt.Errorf("%w; see 'cg %s info %s %s'", err, k, stream, group)
	}
	return err
}
