package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// Ownership. Server names are joined with '-', so different
// groups can land on one name, and a user's own stream or consumer may
// carry the name cg would use. cg therefore marks every stream and consumer
// it creates with metadata naming the group it belongs to, and adopts,
// changes or deletes only what is marked for that very group, or what is
// unmarked but has exactly the shape the reference library creates for the
// group (the reference writes no metadata).

// Metadata keys of cg's ownership marks. Others rely on these names.
const (
	MarkKind   = "cg.kind"   // the group's Kind
	MarkStream = "cg.stream" // the group's (origin) stream
	MarkGroup  = "cg.group"
	MarkMember = "cg.member" // consumers only
)

// Marks is the metadata cg puts on what it creates for a group: the work
// stream of an elastic group (member ""), or a member's consumer.
func Marks(kind Kind, stream, group, member string) map[string]string {
	md := map[string]string{MarkKind: kind.String(), MarkStream: stream, MarkGroup: group}
	if member != "" {
		md[MarkMember] = member
	}
	return md
}

// isMarked reports whether md carries any of cg's ownership marks.
func isMarked(md map[string]string) bool {
	for _, k := range []string{MarkKind, MarkStream, MarkGroup, MarkMember} {
		if _, ok := md[k]; ok {
			return true
		}
	}
	return false
}

// markedFor reports whether md marks exactly (kind, stream, group, member).
func markedFor(md map[string]string, kind Kind, stream, group, member string) bool {
	return md[MarkKind] == kind.String() && md[MarkStream] == stream && md[MarkGroup] == group && md[MarkMember] == member
}

// markOwner words whom md marks an object for.
func markOwner(md map[string]string) string {
	s := fmt.Sprintf("%s group %q on %q", md[MarkKind], md[MarkGroup], md[MarkStream])
	if m := md[MarkMember]; m != "" {
		s += fmt.Sprintf(" (member %q)", m)
	}
	if p := md[MarkPartition]; p != "" {
		s += fmt.Sprintf(" (partition %s)", p)
	}
	return s
}

// WorkStreamOwned decides whether si is elastic group's own work stream:
// marked for exactly (elastic, stream, group), or unmarked, work-queue,
// sourcing stream alone through exactly ElasticTransforms(*cfg), as the
// reference makes it. With cfg nil (a stored value that does not parse)
// only the marks count. When it is not, why says what it is instead.
func WorkStreamOwned(si *jetstream.StreamInfo, stream, group string, cfg *ElasticConfig) (owned bool, why string) {
	md := si.Config.Metadata
	if isMarked(md) {
		if markedFor(md, KindElastic, stream, group, "") {
			return true, ""
		}
		return false, "it is marked as made for " + markOwner(md)
	}
	if si.Config.Retention != jetstream.WorkQueuePolicy || len(si.Config.Sources) != 1 || si.Config.Sources[0] == nil || si.Config.Sources[0].Name != stream {
		return false, fmt.Sprintf("it is not a work-queue stream sourcing %s", stream)
	}
	if cfg == nil {
		return false, "its group's stored configuration cannot be read, and it carries no cg marks"
	}
	if !sameTransforms(si.Config.Sources[0].SubjectTransforms, ElasticTransforms(*cfg)) || si.Config.Sources[0].FilterSubject != "" {
		return false, fmt.Sprintf("it does not source %s through the group's partitioning transforms", stream)
	}
	return true, ""
}

