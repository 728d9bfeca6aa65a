package health

// Severity grades a health-check finding.
type Severity string

// Severities, from harmless to grave. SeverityUnknown marks a part that
// could not be checked at all.
const (
	SeverityOK       Severity = "ok"
	SeverityWarning  Severity = "warning"
	SeverityUnknown  Severity = "unknown"
	SeverityCritical Severity = "critical"
)

// rank orders severities: critical is graver than unknown (a fault that is
// certain), and unknown graver than warning (what could not be checked
// may hide a critical fault).
func (s Severity) rank() int {
	switch s {
	case SeverityWarning:
		return 1
	case SeverityUnknown:
		return 2
	case SeverityCritical:
		return 3
	default:
		return 0
	}
}

// Worse returns the graver of s and o.
func (s Severity) Worse(o Severity) Severity {
	if o.rank() > s.rank() {
		return o
	}
	if s == "" {
		return SeverityOK
	}
	return s
}

// Finding codes: stable identifiers that scripts may match on.
const (
	// Server.
	CodeServerTooOld = "server-too-old" // critical: the server lacks a feature the group needs
	// Where a group lives.
	CodeStreamMissing = "stream-missing" // critical: the group's stream is gone
	CodeGroupMissing  = "group-missing"  // critical: no stored configuration for the group asked for
	CodeConfigInvalid = "config-invalid" // critical: the stored configuration does not parse or validate
	// Static groups: the stream's partitioning transform.
	CodeStreamNotPartitioned     = "stream-not-partitioned"     // critical: no {{partition(N,...)}} transform
	CodeStreamPartitionsMismatch = "stream-partitions-mismatch" // critical: N differs from max_members
	CodeStreamFilterMismatch     = "stream-filter-mismatch"     // critical: a group filter matches nothing the transform produces
	// Elastic groups: the work-queue stream.
	CodeWorkStreamMissing     = "work-stream-missing"      // critical
	CodeWorkStreamDrift       = "work-stream-drift"        // critical: source, transforms or retention differ from the config
	CodeWorkStreamSourceError = "work-stream-source-error" // critical: the server reports an error sourcing the origin
	// Partitions and members.
	CodePartitionUnowned  = "partition-unowned"  // critical: no member owns the partitions (warning: an elastic group with nothing waiting yet)
	CodePartitionUnserved = "partition-unserved" // critical: a member without a live instance has messages waiting
	CodeMemberNoInstance  = "member-no-instance" // warning: a member has no live instance, nothing waits for it
	// Member consumers.
	CodeConsumerFilterDrift   = "consumer-filter-drift"   // critical: filters differ from what the config gives the member
	CodeConsumerPriorityDrift = "consumer-priority-drift" // critical: not pinned in priority group PCG
	CodeConsumerLeftover      = "consumer-leftover"       // warning: a group-named consumer that belongs to no member
	// The check itself.
	CodeCheckFailed = "check-failed" // unknown: a request failed, so part of the group was not checked
)

// Finding is one problem Check found, with a hint of the fix.
type Finding struct {
	Severity Severity `json:"severity"`
	Code     string   `json:"code"`
	// Kind, Stream and Group say where: empty Group for a stream-wide
	// finding, empty Stream for a server-wide one.
	Kind       string `json:"kind,omitempty"`
	Stream     string `json:"stream,omitempty"`
	Group      string `json:"group,omitempty"`
	Member     string `json:"member,omitempty"`
	Consumer   string `json:"consumer,omitempty"`
	Partitions []int  `json:"partitions,omitempty"`
	// Pending is the number of messages waiting, when known.
	Pending uint64 `json:"pending,omitempty"`
	Message string `json:"message"`
	// Hint words the fix without naming any command line; Remedy, when
	// set, is the same fix as data, for a front end to word in its own
	// commands.
	Hint   string  `json:"hint,omitempty"`
	Remedy *Remedy `json:"-"`
	// Cause is the engine error Message was made from, when there is one
	// (an *Error in it words its own fix).
	Cause error `json:"-"`
}

// CheckedGroup is a group Check looked at, with its worst finding.
type CheckedGroup struct {
	Kind   string   `json:"kind"`
	Stream string   `json:"stream"`
	Group  string   `json:"group"`
	Status Severity `json:"status"`
}

// CheckReport is what Check found.
type CheckReport struct {
	// ServerVersion is the connected server's version ("" when unknown).
	ServerVersion string         `json:"server_version"`
	Groups        []CheckedGroup `json:"groups"`
	Findings      []Finding      `json:"findings"`
}

// Status is the worst severity among the findings; SeverityOK when none.
func (r CheckReport) Status() Severity {
	s := SeverityOK
	for _, f := range r.Findings {
		s = s.Worse(f.Severity)
	}
	return s
}

// Count is the number of findings of severity s.
func (r CheckReport) Count(s Severity) int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity == s {
			n++
		}
	}
	return n
}

// Findings about what the server cannot serve at all, whatever is running.
const (
	// CodePartitionCeiling: critical, the group has more partitions (or a
	// member more filter subjects) than MaxPartitions, so cg starts none of
	// its members.
	CodePartitionCeiling = "partition-ceiling"
	// CodeMemberUnusable: critical, a member's consumer name is one the
	// server refuses, so its partitions can never be consumed.
	CodeMemberUnusable = "member-unusable"
)

// CodeWorkStreamNotOwned: critical, the stream named like the group's work
// stream is not one cg (or the reference) made for the group: cg neither
// consumes nor deletes it, so deleting and recreating the group cannot help.
const CodeWorkStreamNotOwned = "work-stream-not-owned"

// CodeWorkStreamSettings: warning, the work stream's caps, discard policy,
// replicas or direct get differ from what the group gives it; re-running
// create repairs them in place.
const CodeWorkStreamSettings = "work-stream-settings"

// CodeStreamSubjectsUnstamped: critical, some subjects a static group's
// filters select are stored without a partition token, so no member sees
// them.
const CodeStreamSubjectsUnstamped = "stream-subjects-unstamped"
