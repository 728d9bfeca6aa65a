package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// CreateElasticResult tells what CreateElastic did.
type CreateElasticResult struct {
	Config ElasticConfig
	// Created is false when an identical group already existed.
	Created bool
	// WorkStream is the hidden work-queue stream the members consume from.
	WorkStream string
	// Transforms are the work stream's source subject transforms.
	Transforms []jetstream.SubjectTransformConfig
	// Repaired names the work stream settings that had drifted from the
	// group's and were set back (re-running create over an existing group).
	Repaired []string
}

// ElasticTransforms are the subject transforms through which a group's
// work-queue stream sources the origin stream, as the reference writes
// them.
func ElasticTransforms(cfg ElasticConfig) []jetstream.SubjectTransformConfig {
	if len(cfg.PartitioningFilters) == 0 {
		return []jetstream.SubjectTransformConfig{{Source: ">", Destination: partition.ElasticTransformDestination(cfg.MaxMembers, ">", nil)}}
	}
	out := make([]jetstream.SubjectTransformConfig, len(cfg.PartitioningFilters))
	for i, pf := range cfg.PartitioningFilters {
		out[i] = jetstream.SubjectTransformConfig{Source: pf.Filter, Destination: partition.ElasticTransformDestination(cfg.MaxMembers, pf.Filter, pf.PartitioningWildcards)}
	}
	return out
}

func wholeSubject(cfg ElasticConfig) bool {
	if len(cfg.PartitioningFilters) == 0 {
		return true
	}
	for _, pf := range cfg.PartitioningFilters {
		if len(pf.PartitioningWildcards) == 0 {
			return true
		}
	}
	return false
}

// CreateElastic creates an elastic group over any stream: its KV entry and
// its work-queue stream <stream>-<group>, sourcing the origin through the
// partitioning transforms. Everything is checked before anything is
// written. Re-running an identical create succeeds with Created false, and
// repairs a work stream whose cg-managed settings drifted; a different
// partition count, filter set or buffer cap fails with ErrGroupExists
// ("delete and recreate"). A name another group's work stream has, or a
// stream of that name cg did not make for this group, is refused
// (ErrNameClash, ErrNotOwned) with nothing created.
//
// Concurrent identical creates all succeed: the work stream is created
// first (an identical stream create is idempotent: the marks make the
// configs equal) and the entry last, with a create-only write; whoever
// loses that write finds an identical group and reports Created false.
// After its write each call checks the work stream is still there (a
// concurrent delete may have removed it) and restores it.
func (c *Client) CreateElastic(ctx context.Context, stream, group string, cfg ElasticConfig) (CreateElasticResult, error) {
	cfg = wholeSubjectForm(cfg)
	cfg.Layout = cfg.Layout.stored()
	res := CreateElasticResult{Config: cfg, WorkStream: WorkStreamName(stream, group)}
	if err := ValidateName("stream", stream); err != nil {
		return res, err
	}
	if err := ValidateName("group", group); err != nil {
		return res, err
	}
	if err := ValidateName("stream", res.WorkStream); err != nil {
		return res, invalid("work stream name", strconv.Quote(res.WorkStream[:min(len(res.WorkStream), 40)]+"..."), "<stream>-<group> is %d bytes long, more than the 200 cg allows: shorten the stream or group name", len(res.WorkStream))
	}
	if err := cfg.Validate(); err != nil {
		return res, err
	}
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return res, err
	}
	if err := elasticPreflight(si, cfg); err != nil {
		return res, err
	}
	v, err := c.ServerVersion()
	if err != nil {
		return res, err
	}
	if err := CheckServerVersion(v, wholeSubject(cfg)); err != nil {
		return res, err
	}
	res.Transforms = ElasticTransforms(cfg)
	raw, err := json.Marshal(cfg)
	if err != nil {
		return res, err
	}
	clashes, err := c.elasticClashes(ctx, stream, group)
	if err != nil {
		return res, err
	}
	if len(clashes) > 0 {
		return res, clashes[0].error(KindElastic, stream, group)
	}
	if err := c.otherLayoutHas(ctx, KindElastic, stream, group, cfg.Layout); err != nil {
		return res, err
	}
	bucket := KindElastic.LayoutBucket(cfg.Layout)
	if kv, err := c.bucket(ctx, bucket); err == nil {
		if e, err := kv.Get(ctx, Key(stream, group)); err == nil {
			return c.existingElastic(ctx, si, stream, group, cfg, e, res)
		} else if !isNotFound(err) {
			return res, fmt.Errorf("read group %s: %w", Key(stream, group), err)
		}
	} else if !errors.Is(err, ErrGroupNotFound) {
		return res, err
	}
	created, _, err := c.ensureWorkStream(ctx, si, stream, group, cfg, false)
	if err != nil {
		return res, err
	}
	if err := c.EnsurePoisonBucket(ctx, si.Config.Replicas); err != nil {
		return res, err
	}
	kv, err := c.bucketFor(ctx, bucket, si.Config.Replicas)
	if err == nil {
		_, err = kv.Create(ctx, Key(stream, group), raw)
	}
	if err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			// Created concurrently: identical is success.
			e, gerr := kv.Get(ctx, Key(stream, group))
			if gerr == nil {
				return c.existingElastic(ctx, si, stream, group, cfg, e, res)
			}
		}
		if created && kv != nil {
			// Leave nothing half-made behind: only the stream this call
			// made, and only while no stored group refers to it.
			bg := context.WithoutCancel(ctx)
			if _, gerr := kv.Get(bg, Key(stream, group)); isNotFound(gerr) {
				_ = c.js.DeleteStream(bg, res.WorkStream)
			}
		}
		return res, fmt.Errorf("store group %s: %w", Key(stream, group), err)
	}
	res.Created = true
	// A delete racing us may have removed the stream after we made it.
	_, _, err = c.ensureWorkStream(ctx, si, stream, group, cfg, false)
	return res, err
}

