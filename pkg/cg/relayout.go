package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/nats-io/nats.go/jetstream"
)

// Moving a group between layouts. The group keeps its place: each new
// consumer starts where the old consumers reading its partitions had all
// acked (their ack floor plus one), so a message acked above an ack floor
// may be handled again and none is lost.
//
// A static group's new consumers are made first, with the settings of the
// old consumers they replace (ack wait, max ack pending, pin TTL, inactive
// threshold), and their positions saved, so that a consumer the server
// removes by inactivity is made again at the same place. A new consumer
// whose old ones do not exist (gone by inactivity) is not made: its
// position alone is saved and the member makes it there when it joins. An
// elastic group's place is its work stream, which holds exactly what was
// not acked; no consumer is made (a work-queue stream refuses two
// consumers over the same partition, and the members make theirs at join).
//
// Then the configuration is written under the new layout, the old one
// removed (a revision check: a change since the plan fails it), and last
// the old consumers and positions. Until the old configuration is
// removed, a failure undoes what was made. After, the move is done and
// only the clean-up is left: a re-run finishes it. A relayout that died
// between writing the new configuration and removing the old leaves the
// group in both layouts' buckets; every reader takes the member layout's
// (the reference's bucket is read first), and a re-run to either layout
// finishes the move to that layout, from the consumers of the member
// layout.

// ErrGroupRunning: the group has instances running, so its consumers'
// positions are still moving.
var ErrGroupRunning = errors.New("group has running instances")

// RelayoutPlan is what a relayout will do.
type RelayoutPlan struct {
	Kind   Kind   `json:"kind"`
	Stream string `json:"stream"`
	Group  string `json:"group"`
	// From is the layout the group's readers find it in now; To the one
	// asked for.
	From Layout `json:"from"`
	To   Layout `json:"to"`
	// Finish: the group was already stored in To's bucket beside From's
	// (a relayout that stopped part-way); the move is finished without
	// making anything new.
	Finish bool `json:"finish,omitempty"`
	// Nothing: the group is on To already and nothing of another layout
	// is left over.
	Nothing bool `json:"nothing,omitempty"`
	// FirstSeq and LastSeq are the stream's (the work stream's, elastic)
	// when planned.
	FirstSeq uint64 `json:"stream_first_seq"`
	LastSeq  uint64 `json:"stream_last_seq"`
	// New lists the consumers of the new layout: one per partition
	// (partition layout) or per member (member layout).
	New []RelayoutConsumer `json:"new"`
	// Old lists the consumers and saved positions of the old layout that
	// are removed.
	Old []RelayoutOld `json:"old"`
}

// RelayoutConsumer is one consumer of the new layout.
type RelayoutConsumer struct {
	Consumer   string `json:"consumer"`
	Member     string `json:"member"`
	Partitions []int  `json:"partitions"`
	// Start is the first stream sequence it delivers: just after the
	// lowest ack floor of the old consumers reading its partitions. 0 for
	// an elastic group: what its partitions hold in the work stream.
	Start uint64 `json:"start_seq"`
	// Again counts its messages, from Start on, that an old consumer had
	// delivered already: they may be handled again.
	Again uint64 `json:"handled_again"`
	// Create: the consumer is made now (static, with the old consumers'
	// settings). Otherwise only its position is saved and the member
	// makes it when it joins.
	Create bool `json:"create"`
	// Replace: a consumer of that name, made by cg for this group's new
	// layout (left by an earlier relayout), is deleted and made again.
	Replace bool `json:"replace,omitempty"`
}

// RelayoutOld is one consumer of the old layout.
type RelayoutOld struct {
	Consumer   string `json:"consumer"`
	Member     string `json:"member,omitempty"`
	Partitions []int  `json:"partitions"`
	Exists     bool   `json:"exists"`
	// AckFloor is the stream sequence up to which it had acked all (from
	// its saved position when the consumer is gone); Delivered the last it
	// delivered.
	AckFloor  uint64 `json:"ack_floor"`
	Delivered uint64 `json:"delivered"`
	// AckPending is what it had delivered and not seen acked: handed out
	// again under the new layout.
	AckPending int `json:"ack_pending"`

	ci      *jetstream.ConsumerInfo
	posName string
}

