package cg

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// CheckScope selects what Check looks at: every group (the zero value),
// the groups of Stream, or the group Group on Stream (of either kind).
// Kind, when set, limits the check to that kind.
type CheckScope struct {
	Stream string
	Group  string
	Kind   Kind
}

func (s CheckScope) validate() error {
	if s.Group != "" && s.Stream == "" {
		return invalid("group", strconv.Quote(s.Group), "needs its stream")
	}
	if s.Stream != "" {
		if err := ValidateName("stream", s.Stream); err != nil {
			return err
		}
	}
	if s.Group != "" {
		if err := ValidateStoredGroupName(s.Group); err != nil {
			return err
		}
	}
	if s.Kind != "" && s.Kind.Valid() != nil {
		return invalid("kind", strconv.Quote(s.Kind.String()), "must be static or elastic")
	}
	return nil
}

func (s CheckScope) kinds() []Kind {
	if s.Kind != "" {
		return []Kind{s.Kind}
	}
	return Kinds()
}

// Check looks for what keeps groups from consuming: the server's version,
// missing streams, invalid stored configurations, partitions nobody
// serves, members with no live instance, member consumers and stream
// transforms that drifted from the configuration, leftover consumers, and
// dynamic members gone past their session timeout with nobody to drop
// them. It changes nothing. Problems are findings in the report; the error is
// for a check that could not run at all (no connection, the buckets could
// not be read, a bad scope).
func (c *Client) Check(ctx context.Context, scope CheckScope) (health.CheckReport, error) {
	rep := health.CheckReport{Groups: []health.CheckedGroup{}, Findings: []health.Finding{}}
	if err := scope.validate(); err != nil {
		return rep, err
	}
	r := &checkRun{c: c, streams: map[string]*checkedStream{}}
	if v, err := c.ServerVersion(); err != nil {
		rep.Findings = append(rep.Findings, health.Finding{Severity: health.SeverityUnknown, Code: health.CodeCheckFailed,
			Message: "cannot tell the server's version: " + err.Error(), Hint: "check the connection"})
	} else {
		rep.ServerVersion = v.String()
		r.version = &v
		if f, bad := versionFinding(v, false); bad {
			rep.Findings = append(rep.Findings, f)
		}
	}
	targets, err := r.targets(ctx, scope)
	if err != nil {
		return rep, err
	}
	if len(targets) == 0 && scope.Stream != "" {
		if f, ok := r.scopeMissing(ctx, scope); ok {
			rep.Findings = append(rep.Findings, f)
		}
	}
	for _, t := range targets {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		var fs []health.Finding
		if t.kind == KindStatic {
			fs = r.checkStatic(ctx, t)
		} else {
			fs = r.checkElastic(ctx, t)
		}
		fs = append(fs, r.poisonFindings(ctx, t)...)
		g := health.CheckedGroup{Kind: t.kind.String(), Stream: t.stream, Group: t.group, Status: health.SeverityOK}
		for i := range fs {
			fs[i].Kind, fs[i].Stream, fs[i].Group = t.kind.String(), t.stream, t.group
			g.Status = g.Status.Worse(fs[i].Severity)
		}
		rep.Groups = append(rep.Groups, g)
		rep.Findings = append(rep.Findings, fs...)
	}
	return rep, nil
}