// existingElastic finishes a create that found the group stored already:
// the same shape succeeds (Created false) after making sure its work
// stream is there and as cg made it.
func (c *Client) existingElastic(ctx context.Context, si *jetstream.StreamInfo, stream, group string, cfg ElasticConfig, e jetstream.KeyValueEntry, res CreateElasticResult) (CreateElasticResult, error) {
	existing, err := decodeElastic(e.Key(), e.Value())
	if err != nil {
		return res, err
	}
	if !wholeSubjectForm(existing).SameShape(cfg) {
		return res, fmt.Errorf("%w: elastic group %q on %q has %s; partitions, filters and buffer caps never change: delete and recreate the group", ErrGroupExists, group, stream, strings.Join(existing.ShapeDiff(cfg), ", "))
	}
	res.Config = existing
	res.Transforms = ElasticTransforms(existing)
	if err := c.EnsurePoisonBucket(ctx, si.Config.Replicas); err != nil {
		return res, err
	}
	// Make sure the work stream is there too (it may have been lost) and
	// repair what drifted.
	var remade bool
	remade, res.Repaired, err = c.ensureWorkStream(ctx, si, stream, group, existing, true)
	if remade {
		res.Repaired = []string{remadeWorkStream(stream)}
	}
	return res, err
}

// ensureWorkStream creates the group's work-queue stream, or checks an
// existing one: it must be the group's own (WorkStreamOwned), and its
// cg-managed settings are repaired when repair is set (the stored group is
// authoritative) or else must match. created tells whether this call made
// it.
func (c *Client) ensureWorkStream(ctx context.Context, origin *jetstream.StreamInfo, stream, group string, cfg ElasticConfig, repair bool) (created bool, repaired []string, err error) {
	want := workStreamConfig(origin, stream, group, cfg)
	name := want.Name
	s, err := c.js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if _, err = c.js.CreateStream(ctx, want); err == nil {
			return true, nil, nil
		}
		if !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, nil, fmt.Errorf("create work stream %s: %w", name, err)
		}
		// Made just now by someone else, with another config: look.
		s, err = c.js.Stream(ctx, name)
	}
	if err != nil {
		return false, nil, fmt.Errorf("look up work stream %s: %w", name, err)
	}
	have := s.CachedInfo()
	if ok, why := WorkStreamOwned(have, stream, group, &cfg); !ok {
		return false, nil, notOwned("stream", name, fmt.Sprintf("elastic group %q on %s", group, stream), why, "rename the group or remove the stream")
	}
	diffs, fixable := workStreamSettingsDrift(have.Config, want)
	if len(diffs) == 0 {
		return false, nil, nil
	}
	if !repair {
		// No stored group refers to it yet (a create that stopped half-way,
		// or one running now with other settings): never repaired here, or
		// two racing creates would flip it between their settings.
		return false, nil, fmt.Errorf("%w: work stream %s, made by cg for elastic group %q on %q, has other settings than asked: %s; create the group with those settings, or remove the stream first", ErrGroupExists, name, group, stream, strings.Join(diffs, ", "))
	}
	if !fixable {
		return false, nil, fmt.Errorf("%w: work stream %s of elastic group %q on %q has drifted: %s; delete and recreate the group", ErrGroupExists, name, group, stream, strings.Join(diffs, ", "))
	}
	if err := c.repairWorkStream(ctx, have.Config, want); err != nil {
		return false, nil, err
	}
	return false, diffs, nil
}