// relayoutWork is a plan with what carrying it out needs.
type relayoutWork struct {
	plan     RelayoutPlan
	cfg      health.GroupConfig
	cstream  string
	replicas int
	from     storedGroup                 // the entry readers find now
	target   *storedGroup                // an entry already in To's bucket
	newCC    []*jetstream.ConsumerConfig // per New entry; nil: not made
	newPos   []string                    // per New entry: its position name ("" elastic)
	oldPos   []string                    // position names to remove
}

// relayoutStep, when set (by tests), runs before each step of a relayout
// and fails it with its error; relayoutCrash then leaves what was made in
// place, as a relayout whose process died would.
var (
	relayoutStep  func(step string) error
	relayoutCrash bool
)

// RelayoutPlan works out what Relayout would do, changing nothing.
func (c *Client) RelayoutPlan(ctx context.Context, k Kind, stream, group string, to Layout) (RelayoutPlan, error) {
	w, err := c.relayoutPlan(ctx, k, stream, group, to)
	return w.plan, err
}

// Relayout moves a group to layout to, keeping its place (see the top of
// relayout.go), and returns the plan it carried out. Nothing changes when
// the plan cannot be made: an instance of the group runs, a consumer or
// name is not the group's, the stored configuration cannot be read.
func (c *Client) Relayout(ctx context.Context, k Kind, stream, group string, to Layout) (RelayoutPlan, error) {
	w, err := c.relayoutPlan(ctx, k, stream, group, to)
	if err != nil || w.plan.Nothing {
		return w.plan, err
	}
	return w.plan, c.relayout(ctx, w)
}

func otherLayout(l Layout) Layout {
	if l.orDefault() == LayoutMember {
		return LayoutPartition
	}
	return LayoutMember
}

func (c *Client) relayoutPlan(ctx context.Context, k Kind, stream, group string, to Layout) (*relayoutWork, error) {
	w := &relayoutWork{plan: RelayoutPlan{Kind: k, Stream: stream, Group: group, To: to, New: []RelayoutConsumer{}, Old: []RelayoutOld{}}}
	if err := k.Valid(); err != nil {
		return w, err
	}
	if to == "" {
		return w, fmt.Errorf("%w: no layout to move to: want %q or %q", ErrLayout, LayoutMember, LayoutPartition)
	}
	if _, err := ParseLayout(string(to)); err != nil {
		return w, err
	}
	if err := ValidateStoredGroupName(group); err != nil {
		return w, err
	}
	sg, err := c.findGroup(ctx, k, stream, group)
	if err != nil {
		return w, err
	}
	cfg, err := c.Config(ctx, k, stream, group)
	if err != nil {
		return w, err
	}
	if err := checkLayout(to, cfg.PartitionCount()); err != nil {
		return w, err
	}
	w.from, w.cfg, w.cstream = sg, cfg, k.WorkStream(stream, group)
	w.plan.From = sg.layout
	other, err := c.layoutEntry(ctx, k, stream, group, otherLayout(sg.layout))
	if err != nil {
		return w, err
	}
	if other != nil {
		if err := sameShape(k, cfg, other.entry); err != nil {
			return w, err
		}
	}
	si, err := c.streamInfo(ctx, w.cstream)
	if err != nil {
		return w, err
	}
	w.replicas = si.Config.Replicas
	w.plan.FirstSeq, w.plan.LastSeq = si.State.FirstSeq, si.State.LastSeq
	if k == KindElastic {
		if ok, why := WorkStreamOwned(si, stream, group, ptr(cfg.(ElasticConfig))); !ok {
			return w, notOwned("stream", w.cstream, fmt.Sprintf("elastic group %q on %s", group, stream), why, "")
		}
	} else if si.Config.Retention == jetstream.WorkQueuePolicy {
		return w, described{fmt.Sprintf("stream %s is a work-queue stream: it refuses the new layout's consumers beside the old ones over the same partitions, so static group %q cannot be moved keeping its place; delete the group and create it with the other layout", stream, group), ErrLayout}
	}
	old := otherLayout(to)
	if to == sg.layout {
		// Only what another layout left over is removed.
		w.plan.Finish = other != nil
		if err := c.relayoutOld(ctx, w, old, true); err != nil {
			return w, err
		}
		w.plan.Nothing = !w.plan.Finish && len(w.plan.Old) == 0
		return w, c.refuseRunning(w, nil)
	}
	w.target = other
	if err := c.relayoutOld(ctx, w, old, false); err != nil {
		return w, err
	}
	if err := c.relayoutNew(ctx, w); err != nil {
		return w, err
	}
	if err := c.relayoutClashes(ctx, w); err != nil {
		return w, err
	}
	return w, nil
}

