// Package partition is the pure partition math of cg: the FNV-1a hash and
// partition of a key or subject as the NATS server's {{partition()}}
// subject transform computes them, the balanced and mapped assignment of
// partitions to members (bit for bit the reference implementation's), the
// consumer filters of a member, the minimal-move mappings and the move plan
// of a membership change, and the parsing and rendering of partition
// transforms, mappings and partition ranges.
//
// It imports nothing from NATS (pkg/cg's TestLayers checks that), so it is
// fast to test and safe to use anywhere. The engine (package cg) builds on
// it and keeps aliases and wrappers of every name it exported before;
// cmd/partition and the other commands use it directly.
package partition