// versionFinding reports a server too old for pinned consumers or, when
// wholeSubject, for {{partition(N)}} without token indexes.
func versionFinding(v Version, wholeSubject bool) (health.Finding, bool) {
	if !v.AtLeast(MinPinning.Major, MinPinning.Minor) {
		return health.Finding{Severity: health.SeverityCritical, Code: health.CodeServerTooOld,
			Message: fmt.Sprintf("nats-server %s is older than %d.%d: it has no pinned consumers, which every group needs", v, MinPinning.Major, MinPinning.Minor),
			Hint:    fmt.Sprintf("upgrade the server to %d.%d or later", MinPinning.Major, MinPinning.Minor)}, true
	}
	if wholeSubject && !v.AtLeast(MinWholeSubjectPartition.Major, MinWholeSubjectPartition.Minor) {
		return health.Finding{Severity: health.SeverityCritical, Code: health.CodeServerTooOld,
			Message: wholeSubjectMessage(v),
			Hint:    wholeSubjectHint(v),
			Remedy:  &health.Remedy{Code: health.RemedyUpgradeServer, Server: fmt.Sprintf("%d.%d", v.Major, v.Minor)}}, true
	}
	return health.Finding{}, false
}

// checkRun caches what several groups of one check share.
type checkRun struct {
	c       *Client
	version *Version
	streams map[string]*checkedStream
	// staticNames: per stream, the member consumer names of every
	// readable static group on it (nil until needed).
	staticNames map[string]map[string]bool
}

type checkTarget struct {
	kind          Kind
	stream, group string
	raw           []byte
}

// remedy is the fix code for the checked group, with its place filled in.
func (t checkTarget) remedy(code health.RemedyCode) *health.Remedy {
	return &health.Remedy{Code: code, Kind: t.kind.String(), Stream: t.stream, Group: t.group}
}

// recreate is RemedyDeleteAndCreate for the checked group, lead and tail
// being the engine wording around the fix.
func (t checkTarget) recreate(lead, tail string) *health.Remedy {
	r := t.remedy(health.RemedyDeleteAndCreate)
	r.Lead, r.Tail = lead, tail
	return r
}

// targets reads the stored configurations in scope, sorted by stream,
// group and kind (static first).
func (r *checkRun) targets(ctx context.Context, scope CheckScope) ([]checkTarget, error) {
	var refs []GroupRef
	if scope.Group != "" {
		for _, kind := range scope.kinds() {
			refs = append(refs, GroupRef{Kind: kind.String(), Stream: scope.Stream, Group: scope.Group})
		}
	} else {
		all, err := r.c.ListGroups(ctx, scope.kinds()...)
		if err != nil {
			return nil, err
		}
		for _, g := range all {
			if scope.Stream == "" || g.Stream == scope.Stream {
				refs = append(refs, g)
			}
		}
	}
	var out []checkTarget
	for _, g := range refs {
		sg, err := r.c.findGroup(ctx, g.KindOf(), g.Stream, g.Group)
		if errors.Is(err, ErrGroupNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		e := sg.entry
		out = append(out, checkTarget{kind: g.KindOf(), stream: g.Stream, group: g.Group, raw: e.Value()})
	}
	slices.SortStableFunc(out, func(a, b checkTarget) int {
		return cmp.Or(strings.Compare(a.stream, b.stream), strings.Compare(a.group, b.group), strings.Compare(string(b.kind), string(a.kind)))
	})
	return out, nil
}

// scopeMissing words a stream or group asked for that has no stored group.
func (r *checkRun) scopeMissing(ctx context.Context, scope CheckScope) (health.Finding, bool) {
	st := r.stream(ctx, scope.Stream)
	switch {
	case st.err != nil:
		return health.Finding{Severity: health.SeverityUnknown, Code: health.CodeCheckFailed, Stream: scope.Stream, Group: scope.Group,
			Message: st.err.Error()}, true
	case st.missing:
		return health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamMissing, Kind: scope.Kind.String(), Stream: scope.Stream, Group: scope.Group,
			Message: fmt.Sprintf("stream %s does not exist", scope.Stream),
			Hint:    "create the stream, or check the name (nats stream ls)"}, true
	case scope.Group != "":
		kinds := make([]string, 0, 2)
		for _, k := range scope.kinds() {
			kinds = append(kinds, k.String())
		}
		return health.Finding{Severity: health.SeverityCritical, Code: health.CodeGroupMissing, Kind: scope.Kind.String(), Stream: scope.Stream, Group: scope.Group,
			Message: fmt.Sprintf("no %s group %q on stream %s", strings.Join(kinds, " or "), scope.Group, scope.Stream),
			Hint:    "list the stream's static and elastic groups",
			Remedy:  &health.Remedy{Code: health.RemedyListGroups, Stream: scope.Stream}}, true
	}
	return health.Finding{}, false
}