func ptr[T any](v T) *T { return &v }

// layoutEntry reads the group's entry in layout l's bucket; nil when none.
func (c *Client) layoutEntry(ctx context.Context, k Kind, stream, group string, l Layout) (*storedGroup, error) {
	name := k.LayoutBucket(l)
	kv, err := c.bucket(ctx, name)
	if errors.Is(err, ErrGroupNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, Key(stream, group))
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read group %s in %s: %w", Key(stream, group), name, err)
	}
	return &storedGroup{kv: kv, bucket: name, layout: l, entry: e}, nil
}

// sameShape refuses a group stored in both layouts' buckets with
// different configurations: that is no relayout left part-way, and which
// one is meant cannot be told.
func sameShape(k Kind, cfg health.GroupConfig, e jetstream.KeyValueEntry) error {
	var o health.GroupConfig
	var err error
	if k == KindStatic {
		o, err = decodeStatic(e.Key(), e.Value())
	} else {
		o, err = decodeElastic(e.Key(), e.Value())
	}
	if err != nil {
		return err
	}
	// Both as the member layout stores them: alike but for the layout.
	a, err := relayoutValue(cfg, LayoutMember)
	if err != nil {
		return err
	}
	b, err := relayoutValue(o, LayoutMember)
	if err != nil {
		return err
	}
	if string(a) == string(b) {
		return nil
	}
	return fmt.Errorf("%w: %s group %s is stored in both %s and %s with different configurations (%s and %s); delete the one not meant with 'nats kv del'", ErrInvalidConfig, k, e.Key(), k.Bucket(), k.LayoutBucket(LayoutPartition), a, b)
}

// oldNames are the consumers of layout l of the group, each with its
// member (member layout) or partitions.
func oldNames(w *relayoutWork, l Layout) []RelayoutOld {
	k, group := w.plan.Kind, w.plan.Group
	lay := newLayout(w.cfg)
	var out []RelayoutOld
	if l == LayoutPartition {
		owner := w.cfg.Assignment().Owner
		for p := range w.cfg.PartitionCount() {
			out = append(out, RelayoutOld{Consumer: PartitionConsumerName(group, p), Member: owner[p], Partitions: []int{p}, posName: partitionPositionName(p)})
		}
		return out
	}
	for _, m := range w.cfg.MemberNames() {
		name := m
		if k == KindStatic {
			name = StaticConsumerName(group, m)
		}
		parts := lay.parts[m]
		if parts == nil {
			parts = []int{}
		}
		out = append(out, RelayoutOld{Consumer: name, Member: m, Partitions: parts, posName: m})
	}
	return out
}