// decodeElastic parses and checks a stored elastic value; errors name the key.
func decodeElastic(key string, raw []byte) (ElasticConfig, error) {
	var cfg ElasticConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("%w: key %s in bucket %s is not valid JSON: %v", ErrInvalidConfig, key, ElasticBucket, err)
	}
	if err := cfg.ValidateStored(); err != nil {
		return cfg, fmt.Errorf("%w: key %s in bucket %s: %v", ErrInvalidConfig, key, ElasticBucket, err)
	}
	return cfg, nil
}

// getElastic reads an elastic group's configuration and its KV revision,
// from the bucket of whichever layout holds it.
func (c *Client) getElastic(ctx context.Context, stream, group string) (ElasticConfig, uint64, error) {
	sg, err := c.findGroup(ctx, KindElastic, stream, group)
	if err != nil {
		return ElasticConfig{}, 0, err
	}
	cfg, err := decodeElastic(sg.entry.Key(), sg.entry.Value())
	return cfg, sg.entry.Revision(), err
}

// ElasticConfig returns an elastic group's stored configuration.
func (c *Client) ElasticConfig(ctx context.Context, stream, group string) (ElasticConfig, error) {
	cfg, _, err := c.getElastic(ctx, stream, group)
	return cfg, err
}

// deleteElastic removes the group's KV entry and its work-queue stream
// (with the member consumers on it), nothing else: a stream of that name
// that is not the group's own (WorkStreamOwned) is kept and reported in
// Kept.
func (c *Client) deleteElastic(ctx context.Context, stream, group string) (DeleteResult, error) {
	res := DeleteResult{Key: Key(stream, group)}
	if err := ValidateStoredGroupName(group); err != nil {
		return res, err
	}
	sg, err := c.findGroup(ctx, KindElastic, stream, group)
	if err != nil {
		return res, err
	}
	kv, e := sg.kv, sg.entry
	var cfg *ElasticConfig
	if dc, err := decodeElastic(e.Key(), e.Value()); err == nil {
		cfg = &dc
	}
	if err := kv.Delete(ctx, Key(stream, group), jetstream.LastRevision(e.Revision())); err != nil {
		return res, fmt.Errorf("delete group %s: %w", Key(stream, group), err)
	}
	c.deletePoison(ctx, KindElastic, stream, group)
	c.deleteDynamic(ctx, stream, group)
	ws := WorkStreamName(stream, group)
	s, err := c.js.Stream(ctx, ws)
	switch {
	case err == nil:
		if ok, why := WorkStreamOwned(s.CachedInfo(), stream, group, cfg); !ok {
			res.Kept = append(res.Kept, fmt.Sprintf("stream %s: not made by cg for elastic group %q on %s (%s)", ws, group, stream, why))
			return res, nil
		}
		for name := range s.ListConsumers(ctx).Info() {
			res.Consumers = append(res.Consumers, name.Name)
		}
		if err := c.js.DeleteStream(ctx, ws); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			return res, fmt.Errorf("delete work stream %s: %w", ws, err)
		}
		res.WorkStream = ws
	case errors.Is(err, jetstream.ErrStreamNotFound) || badServerName(err):
	default:
		return res, err
	}
	slices.Sort(res.Consumers)
	c.restoreRecreated(ctx, kv, stream, group)
	return res, nil
}