// checkedStream is one stream as the check saw it.
type checkedStream struct {
	handle  jetstream.Stream
	info    *jetstream.StreamInfo
	missing bool
	err     error
	// consumers by name, read once (consErr when that failed).
	consumers map[string]*jetstream.ConsumerInfo
	consErr   error
}

func (r *checkRun) stream(ctx context.Context, name string) *checkedStream {
	if st, ok := r.streams[name]; ok {
		return st
	}
	st := &checkedStream{}
	s, err := r.c.js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		st.missing = true
	case err != nil:
		st.err = fmt.Errorf("look up stream %s: %w", name, err)
	default:
		st.handle, st.info = s, s.CachedInfo()
	}
	r.streams[name] = st
	return st
}

// consumersOf lists the consumers on a stream that exists.
func (r *checkRun) consumersOf(ctx context.Context, st *checkedStream) (map[string]*jetstream.ConsumerInfo, error) {
	if st.consumers != nil || st.consErr != nil {
		return st.consumers, st.consErr
	}
	m := map[string]*jetstream.ConsumerInfo{}
	lister := st.handle.ListConsumers(ctx)
	for ci := range lister.Info() {
		m[ci.Name] = ci
	}
	if err := lister.Err(); err != nil {
		st.consErr = fmt.Errorf("list consumers of %s: %w", st.info.Config.Name, err)
		return nil, st.consErr
	}
	st.consumers = m
	return m, nil
}

// staticConsumerNames are the member consumers of every readable static
// group on stream, so that a consumer of group "a-b" is never taken for a
// leftover of group "a".
func (r *checkRun) staticConsumerNames(ctx context.Context, stream string) (map[string]bool, error) {
	if names, ok := r.staticNames[stream]; ok {
		return names, nil
	}
	groups, err := r.c.listGroups(ctx, KindStatic, stream)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, g := range groups {
		cfg, _, err := r.c.getStatic(ctx, stream, g)
		if err != nil {
			continue
		}
		for _, m := range cfg.MemberNames() {
			names[StaticConsumerName(g, m)] = true
		}
		if cfg.LayoutOf() == LayoutPartition {
			for p := range cfg.MaxMembers {
				names[PartitionConsumerName(g, p)] = true
			}
		}
	}
	if r.staticNames == nil {
		r.staticNames = map[string]map[string]bool{}
	}
	r.staticNames[stream] = names
	return names, nil
}

func failed(err error) health.Finding {
	return health.Finding{Severity: health.SeverityUnknown, Code: health.CodeCheckFailed, Message: err.Error(), Cause: err,
		Hint: "check the connection and this user's permissions, then run the check again"}
}

// sentinelDetail drops a sentinel's own text from the front of err's.
func sentinelDetail(err, sentinel error) string {
	return strings.TrimPrefix(err.Error(), sentinel.Error()+": ")
}

// groupBasics checks what both kinds need first: the stored configuration
// and the origin stream. ok is false when nothing more can be checked.
func (r *checkRun) groupBasics(ctx context.Context, t checkTarget, cfgErr error) (*checkedStream, []health.Finding, bool) {
	var out []health.Finding
	st := r.stream(ctx, t.stream)
	switch {
	case st.err != nil:
		out = append(out, failed(st.err))
	case st.missing:
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamMissing,
			Message: fmt.Sprintf("stream %s does not exist: the group has nothing to consume", t.stream),
			Hint:    "recreate the stream, or delete the group",
			Remedy:  t.remedy(health.RemedyRecreateStreamOrDelete)})
	}
	if cfgErr != nil {
		// A static member stops on a value it cannot use; an elastic one
		// keeps the last good configuration it had (elastic_member.go).
		effect := "; members stop on it"
		if t.kind == KindElastic {
			effect = "; running members keep the last good configuration they read, and no new instance can start"
		}
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeConfigInvalid,
			Message: sentinelDetail(cfgErr, ErrInvalidConfig) + effect,
			Hint:    "delete the group and create it again",
			Remedy:  t.remedy(health.RemedyRecreateInvalidConfig)})
	}
	return st, out, len(out) == 0
}