// relayoutOld reads the consumers of layout l (the old one). With
// leftovers only the ones that exist are kept, and positions only when a
// consumer's own ones are to go.
func (c *Client) relayoutOld(ctx context.Context, w *relayoutWork, l Layout, leftovers bool) error {
	k, stream, group := w.plan.Kind, w.plan.Stream, w.plan.Group
	for _, o := range oldNames(w, l) {
		ci, err := c.consumerInfo(ctx, w.cstream, o.Consumer)
		if err != nil {
			return err
		}
		if ci != nil {
			if ok, why := relayoutOwned(ci.Config, k, w.cfg, stream, group, l, o); !ok {
				if leftovers {
					continue // not the group's: never touched
				}
				return notOwned("consumer", o.Consumer+" on "+w.cstream, fmt.Sprintf("%s group %q on %q", k, group, stream), why, "")
			}
			o.ci, o.Exists = ci, true
			o.AckFloor, o.Delivered, o.AckPending = ci.AckFloor.Stream, max(ci.Delivered.Stream, ci.AckFloor.Stream), ci.NumAckPending
		} else if k == KindStatic {
			if pos, ok := c.savedPosition(ctx, stream, group, o.posName); ok {
				o.AckFloor, o.Delivered = pos.AckFloor, pos.AckFloor
			}
		}
		if k == KindStatic {
			// Every old position goes (a running member saves one beside
			// its consumer).
			w.oldPos = append(w.oldPos, o.posName)
		}
		if leftovers && !o.Exists {
			continue
		}
		w.plan.Old = append(w.plan.Old, o)
	}
	if k == KindElastic && l == LayoutMember {
		if err := c.staleMemberConsumers(ctx, w); err != nil {
			return err
		}
	}
	return c.refuseRunning(w, nil)
}

// staleMemberConsumers adds to the old consumers of an elastic group the
// member consumers on its work stream of members it no longer has (they go
// by inactivity, but until then the work stream would refuse a partition
// consumer over the same partitions).
func (c *Client) staleMemberConsumers(ctx context.Context, w *relayoutWork) error {
	s, err := c.js.Stream(ctx, w.cstream)
	if err != nil {
		return fmt.Errorf("stream %s: %w", w.cstream, err)
	}
	have := map[string]bool{}
	for _, o := range w.plan.Old {
		have[o.Consumer] = true
	}
	n := w.cfg.PartitionCount()
	lister := s.ListConsumers(ctx)
	for ci := range lister.Info() {
		if have[ci.Name] || ci.Config.Metadata[MarkLayout] == string(LayoutPartition) || !groupConsumer(ci.Config, w.plan.Stream, w.plan.Group, n) {
			continue
		}
		o := RelayoutOld{Consumer: ci.Name, Member: ci.Config.Metadata[MarkMember], Partitions: []int{}, Exists: true, ci: ci,
			AckFloor: ci.AckFloor.Stream, Delivered: ci.Delivered.Stream, AckPending: ci.NumAckPending}
		if o.Member == "" {
			o.Member = ci.Name
		}
		for _, f := range consumerFilters(ci.Config) {
			tok, _, _ := strings.Cut(f, ".")
			if p, err := strconv.Atoi(tok); err == nil {
				o.Partitions = append(o.Partitions, p)
			}
		}
		w.plan.Old = append(w.plan.Old, o)
	}
	if err := lister.Err(); err != nil {
		return fmt.Errorf("list consumers of %s: %w", w.cstream, err)
	}
	return nil
}

// relayoutOwned says whether an old-layout consumer is the group's.
func relayoutOwned(cc jetstream.ConsumerConfig, k Kind, cfg health.GroupConfig, stream, group string, l Layout, o RelayoutOld) (bool, string) {
	if l == LayoutPartition {
		return PartitionConsumerOwned(cc, k, stream, group, o.Partitions[0])
	}
	if k == KindStatic {
		return MemberConsumerOwned(cc, k, stream, group, o.Member, staticForms(cfg.(StaticConfig), o.Member)...)
	}
	if groupConsumer(cc, stream, group, cfg.PartitionCount()) && (!isMarked(cc.Metadata) || cc.Metadata[MarkMember] == o.Member) {
		return true, ""
	}
	_, why := MemberConsumerOwned(cc, k, stream, group, o.Member, newLayout(cfg).memberFilters(cfg, o.Member))
	return false, why
}