// restoreRecreated: a create that ran while we deleted may have stored the
// group again after our entry delete and checked its work stream before
// our stream delete. The group it stored must not be left without its
// work stream, so put the stream back for it.
func (c *Client) restoreRecreated(ctx context.Context, kv jetstream.KeyValue, stream, group string) {
	e, err := kv.Get(ctx, Key(stream, group))
	if err != nil {
		return
	}
	cfg, err := decodeElastic(e.Key(), e.Value())
	if err != nil {
		return
	}
	si, err := c.streamInfo(ctx, stream)
	if err != nil {
		return
	}
	_, _, _ = c.ensureWorkStream(ctx, si, stream, group, cfg, false)
}

// MembershipChange describes an add, drop or mapping change.
type MembershipChange struct {
	Stream string `json:"stream"`
	Group  string `json:"group"`
	// Changed lists the members added or dropped.
	Changed []string `json:"changed"`
	// Unchanged lists the members asked for that were already present
	// (add) or not members (drop).
	Unchanged []string      `json:"unchanged"`
	Config    ElasticConfig `json:"config"`
	Revision  uint64        `json:"revision"`
	// Moves are the partitions that changed owner.
	Moves []partition.Move `json:"moves"`
	// Previous is the configuration the change was applied to.
	Previous ElasticConfig `json:"-"`
	// DryRun: nothing was written; Config and Moves are what the change
	// would give and Revision is the stored one.
	DryRun bool `json:"-"`
	// Minimal: the change was planned with the Minimal option.
	Minimal bool `json:"minimal,omitempty"`
}

// MinimumMoves is the fewest partitions the change had to move: to any
// balanced assignment over the new members (an add or drop, also a
// Minimal one that stored mappings), or to the new mappings' shares.
func (mc MembershipChange) MinimumMoves() int {
	before := mc.Previous.Assignment()
	if len(mc.Config.MemberMappings) == 0 || mc.Minimal {
		return partition.MinimumBalancedMoves(before, mc.Config.MemberNames())
	}
	return partition.MinimumMoves(before, mc.Config.Assignment())
}

// BalancedMoves is how many partitions re-spreading a member list of the
// new members would move: what an add or drop without Minimal moves, to
// compare a Minimal change with.
func (mc MembershipChange) BalancedMoves() int {
	return len(partition.Moves(mc.Previous.Assignment(), partition.BalancedAssignment(mc.Config.MemberNames(), mc.Config.MaxMembers)))
}

// ChangeOption tunes AddMembers, DropMembers and SetMappings.
type ChangeOption func(*changeOptions)

type changeOptions struct{ dryRun, minimal bool }

// DryRun computes the change from the stored configuration and writes
// nothing.
func DryRun() ChangeOption { return func(o *changeOptions) { o.dryRun = true } }

// Minimal makes AddMembers and DropMembers move the fewest partitions:
// they store member mappings with even shares (see MinimalMappings)
// rather than re-spreading a member list, unless the member list moves no
// more. They then work on groups that already use mappings too, evening
// out their shares. SetMappings ignores it: its mappings are given.
func Minimal() ChangeOption { return func(o *changeOptions) { o.minimal = true } }