// MemberConsumerOwned decides whether a consumer is member's own consumer
// in (kind, stream, group): marked for exactly that, or unmarked, in
// priority group PCG with policy pinned_client, and filtered to one of the
// given filter sets (the member's partitions as cg or the reference writes
// them).
func MemberConsumerOwned(cc jetstream.ConsumerConfig, kind Kind, stream, group, member string, forms ...[]string) (owned bool, why string) {
	if isMarked(cc.Metadata) {
		if markedFor(cc.Metadata, kind, stream, group, member) {
			return true, ""
		}
		return false, "it is marked as made for " + markOwner(cc.Metadata)
	}
	if !slices.Contains(cc.PriorityGroups, PriorityGroup) || cc.PriorityPolicy != jetstream.PriorityPolicyPinned {
		return false, "it is not a member consumer (priority group " + PriorityGroup + ", policy pinned_client)"
	}
	have := consumerFilters(cc)
	for _, f := range forms {
		if sameFilters(have, f) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("its filters %v are not member %q's partitions", have, member)
}

// staticForms are the filter sets a static member's consumer may have:
// cg's, and for mapped groups the reference's <p>.> form (it writes that
// whatever the group's filters).
func staticForms(cfg StaticConfig, member string) [][]string {
	forms := [][]string{cfg.MemberFilters(member)}
	if len(cfg.MemberMappings) > 0 {
		forms = append(forms, partition.PartitionFilters(cfg.Assignment().MemberPartitions(member), nil))
	}
	return forms
}

// groupConsumer reports whether a consumer on an elastic group's work
// stream belongs to the group, whatever member and partitions: marked for
// the group, or unmarked, pinned in PCG and filtered on partition tokens
// below n. Only those may be deleted as stale.
func groupConsumer(cc jetstream.ConsumerConfig, stream, group string, n int) bool {
	md := cc.Metadata
	if isMarked(md) {
		return md[MarkKind] == KindElastic.String() && md[MarkStream] == stream && md[MarkGroup] == group
	}
	if !slices.Contains(cc.PriorityGroups, PriorityGroup) || cc.PriorityPolicy != jetstream.PriorityPolicyPinned {
		return false
	}
	fs := consumerFilters(cc)
	for _, f := range fs {
		tok, _, _ := strings.Cut(f, ".")
		p, err := strconv.Atoi(tok)
		if err != nil || p < 0 || p >= n || strconv.Itoa(p) != tok {
			return false
		}
	}
	return len(fs) > 0
}

// notOwned is the refusal of an object cg did not make for the group.
func notOwned(object, name, owner, why, fix string) error {
	msg := fmt.Sprintf("%s %s exists but was not made by cg for %s (%s)", object, name, owner, why)
	if fix != "" {
		msg += "; " + fix
	}
	return described{msg, ErrNotOwned}
}

// badServerName reports an error saying a name cannot exist on the server
// (the client refuses it before asking): such a stream or consumer is
// simply not there. The reference stores member and group names the
// server cannot have (with '.', say).
func badServerName(err error) bool {
	return errors.Is(err, jetstream.ErrInvalidConsumerName) || errors.Is(err, jetstream.ErrInvalidStreamName)
}

// ValidateStoredGroupName checks a group name on paths that read or
// delete stored groups: the reference stores names cg would not create
// (with '.'; the KV key S.a.b is stream S, group a.b: stream names have no
// '.'), and those must stay usable. Each '.'-separated part must be a
// name ValidateName accepts.
func ValidateStoredGroupName(group string) error {
	if group == "" {
		return invalid("group name", `""`, "must not be empty")
	}
	for _, tok := range strings.Split(group, ".") {
		if err := ValidateName("group", tok); err != nil {
			return err
		}
	}
	return nil
}

// clash is another stored group that would use one of our server names.
type clash struct {
	ref  GroupRef
	name string // the shared server name
	what string // "consumer" or "work stream"
	rev  uint64 // the other group's KV revision
	ours string // our member behind name (static)
	its  string // its member behind name (static)
}

func (cl clash) error(kind Kind, stream, group string) error {
	detail := ""
	if cl.ours != "" {
		detail = fmt.Sprintf(" (member %q of %q, member %q of %q)", cl.ours, group, cl.its, cl.ref.Group)
	}
	fix := "rename the group"
	if cl.what == "consumer" {
		fix = "rename the group or the member"
	}
	return described{fmt.Sprintf("%s group %q on %q clashes with %s group %q on %q: both would use %s %q%s; %s",
		kind, group, stream, cl.ref.Kind, cl.ref.Group, cl.ref.Stream, cl.what, cl.name, detail, fix), ErrNameClash}
}

// staticClashes lists the other static groups on stream that would share
// a member consumer name with group's configuration cfg.
func (c *Client) staticClashes(ctx context.Context, stream, group string, cfg StaticConfig) ([]clash, error) {
	others, err := c.listGroups(ctx, KindStatic, stream)
	if err != nil && !errors.Is(err, ErrGroupNotFound) {
		return nil, err
	}
	ours := map[string]string{}
	for _, m := range cfg.MemberNames() {
		ours[StaticConsumerName(group, m)] = m
	}
	var out []clash
	for _, g := range others {
		// Only a group whose name is a '-'-prefix of ours, or ours of
		// its, can produce one of our names.
		if g == group || !(strings.HasPrefix(group+"-", g+"-") || strings.HasPrefix(g+"-", group+"-")) {
			continue
		}
		kv, err := c.bucket(ctx, StaticBucket)
		if err != nil {
			return nil, err
		}
		e, err := kv.Get(ctx, Key(stream, g))
		if err != nil {
			if isNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read group %s: %w", Key(stream, g), err)
		}
		var other StaticConfig
		_ = json.Unmarshal(e.Value(), &other) // an unparsable value still names what it can
		for _, m := range other.MemberNames() {
			name := StaticConsumerName(g, m)
			if mine, ok := ours[name]; ok {
				out = append(out, clash{ref: GroupRef{Kind: KindStatic.String(), Stream: stream, Group: g}, name: name, what: "consumer", rev: e.Revision(), ours: mine, its: m})
				break
			}
		}
	}
	return out, nil
}

// elasticClashes lists the other elastic groups whose work stream has
// group's work stream name.
func (c *Client) elasticClashes(ctx context.Context, stream, group string) ([]clash, error) {
	refs, err := c.ListGroups(ctx, KindElastic)
	if err != nil {
		return nil, err
	}
	ws := WorkStreamName(stream, group)
	var out []clash
	for _, r := range refs {
		if (r.Stream != stream || r.Group != group) && WorkStreamName(r.Stream, r.Group) == ws {
			out = append(out, clash{ref: r, name: ws, what: "work stream"})
		}
	}
	return out, nil
}

// checkStaticConsumers refuses a static create when one of its member
// consumers exists on the stream and is not that member's.
func (c *Client) checkStaticConsumers(ctx context.Context, stream, group string, cfg StaticConfig) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("look up stream %q: %w", stream, err)
	}
	want := map[string]string{}
	for _, m := range cfg.MemberNames() {
		want[StaticConsumerName(group, m)] = m
	}
	names := s.ConsumerNames(ctx)
	var found []string
	for n := range names.Name() {
		if _, ok := want[n]; ok {
			found = append(found, n)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", stream, err)
	}
	slices.Sort(found)
	for _, n := range found {
		ci, err := c.consumerInfo(ctx, stream, n)
		if err != nil {
			return err
		}
		if ci == nil {
			continue
		}
		m := want[n]
		if ok, why := MemberConsumerOwned(ci.Config, KindStatic, stream, group, m, staticForms(cfg, m)...); !ok {
			return notOwned("consumer", n+" on "+stream, fmt.Sprintf("static group %q on %q (member %q)", group, stream, m), why, "rename the group or the member, or remove the consumer")
		}
	}
	return nil
}