// refuseRunning refuses a relayout while an instance of the group pulls
// or holds a pin on one of its consumers (old ones, and news ones left
// over): their positions still move.
func (c *Client) refuseRunning(w *relayoutWork, extra []*jetstream.ConsumerInfo) error {
	var busy []string
	members := map[string]bool{}
	look := func(ci *jetstream.ConsumerInfo, member string) {
		if ci == nil || (ci.NumWaiting == 0 && !pinned(ci)) {
			return
		}
		what := []string{}
		if ci.NumWaiting > 0 {
			what = append(what, fmt.Sprintf("%d waiting pull(s)", ci.NumWaiting))
		}
		if pinned(ci) {
			what = append(what, "an instance pinned")
		}
		busy = append(busy, fmt.Sprintf("%s (%s)", ci.Name, strings.Join(what, ", ")))
		if member != "" {
			members[member] = true
		}
	}
	for _, o := range w.plan.Old {
		look(o.ci, o.Member)
	}
	for _, ci := range extra {
		look(ci, "")
	}
	if len(busy) == 0 {
		return nil
	}
	who := "its instances"
	if len(members) > 0 {
		names := make([]string, 0, len(members))
		for m := range members {
			names = append(names, m)
		}
		slices.Sort(names)
		who = "the instances of member(s) " + strings.Join(names, ", ")
	}
	return described{fmt.Sprintf("%s group %q on %q is running: %s; stop %s (a pin lasts until its instance stops or its pinned TTL passes, a pull until it expires) and run this again (nothing was changed)",
		w.plan.Kind, w.plan.Group, w.plan.Stream, strings.Join(busy, ", "), who), ErrGroupRunning}
}

// relayoutNew plans the new layout's consumers from the old ones.
func (c *Client) relayoutNew(ctx context.Context, w *relayoutWork) error {
	k, stream, group, cfg := w.plan.Kind, w.plan.Stream, w.plan.Group, w.cfg
	byPart := map[int]RelayoutOld{}
	for _, o := range w.plan.Old {
		for _, p := range o.Partitions {
			byPart[p] = o
		}
	}
	lay := newLayout(cfg)
	type entry struct {
		rc      RelayoutConsumer
		filters []string
		posName string
		marks   map[string]string
	}
	var es []entry
	if w.plan.To == LayoutPartition {
		owner := cfg.Assignment().Owner
		for p := range cfg.PartitionCount() {
			es = append(es, entry{
				rc:      RelayoutConsumer{Consumer: PartitionConsumerName(group, p), Member: owner[p], Partitions: []int{p}},
				filters: PartitionConsumerFilters(cfg, p), posName: partitionPositionName(p), marks: PartitionMarks(k, stream, group, p),
			})
		}
	} else {
		for _, m := range cfg.MemberNames() {
			name := m
			if k == KindStatic {
				name = StaticConsumerName(group, m)
			}
			parts := lay.parts[m]
			if parts == nil {
				parts = []int{}
			}
			es = append(es, entry{
				rc:      RelayoutConsumer{Consumer: name, Member: m, Partitions: parts},
				filters: lay.memberFilters(cfg, m), posName: m, marks: Marks(k, stream, group, m),
			})
		}
	}
	for _, e := range es {
		if k == KindElastic {
			w.plan.New = append(w.plan.New, e.rc)
			w.newCC, w.newPos = append(w.newCC, nil), append(w.newPos, "")
			continue
		}
		// Where it starts: just after the lowest ack floor of the old
		// consumers reading its partitions.
		var src *jetstream.ConsumerInfo
		start := uint64(0)
		for i, p := range e.rc.Partitions {
			o := byPart[p]
			if i == 0 || o.AckFloor+1 < start {
				start = o.AckFloor + 1
			}
			if o.ci != nil && (src == nil || o.ci.Config.MaxAckPending > src.Config.MaxAckPending) {
				src = o.ci
			}
		}
		if len(e.rc.Partitions) == 0 {
			start = max(w.plan.LastSeq+1, 1) // owns nothing: nothing to read
		}
		start = max(start, 1)
		e.rc.Start = start
		for _, p := range e.rc.Partitions {
			o := byPart[p]
			n, err := c.countBetween(ctx, stream, PartitionConsumerFilters(cfg, p), start, o.Delivered+1, w.plan.LastSeq)
			if err != nil {
				return err
			}
			e.rc.Again += n
		}
		var cc *jetstream.ConsumerConfig
		if src != nil {
			e.rc.Create = true
			cc = &jetstream.ConsumerConfig{
				Durable:           e.rc.Consumer,
				FilterSubjects:    e.filters,
				AckPolicy:         jetstream.AckExplicitPolicy,
				AckWait:           src.Config.AckWait,
				MaxAckPending:     src.Config.MaxAckPending,
				MaxDeliver:        src.Config.MaxDeliver,
				BackOff:           src.Config.BackOff,
				PriorityGroups:    []string{PriorityGroup},
				PriorityPolicy:    jetstream.PriorityPolicyPinned,
				PinnedTTL:         src.Config.PinnedTTL,
				InactiveThreshold: src.Config.InactiveThreshold,
				Metadata:          e.marks,
			}
			if start > 1 {
				cc.DeliverPolicy, cc.OptStartSeq = jetstream.DeliverByStartSequencePolicy, start
			}
		}
		w.plan.New = append(w.plan.New, e.rc)
		w.newCC, w.newPos = append(w.newCC, cc), append(w.newPos, e.posName)
	}
	return nil
}