func (r *checkRun) checkStatic(ctx context.Context, t checkTarget) []health.Finding {
	cfg, cfgErr := decodeStatic(Key(t.stream, t.group), t.raw)
	st, out, ok := r.groupBasics(ctx, t, cfgErr)
	if !ok {
		return out
	}
	pt, err := StreamPartitioning(st.info)
	if err != nil {
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamNotPartitioned,
			Message: sentinelDetail(err, ErrStreamNotReady) + "; members receive nothing", Cause: err,
			Hint: fmt.Sprintf("give the stream back a {{partition(%d,...)}} subject transform, or recreate the group", cfg.MaxMembers)})
	} else {
		if pt.Partitions != cfg.MaxMembers {
			out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamPartitionsMismatch,
				Message: fmt.Sprintf("stream %s partitions into %d ({{partition(%d,...)}}) but the group has %d partitions: messages land on partitions no member expects", t.stream, pt.Partitions, pt.Partitions, cfg.MaxMembers),
				Hint:    fmt.Sprintf("restore {{partition(%d,...)}} in the stream's subject transform, or delete and recreate the group with %d partitions", cfg.MaxMembers, pt.Partitions)})
		}
		produced := transformedPattern(pt.Destination)
		for _, f := range cfg.SubjectFilters() {
			if !subjectsIntersect(f, produced) {
				out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeStreamFilterMismatch,
					Message: fmt.Sprintf("group filter %q matches nothing the stream's transform produces (<partition>.%s): members receive nothing through it", f, produced),
					Hint:    fmt.Sprintf("restore the stream's subject transform (now %q -> %q), or recreate the group with filters it produces", pt.Source, pt.Destination)})
			}
		}
		out = append(out, streamSubjectFindings(t, st.info, cfg, out)...)
		if r.version != nil {
			if f, bad := versionFinding(*r.version, len(pt.Wildcards) == 0); bad && r.version.AtLeast(MinPinning.Major, MinPinning.Minor) {
				out = append(out, f)
			}
		}
	}
	cons, err := r.consumersOf(ctx, st)
	if err != nil {
		return append(out, failed(err))
	}
	if cfg.LayoutOf() == LayoutPartition {
		return append(out, r.checkLayout(t, cfg, t.stream, cons, func(m string) string { return StaticConsumerName(t.group, m) })...)
	}
	out = append(out, slowPathFindings(t, st.info, cons, func(m string) string { return StaticConsumerName(t.group, m) }, cfg.MemberNames())...)
	own := map[string]bool{}
	for _, m := range cfg.MemberNames() {
		own[StaticConsumerName(t.group, m)] = true
	}
	out = append(out, r.checkMembers(ctx, t, cfg, st, cons, func(m string) string { return StaticConsumerName(t.group, m) })...)
	others, err := r.staticConsumerNames(ctx, t.stream)
	if err != nil {
		return append(out, failed(err))
	}
	for _, name := range sortedKeys(cons) {
		ci := cons[name]
		if !strings.HasPrefix(name, t.group+"-") || own[name] || others[name] || !slices.Contains(ci.Config.PriorityGroups, PriorityGroup) {
			continue
		}
		out = append(out, leftover(t, ci, t.stream))
	}
	return out
}