// workStreamConfig is the work-queue stream cg creates for an elastic
// group, sourcing the origin through the group's transforms, marked as
// the group's.
func workStreamConfig(origin *jetstream.StreamInfo, stream, group string, cfg ElasticConfig) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        WorkStreamName(stream, group),
		Retention:   jetstream.WorkQueuePolicy,
		Discard:     jetstream.DiscardNew,
		Replicas:    origin.Config.Replicas,
		Storage:     origin.Config.Storage,
		MaxMsgs:     cfg.MaxBufferedMsgs,
		MaxBytes:    cfg.MaxBufferedBytes,
		AllowDirect: true,
		Sources:     []*jetstream.StreamSource{{Name: origin.Config.Name, SubjectTransforms: ElasticTransforms(cfg)}},
		Metadata:    Marks(KindElastic, stream, group, ""),
	}
}

// workStreamSettingsDrift names the cg-managed settings in which have differs
// from want, and whether all of them can be repaired in place.
func workStreamSettingsDrift(have, want jetstream.StreamConfig) (diffs []string, fixable bool) {
	fixable = true
	limit := func(n int64) string {
		if n <= 0 {
			return "unlimited"
		}
		return strconv.FormatInt(n, 10)
	}
	if have.Retention != want.Retention {
		diffs, fixable = append(diffs, fmt.Sprintf("retention %s (want %s)", have.Retention, want.Retention)), false
	}
	if have.Storage != want.Storage {
		diffs, fixable = append(diffs, fmt.Sprintf("storage %s (want %s)", have.Storage, want.Storage)), false
	}
	if max(have.Replicas, 1) != max(want.Replicas, 1) {
		diffs = append(diffs, fmt.Sprintf("replicas %d (want %d)", have.Replicas, want.Replicas))
	}
	if have.Discard != want.Discard {
		diffs = append(diffs, fmt.Sprintf("discard %s (want %s)", have.Discard, want.Discard))
	}
	if limit(have.MaxMsgs) != limit(want.MaxMsgs) {
		diffs = append(diffs, fmt.Sprintf("max messages %s (want %s)", limit(have.MaxMsgs), limit(want.MaxMsgs)))
	}
	if limit(have.MaxBytes) != limit(want.MaxBytes) {
		diffs = append(diffs, fmt.Sprintf("max bytes %s (want %s)", limit(have.MaxBytes), limit(want.MaxBytes)))
	}
	if have.AllowDirect != want.AllowDirect {
		diffs = append(diffs, fmt.Sprintf("allow direct %v (want %v)", have.AllowDirect, want.AllowDirect))
	}
	if len(have.Subjects) > 0 {
		diffs = append(diffs, fmt.Sprintf("subjects %v (want none)", have.Subjects))
	}
	if !sameSources(have.Sources, want.Sources) {
		diffs = append(diffs, fmt.Sprintf("sources %s (want %s)", sourcesString(have.Sources), sourcesString(want.Sources)))
	}
	return diffs, fixable
}

