// Package health holds the plain data of cg's observation of a group:
//
//   - what a group looks like when observed (GroupConfig, GroupInfo,
//     MemberStatus, Lag, PartitionLag), which cg's info calls fill in by
//     reading the server;
//   - the watch sampler (Sampler, Snapshot, PartitionStatus, PinEvent),
//     which turns successive GroupInfos into a live view with rates and a
//     status per partition and member, by rules that need no thresholds;
//   - what a check found wrong (Finding, CheckReport, Severity, the codes)
//     and the typed remedy that goes with it, so that an embedder (or the
//     cg command line) can word the fix in its own terms.
//
// It is a leaf: it imports nothing of cg but the pure partition package,
// and no NATS. What needs a connection (reading lag and member state,
// subscribing to pin advisories, running a check) stays in cg, whose
// methods return these types under this package's names only.
package health