func (r *checkRun) checkElastic(ctx context.Context, t checkTarget) []health.Finding {
	cfg, cfgErr := decodeElastic(Key(t.stream, t.group), t.raw)
	origin, out, ok := r.groupBasics(ctx, t, cfgErr)
	if !ok {
		return out
	}
	out = append(out, streamSubjectFindings(t, origin.info, cfg, out)...)
	if r.version != nil {
		if f, bad := versionFinding(*r.version, wholeSubject(cfg)); bad && r.version.AtLeast(MinPinning.Major, MinPinning.Minor) {
			out = append(out, f)
		}
	}
	wsName := WorkStreamName(t.stream, t.group)
	ws := r.stream(ctx, wsName)
	switch {
	case ws.err != nil:
		return append(out, failed(ws.err))
	}
	if fs, ok := workStreamFindings(t, cfg, ws); !ok {
		return append(out, fs...)
	}
	out = append(out, workStreamDrift(t, cfg, ws.info)...)
	out = append(out, workStreamSettingsFindings(t, cfg, origin.info, ws.info)...)
	cons, err := r.consumersOf(ctx, ws)
	if err != nil {
		return append(out, failed(err))
	}
	if cfg.LayoutOf() == LayoutPartition {
		out = append(out, r.checkLayout(t, cfg, wsName, cons, func(m string) string { return m })...)
		out = append(out, r.dynamicFindings(ctx, t, cfg)...)
		for _, name := range sortedKeys(cons) {
			if !cfg.IsMember(name) && !isPartitionConsumerOf(name, t.group, cfg.MaxMembers) {
				out = append(out, leftover(t, cons[name], wsName))
			}
		}
		return out
	}
	out = append(out, slowPathFindings(t, ws.info, cons, func(m string) string { return m }, cfg.MemberNames())...)
	out = append(out, r.checkMembers(ctx, t, cfg, ws, cons, func(m string) string { return m })...)
	out = append(out, r.dynamicFindings(ctx, t, cfg)...)
	for _, name := range sortedKeys(cons) {
		if !cfg.IsMember(name) {
			out = append(out, leftover(t, cons[name], wsName))
		}
	}
	return out
}

// workStreamDrift compares the work stream with what the configuration
// makes of it (ensureWorkStream).
func workStreamDrift(t checkTarget, cfg ElasticConfig, si *jetstream.StreamInfo) []health.Finding {
	var out []health.Finding
	name := si.Config.Name
	recreate := "delete and recreate the group"
	recreateR := t.remedy(health.RemedyRecreateElastic)
	// Sources and transforms are repaired in place by re-running create;
	// retention cannot be changed on an existing stream.
	repair := "re-run the group's create (it repairs the work stream's sources), or " + recreate
	repairR := t.remedy(health.RemedyRepairWorkStreamSources)
	repairR.MaxMembers = cfg.MaxMembers
	if si.Config.Retention != jetstream.WorkQueuePolicy {
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeWorkStreamDrift,
			Message: fmt.Sprintf("work stream %s has %s retention, not work-queue: consumed messages are never removed and the buffer caps do not hold", name, si.Config.Retention),
			Hint:    recreate, Remedy: recreateR})
	}
	want := ElasticTransforms(cfg)
	srcs := si.Config.Sources
	switch {
	case len(srcs) != 1 || srcs[0] == nil || srcs[0].Name != t.stream:
		var names []string
		for _, s := range srcs {
			if s != nil {
				names = append(names, s.Name)
			}
		}
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeWorkStreamDrift,
			Message: fmt.Sprintf("work stream %s sources %v, not exactly the group's stream %s", name, names, t.stream),
			Hint:    repair, Remedy: repairR})
	case srcs[0].FilterSubject != "" || !sameTransforms(srcs[0].SubjectTransforms, want):
		have := formatTransforms(srcs[0].SubjectTransforms)
		if srcs[0].FilterSubject != "" {
			have = "filter " + srcs[0].FilterSubject + " " + have
		}
		out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeWorkStreamDrift,
			Message: fmt.Sprintf("work stream %s sources %s through %s, but the group's configuration gives %s: messages land on the wrong partitions or not at all", name, t.stream, have, formatTransforms(want)),
			Hint:    repair, Remedy: repairR})
	}
	for _, s := range si.Sources {
		if s != nil && s.Error != nil {
			out = append(out, health.Finding{Severity: health.SeverityCritical, Code: health.CodeWorkStreamSourceError,
				Message: fmt.Sprintf("work stream %s cannot source %s: %s", name, s.Name, s.Error.Description),
				Hint:    "look at the server's log and the stream's state (nats stream info " + name + ")"})
		}
	}
	return out
}