// relayoutClashes refuses new consumer names that are taken: by the old
// layout's own consumers (a member named like a partition consumer), by
// a consumer that is not the new layout's own, or by another stored
// group's consumers. A consumer of the new layout's own left over (by an
// earlier relayout) is replaced, when no instance uses it.
func (c *Client) relayoutClashes(ctx context.Context, w *relayoutWork) error {
	k, stream, group := w.plan.Kind, w.plan.Stream, w.plan.Group
	olds := map[string]string{}
	for _, o := range oldNames(w, otherLayout(w.plan.To)) {
		olds[o.Consumer] = o.Member
	}
	var left []*jetstream.ConsumerInfo
	for i := range w.plan.New {
		n := &w.plan.New[i]
		if m, ok := olds[n.Consumer]; ok {
			return described{fmt.Sprintf("%s group %q on %q cannot take the %s layout: consumer %s would be both member %q's (member layout) and %s's; rename the member (an elastic group: drop it and add it under another name)", k, group, stream, w.plan.To, n.Consumer, m, newWho(*n, w.plan.To)), ErrNameClash}
		}
		ci, err := c.consumerInfo(ctx, w.cstream, n.Consumer)
		if err != nil {
			return err
		}
		if ci == nil {
			continue
		}
		var ok bool
		var why string
		if w.plan.To == LayoutPartition {
			ok, why = PartitionConsumerOwned(ci.Config, k, stream, group, n.Partitions[0])
		} else if ok = markedFor(ci.Config.Metadata, k, stream, group, n.Member); !ok {
			why = "it is not marked as cg's for member " + strconv.Quote(n.Member)
			if isMarked(ci.Config.Metadata) {
				why = "it is marked as made for " + markOwner(ci.Config.Metadata)
			}
		}
		if !ok {
			return notOwned("consumer", n.Consumer+" on "+w.cstream, fmt.Sprintf("%s of %s group %q on %q", newWho(*n, w.plan.To), k, group, stream), why, "remove it, or rename the group")
		}
		left = append(left, ci)
		if k == KindElastic {
			// An elastic group's consumers are the members': a leftover
			// goes, and the member makes its own.
			w.plan.Old = append(w.plan.Old, RelayoutOld{Consumer: n.Consumer, Member: n.Member, Partitions: n.Partitions, Exists: true, ci: ci})
			continue
		}
		n.Replace = true
	}
	if err := c.refuseRunning(w, left); err != nil {
		return err
	}
	if k != KindStatic {
		return nil
	}
	names := map[string]string{}
	for _, n := range w.plan.New {
		names[n.Consumer] = newWho(n, w.plan.To)
	}
	return c.otherGroupsUse(ctx, stream, group, names)
}