func sameSources(a, b []*jetstream.StreamSource) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == nil || b[i] == nil || a[i].Name != b[i].Name || a[i].FilterSubject != b[i].FilterSubject ||
			a[i].External != nil || a[i].OptStartSeq != 0 || a[i].OptStartTime != nil ||
			!sameTransforms(a[i].SubjectTransforms, b[i].SubjectTransforms) {
			return false
		}
	}
	return true
}

func sourcesString(ss []*jetstream.StreamSource) string {
	var parts []string
	for _, s := range ss {
		if s == nil {
			continue
		}
		p := s.Name
		if s.FilterSubject != "" {
			p += " filter " + s.FilterSubject
		}
		for _, t := range s.SubjectTransforms {
			p += " " + t.Source + "->" + t.Destination
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return "none"
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

// repairWorkStream sets the cg-managed settings of an owned work stream
// back to want, keeping everything else (its marks or their absence too).
func (c *Client) repairWorkStream(ctx context.Context, have, want jetstream.StreamConfig) error {
	cfg := have
	cfg.Discard, cfg.Replicas = want.Discard, want.Replicas
	cfg.MaxMsgs, cfg.MaxBytes, cfg.AllowDirect = want.MaxMsgs, want.MaxBytes, want.AllowDirect
	cfg.Subjects, cfg.Sources = nil, want.Sources
	if cfg.MaxMsgs == 0 {
		cfg.MaxMsgs = -1
	}
	if cfg.MaxBytes == 0 {
		cfg.MaxBytes = -1
	}
	if _, err := c.js.UpdateStream(ctx, cfg); err != nil {
		return fmt.Errorf("repair work stream %s: %w", have.Name, err)
	}
	return nil
}

// wholeSubjectForm stores a lone '>' filter hashing no wildcard (what
// --filter '>' parses to) as the reference stores whole-subject mode: no
// partitioning filters. Both give the same work stream transform.
func wholeSubjectForm(cfg ElasticConfig) ElasticConfig {
	if len(cfg.PartitioningFilters) == 1 && cfg.PartitioningFilters[0].Filter == ">" && len(cfg.PartitioningFilters[0].PartitioningWildcards) == 0 {
		cfg.PartitioningFilters = nil
	}
	return cfg
}

// deleteOwnedConsumer deletes consumer name on stream if it is member's
// own in (kind, stream, group); otherwise it says why it kept it. A name
// the server cannot have (the reference stores member names with '.') is
// no consumer at all.
func (c *Client) deleteOwnedConsumer(ctx context.Context, s jetstream.Stream, stream, name string, kind Kind, group, member string, forms [][]string) (deleted bool, kept string, err error) {
	ci, err := c.consumerInfo(ctx, stream, name)
	if err != nil {
		if badServerName(err) {
			return false, "", nil
		}
		return false, "", err
	}
	if ci == nil {
		return false, "", nil
	}
	if ok, why := MemberConsumerOwned(ci.Config, kind, stream, group, member, forms...); !ok {
		return false, fmt.Sprintf("consumer %s on %s: %s", name, stream, why), nil
	}
	if err := s.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return false, "", fmt.Errorf("delete consumer %s: %w", name, err)
	}
	return true, "", nil
}

// checkStaticNames refuses a static create whose member consumers another
// stored group would use, or that exist on the stream and are not the
// members' own.
func (c *Client) checkStaticNames(ctx context.Context, stream, group string, cfg StaticConfig) error {
	clashes, err := c.staticClashes(ctx, stream, group, cfg)
	if err != nil {
		return err
	}
	if len(clashes) > 0 {
		return clashes[0].error(KindStatic, stream, group)
	}
	return c.checkStaticConsumers(ctx, stream, group, cfg)
}

// settleStaticClash runs after our entry is stored at rev: two clashing
// creates may both have passed the check before either stored. The one
// stored first keeps its group; a later one removes its own entry (only
// that revision) and fails.
func (c *Client) settleStaticClash(ctx context.Context, kv jetstream.KeyValue, stream, group string, cfg StaticConfig, rev uint64) error {
	clashes, err := c.staticClashes(ctx, stream, group, cfg)
	if err != nil {
		return nil // the check before the write passed; nothing better to go on
	}
	for _, cl := range clashes {
		if cl.rev < rev {
			_ = kv.Delete(context.WithoutCancel(ctx), Key(stream, group), jetstream.LastRevision(rev))
			return cl.error(KindStatic, stream, group)
		}
	}
	return nil
}