// checkMembers looks at each member's consumer on st and at the
// partitions no live instance serves. consumerName maps a member to its
// consumer's name.
func (r *checkRun) checkMembers(ctx context.Context, t checkTarget, cfg health.GroupConfig, st *checkedStream, cons map[string]*jetstream.ConsumerInfo, consumerName func(string) string) []health.Finding {
	var out []health.Finding
	var unowned []int
	for p, m := range cfg.Assignment().Owner {
		if m == "" {
			unowned = append(unowned, p)
		}
	}
	if len(unowned) > 0 {
		what := fmt.Sprintf("partitions %s have no owner", partition.Ranges(unowned))
		hint, remedy := "add members to the group", t.remedy(health.RemedyAddMembers)
		if len(cfg.MemberNames()) == 0 {
			what = "the group has no members"
		}
		if t.kind == KindStatic {
			hint, remedy = "static membership never changes: delete and recreate the group with members", t.remedy(health.RemedyStaticNoMembers)
		}
		sev, effect := health.SeverityCritical, ": their messages are consumed by no one"
		switch {
		case t.kind == KindElastic && st.info.State.Msgs == 0:
			// An elastic group is created with no members, and its work
			// stream keeps what it sources until they are added: nothing
			// is lost yet, as with a member that has no instance.
			sev, effect = health.SeverityWarning, ": nothing waits for them yet; messages wait in the work stream until members are added"
		case t.kind == KindElastic && len(cfg.MemberNames()) == 0:
			// Not started yet rather than broken: what create accepts,
			// check does not call critical. The work stream keeps the
			// messages for the members to come.
			sev, effect = health.SeverityWarning, fmt.Sprintf(" yet: %s in the work stream for the members to come", plural(st.info.State.Msgs, "message waits", "messages wait"))
		}
		out = append(out, health.Finding{Severity: sev, Code: health.CodePartitionUnowned, Partitions: unowned,
			Message: what + effect, Hint: hint, Remedy: remedy})
	}
	out = append(out, limitFindings(t, cfg)...)
	l := newLayout(cfg)
	consume := func(m string) (string, *health.Remedy) {
		r := t.remedy(health.RemedyStartMember)
		r.Member = m
		return "start an instance of member " + m, r
	}
	for _, m := range cfg.MemberNames() {
		name := consumerName(m)
		if ConsumerNameProblem(name) != "" {
			continue // limitFindings reported it; no consumer can exist
		}
		parts := l.parts[m]
		want := l.memberFilters(cfg, m)
		ci := cons[name]
		base := health.Finding{Member: m, Consumer: name}
		if ci != nil {
			if have := consumerFilters(ci.Config); !sameFilters(have, want) {
				f := base
				f.Severity, f.Code, f.Partitions = health.SeverityCritical, health.CodeConsumerFilterDrift, parts
				f.Message = fmt.Sprintf("consumer %s of member %s filters %s, but the group gives the member %s", name, m, shortList(have), shortList(want))
				f.Hint = fmt.Sprintf("stop the member's instances and delete the consumer (nats consumer rm %s %s); the next instance recreates it", st.info.Config.Name, name)
				out = append(out, f)
			}
			if !slices.Contains(ci.Config.PriorityGroups, PriorityGroup) || ci.Config.PriorityPolicy != jetstream.PriorityPolicyPinned {
				f := base
				f.Severity, f.Code = health.SeverityCritical, health.CodeConsumerPriorityDrift
				f.Message = fmt.Sprintf("consumer %s of member %s is not pinned in priority group %s (groups %v, policy %s): instances would not fail over, or share the partitions", name, m, PriorityGroup, ci.Config.PriorityGroups, policyName(ci.Config.PriorityPolicy))
				f.Hint = fmt.Sprintf("stop the member's instances and delete the consumer (nats consumer rm %s %s); the next instance recreates it", st.info.Config.Name, name)
				out = append(out, f)
			}
			if live(ci) {
				continue
			}
		}
		if len(parts) == 0 {
			continue // a member with nothing to serve serves nothing by design
		}
		f := base
		f.Partitions = parts
		why := "consumer " + name + " does not exist"
		if ci != nil {
			why = "no instance pulls from consumer " + name
		}
		backlog, known, err := r.waiting(ctx, t, st, m, ci, want)
		switch {
		case err != nil:
			f.Severity, f.Code = health.SeverityUnknown, health.CodeCheckFailed
			f.Message = fmt.Sprintf("member %s has no live instance (%s), and whether messages wait for it is unknown: %v", m, why, err)
			f.Hint, f.Remedy = consume(m)
		case (backlog > 0 || !known) && ci == nil && t.kind == KindStatic && !r.c.hasRun(ctx, t.stream, t.group, m):
			// Never started (no consumer, no saved position): the group
			// is new, not broken; what create accepts, check does not
			// call critical. Once the member has run, this is critical.
			f.Severity, f.Code = health.SeverityWarning, health.CodeMemberNoInstance
			f.Message = fmt.Sprintf("member %s has never run (%s); messages wait on its partitions %s", m, why, partition.Ranges(parts))
			f.Hint, f.Remedy = consume(m)
		case backlog > 0 || !known:
			f.Severity, f.Code = health.SeverityCritical, health.CodePartitionUnserved
			count := "messages are waiting"
			if known {
				f.Pending = backlog
				count = plural(backlog, "message is", "messages are") + " waiting"
			}
			f.Message = fmt.Sprintf("partitions %s of member %s are served by no live instance (%s) and %s", partition.Ranges(parts), m, why, count)
			f.Hint, f.Remedy = consume(m)
		default:
			f.Severity, f.Code = health.SeverityWarning, health.CodeMemberNoInstance
			f.Message = fmt.Sprintf("member %s has no live instance (%s); its partitions %s have nothing waiting yet", m, why, partition.Ranges(parts))
			f.Hint, f.Remedy = consume(m)
		}
		out = append(out, f)
	}
	return out
}