func applyOptions(opts []ChangeOption) changeOptions {
	var o changeOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// maxCASRetries bounds the compare-and-set loop of membership changes.
const maxCASRetries = 100

// updateElastic applies change to the stored config with compare-and-set,
// retrying when another administrator wrote in between, so no concurrent
// update is ever lost. A change that changes no member writes nothing and
// returns the stored config and revision.
func (c *Client) updateElastic(ctx context.Context, stream, group string, o changeOptions, change func(*ElasticConfig, *MembershipChange) error) (MembershipChange, error) {
	mc := MembershipChange{Stream: stream, Group: group, DryRun: o.dryRun, Minimal: o.minimal}
	sg, err := c.findGroup(ctx, KindElastic, stream, group)
	if err != nil {
		return mc, err
	}
	kv := sg.kv
	for attempt := 0; ; attempt++ {
		cfg, rev, err := c.getElastic(ctx, stream, group)
		if err != nil {
			return mc, err
		}
		before := cfg.Assignment()
		next := cfg
		next.Members = slices.Clone(cfg.Members)
		next.MemberMappings = slices.Clone(cfg.MemberMappings)
		mc.Changed, mc.Unchanged, mc.Previous = nil, nil, cfg
		if err := change(&next, &mc); err != nil {
			return mc, err
		}
		if len(mc.Changed) == 0 {
			// Nothing to do (an add of members already there): a write
			// would bump the revision and wake every running member for
			// nothing.
			mc.Config, mc.Revision, mc.Moves = cfg, rev, nil
			return mc, nil
		}
		if o.dryRun {
			mc.Config, mc.Revision = next, rev
			mc.Moves = partition.Moves(before, next.Assignment())
			return mc, nil
		}
		raw, err := json.Marshal(next)
		if err != nil {
			return mc, err
		}
		newRev, err := kv.Update(ctx, Key(stream, group), raw, rev)
		if err == nil {
			mc.Config, mc.Revision = next, newRev
			mc.Moves = partition.Moves(before, next.Assignment())
			return mc, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt >= maxCASRetries {
			return mc, fmt.Errorf("update group %s: %w", Key(stream, group), err)
		}
		// Someone else wrote first: back off a little and re-apply.
		select {
		case <-ctx.Done():
			return mc, ctx.Err()
		case <-time.After(time.Duration(rand.IntN(5*(attempt+1))+1) * time.Millisecond):
		}
	}
}

// AddMembers adds members to an elastic group. Without Minimal the group
// must use a member list, which is re-spread over the new members; with
// Minimal the group may use either, and gets the fewest moves.
func (c *Client) AddMembers(ctx context.Context, stream, group string, members []string, opts ...ChangeOption) (MembershipChange, error) {
	if err := checkMemberNames(members); err != nil {
		return MembershipChange{}, err
	}
	o := applyOptions(opts)
	mc, err := c.updateElastic(ctx, stream, group, o, func(cfg *ElasticConfig, mc *MembershipChange) error {
		if len(cfg.MemberMappings) > 0 && !o.minimal {
			return &health.Error{Err: ErrMappedGroup, Fix: "add with the minimal option to keep even shares with the fewest moves, or delete the mappings first",
				Remedy: health.Remedy{Code: health.RemedyMinimalOrDeleteMappings, Kind: KindElastic.String(), Stream: stream, Group: group, Op: "add",
					Lead: fmt.Sprintf("elastic group %q uses member mappings; ", group)}}
		}
		list := currentMembers(*cfg)
		for _, m := range members {
			if slices.Contains(list, m) {
				mc.Unchanged = append(mc.Unchanged, m)
				continue
			}
			list = append(list, m)
			mc.Changed = append(mc.Changed, m)
		}
		if n := len(partition.BalancedMembers(list, -1)); n > cfg.MaxMembers {
			return invalid("members", strconv.Itoa(n), "more members than partitions (max-members is %d); drop some first", cfg.MaxMembers)
		}
		setMembers(cfg, list, o.minimal && len(mc.Changed) > 0)
		return nil
	})
	if err == nil && !o.dryRun {
		// Members an operator adds are the operator's: never reaped, even
		// those that had joined by themselves.
		c.claimMembers(ctx, stream, group, members)
	}
	return mc, err
}

// DropMembers removes members from an elastic group. Without Minimal the
// group must use a member list, which is re-spread over the members left;
// with Minimal the group may use either, and gets the fewest moves.
func (c *Client) DropMembers(ctx context.Context, stream, group string, members []string, opts ...ChangeOption) (MembershipChange, error) {
	if err := checkMemberNames(members); err != nil {
		return MembershipChange{}, err
	}
	o := applyOptions(opts)
	return c.updateElastic(ctx, stream, group, o, func(cfg *ElasticConfig, mc *MembershipChange) error {
		if len(cfg.MemberMappings) > 0 && !o.minimal {
			return &health.Error{Err: ErrMappedGroup, Fix: "drop with the minimal option to keep even shares with the fewest moves, or delete the mappings first",
				Remedy: health.Remedy{Code: health.RemedyMinimalOrDeleteMappings, Kind: KindElastic.String(), Stream: stream, Group: group, Op: "drop",
					Lead: fmt.Sprintf("elastic group %q uses member mappings; ", group)}}
		}
		list := currentMembers(*cfg)
		for _, m := range members {
			if !slices.Contains(list, m) {
				mc.Unchanged = append(mc.Unchanged, m)
				continue
			}
			list = slices.DeleteFunc(list, func(x string) bool { return x == m })
			mc.Changed = append(mc.Changed, m)
		}
		if len(mc.Changed) == 0 {
			return fmt.Errorf("%w: none of %v is a member of elastic group %q (members: %v)", ErrMemberNotFound, members, group, currentMembers(*cfg))
		}
		setMembers(cfg, list, o.minimal)
		return nil
	})
}

// currentMembers is the stored member list as written, or the names of a
// mapped group's entries.
func currentMembers(cfg ElasticConfig) []string {
	if len(cfg.MemberMappings) > 0 {
		return cfg.MemberNames()
	}
	return slices.Clone(cfg.Members)
}

// setMembers gives cfg the membership list, the minimal way or as a
// member list.
func setMembers(cfg *ElasticConfig, list []string, minimal bool) {
	if minimal {
		minimalChange(cfg, list)
		return
	}
	if len(cfg.MemberMappings) == 0 {
		cfg.Members = list
	}
}

func checkMemberNames(members []string) error {
	if len(members) == 0 {
		return invalid("members", "", "name at least one member")
	}
	for _, m := range members {
		if err := ValidateName("member", m); err != nil {
			return err
		}
	}
	return nil
}

// SetMappings replaces an elastic group's membership with explicit
// mappings; every partition must be mapped exactly once.
func (c *Client) SetMappings(ctx context.Context, stream, group string, mms []partition.MemberMapping, opts ...ChangeOption) (MembershipChange, error) {
	o := applyOptions(opts)
	o.minimal = false
	return c.updateElastic(ctx, stream, group, o, func(cfg *ElasticConfig, mc *MembershipChange) error {
		check := StaticConfig{MaxMembers: cfg.MaxMembers, MemberMappings: mms}
		if err := check.Validate(); err != nil {
			return err
		}
		cfg.Members, cfg.MemberMappings = nil, mms
		for _, mm := range mms {
			mc.Changed = append(mc.Changed, mm.Member)
		}
		return nil
	})
}

// DeleteMappings turns a mapped elastic group back into a balanced one,
// with members (or, when members is empty, the members the mappings
// named), so the group never ends up with no one to consume.
func (c *Client) DeleteMappings(ctx context.Context, stream, group string, members []string) (MembershipChange, error) {
	for _, m := range members {
		if err := ValidateName("member", m); err != nil {
			return MembershipChange{}, err
		}
	}
	return c.updateElastic(ctx, stream, group, changeOptions{}, func(cfg *ElasticConfig, mc *MembershipChange) error {
		if len(cfg.MemberMappings) == 0 {
			return fmt.Errorf("%w: elastic group %q has no member mappings", ErrNotMapped, group)
		}
		list := members
		if len(list) == 0 {
			for _, mm := range cfg.MemberMappings {
				list = append(list, mm.Member)
			}
		}
		check := StaticConfig{MaxMembers: cfg.MaxMembers, Members: list}
		if err := check.Validate(); err != nil {
			return err
		}
		cfg.MemberMappings, cfg.Members = nil, slices.Clone(list)
		mc.Changed = slices.Clone(list)
		return nil
	})
}

// elasticInfo reads an elastic group's configuration, member states,
// per-partition backlog and lag in the work stream and its sourcing lag.
func (c *Client) elasticInfo(ctx context.Context, stream, group string, scope lagScope) (health.GroupInfo, error) {
	gi := health.GroupInfo{Kind: KindElastic.String(), Stream: stream, Group: group, WorkStream: WorkStreamName(stream, group)}
	if _, err := c.streamInfo(ctx, stream); err != nil {
		return gi, err
	}
	cfg, _, err := c.getElastic(ctx, stream, group)
	if err != nil {
		return gi, err
	}
	fillConfig(&gi, cfg)
	ws, err := c.js.Stream(ctx, gi.WorkStream)
	if err != nil {
		if badServerName(err) {
			return gi, &health.Error{Err: ErrStreamNotFound, Fix: "delete the group",
				Remedy: health.Remedy{Code: health.RemedyDeleteGroup, Kind: KindElastic.String(), Stream: stream, Group: group,
					Lead: fmt.Sprintf("%v: elastic group %q's work stream name %s is one the server cannot have (the group was stored by another tool), so it can never be consumed; ", ErrStreamNotFound, group, gi.WorkStream)}}
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return gi, fmt.Errorf("%w: work stream %s of elastic group %q is missing; re-run the group's create to remake it (it sources %s again from its start), or delete the group", ErrStreamNotFound, gi.WorkStream, group, stream)
		}
		return gi, err
	}
	wsi := ws.CachedInfo()
	if ok, why := WorkStreamOwned(wsi, stream, group, &cfg); !ok && foreignWorkStream(wsi, stream) {
		return gi, notOwned("stream", gi.WorkStream, fmt.Sprintf("elastic group %q on %s", group, stream), why, "its messages are not the group's, so info does not show them; rename the group or remove the stream")
	}
	if len(wsi.Sources) > 0 && wsi.Sources[0] != nil {
		lag := wsi.Sources[0].Lag
		gi.SourcingLag = &lag
	}
	if cfg.LayoutOf() == LayoutPartition {
		parts, err := c.layoutInfo(ctx, &gi, KindElastic, gi.WorkStream, cfg)
		if err != nil {
			return gi, err
		}
		c.fillLag(ctx, &gi, lagInput{stream: gi.WorkStream, si: wsi, parts: parts}, scope)
	} else {
		l := newLayout(cfg)
		cis := map[string]*jetstream.ConsumerInfo{}
		for _, m := range cfg.MemberNames() {
			ci, err := c.consumerInfo(ctx, gi.WorkStream, m)
			if err != nil {
				return gi, err
			}
			cis[m] = ci
			gi.Members = append(gi.Members, memberStatus(m, l.parts[m], l.memberFilters(cfg, m), m, ci))
		}
		c.fillLag(ctx, &gi, lagInput{stream: gi.WorkStream, si: wsi, cis: cis}, scope)
	}
	c.fillDynamic(ctx, &gi)
	gi.Backlog = make([]uint64, cfg.MaxMembers)
	if scope.all && gi.LagError == "" && len(gi.PartitionLag) == cfg.MaxMembers {
		// The work stream holds only what is pending: the backlog is the lag.
		for _, pl := range gi.PartitionLag {
			gi.Backlog[pl.Partition] = pl.Pending
		}
		return gi, nil
	}
	// Per-subject counts of the work stream: it holds only what is not yet
	// consumed, so this stays small while the group keeps up.
	si, err := ws.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return gi, fmt.Errorf("work stream %s: %w", gi.WorkStream, err)
	}
	for subj, n := range si.State.Subjects {
		if _, p := partition.StripPartition(subj); p >= 0 && p < cfg.MaxMembers {
			gi.Backlog[p] += n
		}
	}
	return gi, nil
}