func newWho(n RelayoutConsumer, l Layout) string {
	if l == LayoutPartition {
		return fmt.Sprintf("partition %d", n.Partitions[0])
	}
	return fmt.Sprintf("member %q", n.Member)
}

// otherGroupsUse refuses names (consumer → what of ours it is) that
// another static group on stream would use, in either layout.
func (c *Client) otherGroupsUse(ctx context.Context, stream, group string, names map[string]string) error {
	others, err := c.listGroups(ctx, KindStatic, stream)
	if err != nil && !errors.Is(err, ErrGroupNotFound) {
		return err
	}
	for _, g := range others {
		if g == group || !(strings.HasPrefix(group+"-", g+"-") || strings.HasPrefix(g+"-", group+"-")) {
			continue
		}
		ocfg, err := c.StaticConfig(ctx, stream, g)
		if err != nil {
			continue // an unreadable group still names nothing we can check
		}
		var theirs []string
		if ocfg.LayoutOf() == LayoutPartition {
			for p := range ocfg.MaxMembers {
				theirs = append(theirs, PartitionConsumerName(g, p))
			}
		} else {
			for _, m := range ocfg.MemberNames() {
				theirs = append(theirs, StaticConsumerName(g, m))
			}
		}
		for _, name := range theirs {
			if what, ok := names[name]; ok {
				return described{fmt.Sprintf("static group %q on %q clashes with static group %q on %q: both would use consumer %q (%s of %q); rename the group", group, stream, g, stream, name, what, group), ErrNameClash}
			}
		}
	}
	return nil
}