// live reports whether an instance pulls from the consumer or holds its pin.
func live(ci *jetstream.ConsumerInfo) bool {
	if ci.NumWaiting > 0 {
		return true
	}
	for _, pg := range ci.PriorityGroups {
		if pg.Group == PriorityGroup && pg.PinnedClientID != "" {
			return true
		}
	}
	return false
}

// waiting tells how many messages wait for a member with no live
// instance. With a consumer it is the consumer's count (known). Without
// one it probes, from where the member would start, for any message its
// filters match: n is then 1 or 0 and known false when one exists.
func (r *checkRun) waiting(ctx context.Context, t checkTarget, st *checkedStream, member string, ci *jetstream.ConsumerInfo, filters []string) (n uint64, known bool, err error) {
	if ci != nil {
		return ci.NumPending + uint64(ci.NumAckPending), true, nil
	}
	from := uint64(1)
	if t.kind == KindStatic {
		// A static member whose consumer went away resumes after its
		// saved position (positions.go).
		if pos, ok := r.c.savedPosition(ctx, t.stream, t.group, member); ok {
			from = pos.AckFloor + 1
		}
	}
	for _, f := range filters {
		_, err := st.handle.GetMsg(ctx, from, jetstream.WithGetMsgSubject(f))
		if err == nil {
			return 1, false, nil
		}
		if !errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, false, fmt.Errorf("look for messages on %s in %s: %w", f, st.info.Config.Name, err)
		}
	}
	return 0, true, nil
}

