package cg

import (
	"fmt"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// workStreamFindings reports a work stream that is missing or is not the
// group's, with a hint cg itself will follow: create remakes a missing
// work stream only under the partition ceiling, and neither delete nor
// create touches a stream cg did not make for the group. ok is false when
// the caller should look no further at the stream.
func workStreamFindings(t checkTarget, cfg ElasticConfig, ws *checkedStream) (out []health.Finding, ok bool) {
	wsName := WorkStreamName(t.stream, t.group)
	if ws.missing {
		hint, remedy := "run the group's create again (it remakes a lost work stream), or delete and recreate the group", t.remedy(health.RemedyRemakeWorkStream)
		remedy.MaxMembers = cfg.MaxMembers
		if cfg.PartitionCount() > MaxPartitions {
			out = append(out, limitFindings(t, cfg)...)
			hint = fmt.Sprintf("delete the group and create it again with at most %d partitions", MaxPartitions)
			remedy = t.recreate("", fmt.Sprintf(" with at most %d partitions", MaxPartitions))
		}
		return append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeWorkStreamMissing,
			Message: fmt.Sprintf("work stream %s is missing: nothing is sourced from %s and no member can consume", wsName, t.stream),
			Hint:    hint, Remedy: remedy}), false
	}
	if owned, why := WorkStreamOwned(ws.info, t.stream, t.group, &cfg); !owned {
		return []health.Finding{{Severity: health.SeverityCritical, Code: health.CodeWorkStreamNotOwned,
			Message: fmt.Sprintf("stream %s exists but was not made by cg for elastic group %q on %s (%s): cg neither consumes nor deletes it, so the group takes in nothing", wsName, t.group, t.stream, why),
			Hint:    "delete the group (which keeps the stream) and create it under another name, or remove the stream if it is not needed and re-run the group's create",
			Remedy:  t.remedy(health.RemedyWorkStreamNotOwned)}}, false
	}
	return nil, true
}

// workStreamSettingsFindings reports the cg-managed settings of an owned
// work stream that drifted and that workStreamDrift does not already
// report (retention, sources), with create's repair as the hint.
func workStreamSettingsFindings(t checkTarget, cfg ElasticConfig, origin, ws *jetstream.StreamInfo) []health.Finding {
	diffs, fixable := workStreamSettingsDrift(ws.Config, workStreamConfig(origin, t.stream, t.group, cfg))
	var keep []string
	for _, d := range diffs {
		if !strings.HasPrefix(d, "retention ") && !strings.HasPrefix(d, "sources ") {
			keep = append(keep, d)
		}
	}
	if len(keep) == 0 {
		return nil
	}
	hint, remedy := "re-run the group's create with its filters and caps: it repairs them in place", t.remedy(health.RemedyRepairWorkStreamSettings)
	remedy.MaxMembers = cfg.MaxMembers
	if !fixable {
		hint = "these cannot change in place: delete the group and create it again"
		remedy = t.recreate("these cannot change in place: ", "")
	}
	return []health.Finding{{Severity: health.SeverityWarning, Code: health.CodeWorkStreamSettings,
		Message: fmt.Sprintf("work stream %s differs from what the group gives it: %s", ws.Config.Name, strings.Join(keep, ", ")),
		Hint:    hint, Remedy: remedy}}
}