// relayout carries out a plan.
func (c *Client) relayout(ctx context.Context, w *relayoutWork) (err error) {
	k, stream, group := w.plan.Kind, w.plan.Stream, w.plan.Group
	key := Key(stream, group)
	step := func(name string) error {
		if relayoutStep != nil {
			return relayoutStep(name)
		}
		return nil
	}
	if !w.plan.Finish && w.plan.From != w.plan.To {
		var (
			created  []string
			saved    []string
			wroteRev uint64
			wroteKV  jetstream.KeyValue
		)
		undo := func() {
			if relayoutCrash {
				return
			}
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if wroteKV != nil {
				_ = wroteKV.Delete(uctx, key, jetstream.LastRevision(wroteRev))
			}
			for _, name := range created {
				_ = c.js.DeleteConsumer(uctx, w.cstream, name)
			}
			c.deletePositions(uctx, stream, group, saved)
		}
		fail := func(e error) error {
			undo()
			if relayoutCrash {
				return e
			}
			return fmt.Errorf("%w (what the relayout had made was removed: the group is as it was)", e)
		}
		if k == KindStatic {
			if err := step("positions"); err != nil {
				return fail(err)
			}
			kv, err := c.positions(ctx, w.replicas)
			if err != nil {
				return fail(fmt.Errorf("positions bucket: %w", err))
			}
			for i, n := range w.plan.New {
				pk := positionKey(stream, group, w.newPos[i])
				saved = append(saved, w.newPos[i])
				if n.Start <= 1 {
					// From the start: a stale position of an earlier
					// layout must not move it on.
					if err := kv.Purge(ctx, pk); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
						return fail(fmt.Errorf("clear position %s: %w", pk, err))
					}
					continue
				}
				raw, _ := json.Marshal(Position{AckFloor: n.Start - 1, Saved: time.Now().UTC()})
				if _, err := kv.Put(ctx, pk, raw); err != nil {
					return fail(fmt.Errorf("save position %s: %w", pk, err))
				}
			}
			if err := step("consumers"); err != nil {
				return fail(err)
			}
			for i, n := range w.plan.New {
				cc := w.newCC[i]
				if cc == nil {
					continue
				}
				if n.Replace {
					if err := c.js.DeleteConsumer(ctx, w.cstream, n.Consumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
						return fail(fmt.Errorf("delete leftover consumer %s: %w", n.Consumer, err))
					}
				}
				if _, err := c.createConsumer(ctx, w.cstream, *cc); err != nil {
					return fail(fmt.Errorf("create consumer %s on %s: %w", n.Consumer, w.cstream, err))
				}
				created = append(created, n.Consumer)
			}
		}
		if err := step("config"); err != nil {
			return fail(err)
		}
		raw, err := relayoutValue(w.cfg, w.plan.To)
		if err != nil {
			return fail(err)
		}
		if w.target != nil {
			rev, err := w.target.kv.Update(ctx, key, raw, w.target.entry.Revision())
			if err != nil {
				return fail(fmt.Errorf("store group %s in %s: %w", key, w.target.bucket, err))
			}
			wroteKV, wroteRev = w.target.kv, rev
		} else {
			kv, err := c.bucketFor(ctx, k.LayoutBucket(w.plan.To), w.replicas)
			if err != nil {
				return fail(err)
			}
			rev, err := kv.Create(ctx, key, raw)
			if err != nil {
				return fail(fmt.Errorf("store group %s in %s: %w", key, k.LayoutBucket(w.plan.To), err))
			}
			wroteKV, wroteRev = kv, rev
		}
		if k == KindStatic {
			if err := c.ensurePositions(ctx, w.replicas); err != nil {
				return fail(err)
			}
		}
		if err := step("old-config"); err != nil {
			return fail(err)
		}
		// An instance started since the plan would read on from the old
		// consumers: look again before they are given up.
		if err := c.stillStopped(ctx, w); err != nil {
			return fail(err)
		}
		if err := w.from.kv.Delete(ctx, key, jetstream.LastRevision(w.from.entry.Revision())); err != nil {
			return fail(fmt.Errorf("remove group %s from %s (changed since the plan?): %w", key, w.from.bucket, err))
		}
	} else if w.plan.Finish {
		// The entry of the layout moved from is the one not asked for.
		other, err := c.layoutEntry(ctx, k, stream, group, otherLayout(w.plan.To))
		if err != nil {
			return err
		}
		if other != nil {
			if err := step("old-config"); err != nil {
				return err
			}
			if err := other.kv.Delete(ctx, key, jetstream.LastRevision(other.entry.Revision())); err != nil {
				return fmt.Errorf("remove group %s from %s: %w", key, other.bucket, err)
			}
		}
	}
	// The move is done: what is left is the clean-up, which a re-run
	// finishes.
	if err := step("old-consumers"); err != nil {
		return fmt.Errorf("%w; the group is on the %s layout, run the same relayout again to remove what is left of the %s layout", err, w.plan.To, otherLayout(w.plan.To))
	}
	var errs []error
	for _, o := range w.plan.Old {
		if !o.Exists {
			continue
		}
		if err := c.js.DeleteConsumer(ctx, w.cstream, o.Consumer); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			errs = append(errs, fmt.Errorf("delete consumer %s on %s: %w", o.Consumer, w.cstream, err))
		}
	}
	if k == KindStatic {
		c.deletePositions(ctx, stream, group, w.oldPos)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w; the group is on the %s layout, run the same relayout again to remove what is left of the %s layout", err, w.plan.To, otherLayout(w.plan.To))
	}
	return nil
}

// stillStopped refuses, as the plan did, an instance that started on the
// old consumers since.
func (c *Client) stillStopped(ctx context.Context, w *relayoutWork) error {
	now := *w
	now.plan.Old = nil
	for _, o := range w.plan.Old {
		ci, err := c.consumerInfo(ctx, w.cstream, o.Consumer)
		if err != nil {
			return err
		}
		o.ci = ci
		now.plan.Old = append(now.plan.Old, o)
	}
	return c.refuseRunning(&now, nil)
}

// relayoutValue is the configuration stored for layout l.
func relayoutValue(cfg health.GroupConfig, l Layout) ([]byte, error) {
	switch c := cfg.(type) {
	case StaticConfig:
		c.Layout = l.stored()
		return json.Marshal(c)
	case ElasticConfig:
		c.Layout = l.stored()
		return json.Marshal(c)
	}
	return nil, fmt.Errorf("unknown configuration %T", cfg)
}