func leftover(t checkTarget, ci *jetstream.ConsumerInfo, stream string) health.Finding {
	f := health.Finding{Severity: health.SeverityWarning, Code: health.CodeConsumerLeftover, Consumer: ci.Name,
		Message: fmt.Sprintf("consumer %s on %s looks like one of %s group %s's but belongs to no member", ci.Name, stream, t.kind, t.group),
		Hint:    fmt.Sprintf("delete it if nothing uses it: nats consumer rm %s %s", stream, ci.Name)}
	if ci.NumWaiting > 0 {
		f.Message += fmt.Sprintf(", and %s pulling from it", plural(uint64(ci.NumWaiting), "instance is", "instances are"))
		f.Hint = "stop what pulls from it (a member no longer in the group?), then " + f.Hint
	}
	return f
}

// transformedPattern is what a partitioning destination makes of subjects
// after the partition token, wildcards standing for what the transform
// fills in: "{{partition(10,1)}}.orders.{{wildcard(1)}}" gives "orders.*".
// A function other than wildcard() may make any number of tokens, so the
// pattern ends in ">" from there.
func transformedPattern(destination string) string {
	_, rest, _ := strings.Cut(destination, "}}")
	rest = strings.TrimPrefix(rest, ".")
	if rest == "" {
		return ">"
	}
	var toks []string
	for _, tok := range strings.Split(rest, ".") {
		if !strings.Contains(tok, "{{") {
			toks = append(toks, tok)
			continue
		}
		inner := strings.ToLower(strings.ReplaceAll(strings.Trim(strings.TrimSpace(tok), "{}"), " ", ""))
		if strings.HasPrefix(tok, "{{") && strings.HasSuffix(tok, "}}") && strings.HasPrefix(inner, "wildcard(") {
			toks = append(toks, "*")
			continue
		}
		toks = append(toks, ">")
		break
	}
	return strings.Join(toks, ".")
}

// subjectsIntersect reports whether some subject matches both filters.
func subjectsIntersect(a, b string) bool {
	at, bt := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; ; i++ {
		if i == len(at) || i == len(bt) {
			return len(at) == len(bt)
		}
		x, y := at[i], bt[i]
		if x == ">" || y == ">" {
			return true
		}
		if x != "*" && y != "*" && x != y {
			return false
		}
	}
}

func sameTransforms(have, want []jetstream.SubjectTransformConfig) bool {
	key := func(ts []jetstream.SubjectTransformConfig) []string {
		out := make([]string, len(ts))
		for i, t := range ts {
			out[i] = t.Source + "\x00" + t.Destination
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(key(have), key(want))
}

func formatTransforms(ts []jetstream.SubjectTransformConfig) string {
	if len(ts) == 0 {
		return "no transform"
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = t.Source + " -> " + t.Destination
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// shortList shows a filter list, eliding the middle of a long one.
func shortList(xs []string) string {
	const most = 6
	if len(xs) <= most {
		return "[" + strings.Join(xs, " ") + "]"
	}
	return fmt.Sprintf("[%s ... %s] (%d filters)", strings.Join(xs[:most-1], " "), xs[len(xs)-1], len(xs))
}

func policyName(p jetstream.PriorityPolicy) string {
	b, err := p.MarshalJSON()
	if err != nil {
		return strconv.Itoa(int(p))
	}
	return strings.Trim(string(b), `"`)
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatUint(n, 10) + " " + many
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
