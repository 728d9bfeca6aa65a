package cg

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Least privilege. Permissions computes, from names alone, the subjects a
// NATS user needs to act in one role for one group: the JetStream API
// requests it makes, the acks it sends, the KV keys it reads and writes,
// the advisories and liveness subjects it listens on, and the inbox its
// replies come back to. Every entry carries why it is there.
//
// What names cannot narrow is said in the entry: NATS subjects match whole
// tokens, so "every consumer of this group" on a static group's stream is
// "every consumer of the stream" unless the members are named, and an
// elastic member deletes the consumers of dropped members of its own group
// (its work stream holds nothing else).

// Role is what a NATS user may do with one group.
type Role string

// The roles Permissions knows.
const (
	// RoleMember joins, pulls, acks, steps down and stands by as one
	// member of the group, and nothing else.
	RoleMember Role = "member"
	// RoleOperator creates, changes and deletes the group (and its work
	// stream, elastic), and reads what the viewer reads.
	RoleOperator Role = "operator"
	// RoleViewer reads the group's state: info, watch and check.
	RoleViewer Role = "viewer"
)

// Roles lists the roles in the order cg shows them.
func Roles() []Role { return []Role{RoleMember, RoleOperator, RoleViewer} }

// ParseRole reads a role's name.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if slices.Contains(Roles(), r) {
		return r, nil
	}
	return "", fmt.Errorf("%w %q: want member, operator or viewer", ErrUnknownRole, s)
}

// PermissionOptions say what to compute permissions for.
type PermissionOptions struct {
	// Role is the role (RoleMember when empty).
	Role Role
	// Members: for RoleMember exactly one, the member the user acts as;
	// for the other roles optional, the group's members, which narrows
	// what a static group's operator and viewer may touch on the stream
	// to those members' consumers.
	Members []string
	// DeadLetter, when set, is the subject a member publishes dead
	// letters to.
	DeadLetter string
	// InboxPrefix is the prefix of the user's reply inboxes ("_INBOX"
	// when empty). A per-user prefix keeps one user from reading the
	// replies meant for another.
	InboxPrefix string
	// Domain is the JetStream domain ("" for none).
	Domain string
	// Layout is the group's layout (LayoutMember when empty). A
	// partition-layout group's consumers are one per partition,
	// <group>-p<k>: with Partitions set (the group's partition count)
	// rights name each of them; without, they cover every consumer of the
	// stream the consumers live on.
	Layout     Layout
	Partitions int
	// Dynamic, for an elastic group's RoleMember: the member runs with
	// dynamic membership (JoinOptions.Dynamic), so it also writes the
	// group's configuration (its own add and drop, and dropping members
	// gone for their session timeout) and the group's records in
	// DynamicBucket.
	Dynamic bool
}

// PermissionEntry is one subject a role needs, and why.
type PermissionEntry struct {
	Subject string `json:"subject"`
	Why     string `json:"why"`
}

// PermissionSet is what a role needs: subjects to publish to, subjects to
// subscribe to, and whether it answers requests (allow_responses).
type PermissionSet struct {
	Kind      Kind              `json:"kind"`
	Stream    string            `json:"stream"`
	Group     string            `json:"group"`
	Role      Role              `json:"role"`
	Members   []string          `json:"members,omitempty"`
	Publish   []PermissionEntry `json:"publish"`
	Subscribe []PermissionEntry `json:"subscribe"`
	// Responses: the user answers requests sent to it (a member's pinned
	// instance answers its standbys' liveness checks), which the server
	// allows with allow_responses rather than a publish right on every
	// inbox.
	Responses    bool   `json:"allow_responses,omitempty"`
	ResponsesWhy string `json:"allow_responses_why,omitempty"`
	// Notes say what the names could not narrow.
	Notes []string `json:"notes,omitempty"`
}

// PublishSubjects are the publish subjects alone.
func (p PermissionSet) PublishSubjects() []string { return subjectsOf(p.Publish) }

// SubscribeSubjects are the subscribe subjects alone.
func (p PermissionSet) SubscribeSubjects() []string { return subjectsOf(p.Subscribe) }

func subjectsOf(es []PermissionEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Subject
	}
	return out
}

type permBuilder struct {
	set  PermissionSet
	seen map[string]bool
}

func (b *permBuilder) pub(subject, why string) {
	if !b.seen["p"+subject] {
		b.seen["p"+subject] = true
		b.set.Publish = append(b.set.Publish, PermissionEntry{subject, why})
	}
}

func (b *permBuilder) sub(subject, why string) {
	if !b.seen["s"+subject] {
		b.seen["s"+subject] = true
		b.set.Subscribe = append(b.set.Subscribe, PermissionEntry{subject, why})
	}
}

// Permissions computes what a user needs to act in o.Role for the group
// of kind k named group on stream, from names alone.
func Permissions(k Kind, stream, group string, o PermissionOptions) (PermissionSet, error) {
	if err := k.Valid(); err != nil {
		return PermissionSet{}, err
	}
	if o.Role == "" {
		o.Role = RoleMember
	}
	if _, err := ParseRole(string(o.Role)); err != nil {
		return PermissionSet{}, err
	}
	for what, name := range map[string]string{"stream": stream, "group": group} {
		if err := permName(what, name); err != nil {
			return PermissionSet{}, err
		}
	}
	for _, m := range o.Members {
		if err := permName("member", m); err != nil {
			return PermissionSet{}, err
		}
	}
	if o.Role == RoleMember && len(o.Members) != 1 {
		return PermissionSet{}, fmt.Errorf("%w: the member role is for one member: name it", ErrMemberNotFound)
	}
	if o.Dynamic {
		if o.Role != RoleMember {
			return PermissionSet{}, errors.New("the dynamic option is for the member role: it adds what a member run with dynamic membership writes")
		}
		if k != KindElastic {
			return PermissionSet{}, fmt.Errorf("%s group %q has a fixed membership; only an elastic group's members can add and drop themselves", k, group)
		}
	}
	if o.DeadLetter != "" {
		if o.Role != RoleMember {
			return PermissionSet{}, errors.New("a dead-letter subject is published to by members only")
		}
		if strings.ContainsAny(o.DeadLetter, " \t\r\n") || strings.HasPrefix(o.DeadLetter, ".") ||
			strings.HasSuffix(o.DeadLetter, ".") || strings.Contains(o.DeadLetter, "..") {
			return PermissionSet{}, fmt.Errorf("dead-letter subject %q is not a valid subject", o.DeadLetter)
		}
	}
	inbox := o.InboxPrefix
	if inbox == "" {
		inbox = "_INBOX"
	}
	if err := permSubjectPrefix(inbox); err != nil {
		return PermissionSet{}, err
	}
	b := &permBuilder{seen: map[string]bool{}}
	b.set = PermissionSet{Kind: k, Stream: stream, Group: group, Role: o.Role, Members: slices.Clone(o.Members)}
	api := "$JS.API"
	if o.Domain != "" {
		api = "$JS." + o.Domain + ".API"
	}
	if _, err := ParseLayout(string(o.Layout)); err != nil {
		return PermissionSet{}, err
	}
	if o.Partitions < 0 {
		return PermissionSet{}, fmt.Errorf("partitions %d must not be negative", o.Partitions)
	}
	p := permCtx{b: b, k: k, stream: stream, group: group, api: api, o: o,
		ws: k.WorkStream(stream, group), bucket: k.LayoutBucket(o.Layout), key: Key(stream, group)}

	p.b.pub(api+".INFO", "connect: cg checks that JetStream answers for this account (read-only account info)")
	p.b.sub(inbox+".>", "replies to every request (JetStream API, KV, pulls) come back to the user's inbox")
	if o.Role == RoleOperator || o.Layout.orDefault() == LayoutPartition {
		// A group is looked up in the reference's bucket first, then in
		// cg's partition-layout bucket; create checks both (a name is
		// unique across layouts).
		for _, l := range Layouts() {
			p.kvRead(k.LayoutBucket(l), p.key, "the group's configuration, looked up in either layout's bucket")
		}
	}
	switch o.Role {
	case RoleMember:
		p.member(o.Members[0])
		if o.Dynamic {
			p.dynamicMember()
		}
	case RoleOperator:
		p.viewer()
		p.operator()
	case RoleViewer:
		p.viewer()
	}
	return b.set, nil
}

type permCtx struct {
	b                      *permBuilder
	k                      Kind
	stream, group, api, ws string
	bucket, key            string
	o                      PermissionOptions
}

// kvRead is what reading one key of a bucket takes.
func (p permCtx) kvRead(bucket, key, what string) {
	p.b.pub(p.api+".STREAM.INFO.KV_"+bucket, "open the KV bucket "+bucket+" ("+what+")")
	p.b.pub(p.api+".DIRECT.GET.KV_"+bucket+".$KV."+bucket+"."+key, "read "+what+", key "+key+" only (direct get by subject)")
}

// kvWatch is what following one key takes: an ordered consumer filtered
// to that key.
func (p permCtx) kvWatch(bucket, key, what string) {
	p.b.pub(p.api+".CONSUMER.CREATE.KV_"+bucket+".*.$KV."+bucket+"."+key,
		"watch "+what+": an ordered consumer filtered to "+key)
	p.b.pub(p.api+".CONSUMER.DELETE.KV_"+bucket+".*",
		"remove its own watchers of "+bucket+" when done (ordered consumers with random names; the bucket's stream has no others)")
}

func (p permCtx) kvWrite(bucket, key, what string) {
	p.b.pub("$KV."+bucket+"."+key, "write "+what+" (put, compare-and-set, delete)")
}

// member is a member's list.
func (p permCtx) member(m string) {
	if p.o.Layout.orDefault() == LayoutPartition {
		p.layoutMember(m)
		return
	}
	cons := m
	if p.k == KindStatic {
		cons = p.group + "-" + m
	}
	api, ws := p.api, p.ws
	p.kvRead(p.bucket, p.key, "the group's configuration")
	p.kvWatch(p.bucket, p.key, "the group's configuration")
	p.b.pub(api+".STREAM.INFO."+p.stream, "join: read the stream's configuration (partition transform, replicas)")
	if p.k == KindElastic {
		p.b.pub(api+".STREAM.INFO."+ws, "join: check the group's work stream "+ws)
	}
	p.b.pub(api+".CONSUMER.INFO."+ws+"."+cons, "bind to the member's consumer "+cons+" and read its pin and ack floor")
	p.b.pub(api+".CONSUMER.CREATE."+ws+"."+cons, "create the member's consumer "+cons+" (or recreate it where it left off)")
	p.b.pub(api+".CONSUMER.CREATE."+ws+"."+cons+".>", "create the member's consumer "+cons+" when it has a single filter")
	p.b.pub(api+".CONSUMER.MSG.NEXT."+ws+"."+cons, "pull messages from "+cons)
	p.b.pub("$JS.ACK."+ws+"."+cons+".>", "ack, nak, term and in-progress messages of "+cons)
	p.b.pub(api+".CONSUMER.UNPIN."+ws+"."+cons, "step down: hand the pin to a standby on stop, and unpin a dead pinned instance")
	p.b.pub("_CG.PIN."+ws+"."+cons+".*", "liveness: a standby asks the pinned instance of "+cons+" whether it is alive")
	p.b.sub("_CG.PIN."+ws+"."+cons+".*", "liveness: the pinned instance of "+cons+" answers its standbys")
	p.b.set.Responses = true
	p.b.set.ResponsesWhy = "liveness: the pinned instance answers its standbys' requests on their inboxes"
	if p.k == KindStatic {
		pk := positionKey(p.stream, p.group, m)
		p.kvRead(PositionsBucket, pk, "the member's saved position")
		p.kvWrite(PositionsBucket, pk, "the member's saved position")
	} else {
		p.b.sub("$JS.EVENT.ADVISORY.CONSUMER.*."+ws+".*", "wake up at once when a consumer of the work stream "+ws+" goes away")
		p.b.pub(api+".CONSUMER.LIST."+ws, "rebalance: find the consumers of the group's work stream that still hold this member's partitions")
		p.b.pub(api+".CONSUMER.INFO."+ws+".*", "rebalance: check a consumer of the work stream before letting go of it")
		p.b.pub(api+".CONSUMER.DELETE."+ws+".*", "rebalance: delete this member's own consumer, or a dropped member's, to hand partitions over "+
			"(the work stream "+ws+" holds only this group's consumers)")
		p.b.set.Notes = append(p.b.set.Notes, "an elastic member may delete any consumer of its own group's work stream "+ws+
			": a rebalance removes the consumers of members dropped from the group, which names cannot single out")
	}
	pp := PoisonKeyPrefix(p.k, p.stream, p.group, m)
	p.b.pub(api+".STREAM.INFO.KV_"+PoisonBucket, "with a retry policy: open the bucket "+PoisonBucket+" of parked messages and poison counters")
	p.b.pub(api+".DIRECT.GET.KV_"+PoisonBucket+".$KV."+PoisonBucket+"."+pp+".>", "with a retry policy: read this member's park state and counters, its own keys only")
	p.kvWatch(PoisonBucket, pp+".>", "this member's park state and release requests")
	p.kvWrite(PoisonBucket, pp+".>", "this member's park state and counters, its own keys only")
	if p.o.DeadLetter != "" {
		p.b.pub(p.o.DeadLetter, "publish messages that failed too often (dead letters)")
		p.b.pub(api+".STREAM.NAMES", "with a dead-letter subject: check at join that a stream captures it")
	}
}

// consumers are the subjects' last tokens for the group's member
// consumers: exact names when the members are known.
func (p permCtx) consumers() ([]string, bool) {
	if p.k == KindElastic {
		return []string{"*"}, true // the work stream holds the group's consumers only
	}
	if p.o.Layout.orDefault() == LayoutPartition {
		return p.partitionConsumers()
	}
	if len(p.o.Members) == 0 {
		return []string{"*"}, false
	}
	var out []string
	for _, m := range p.o.Members {
		out = append(out, p.group+"-"+m)
	}
	return out, true
}

func (p permCtx) viewer() {
	api, ws := p.api, p.ws
	p.kvRead(p.bucket, p.key, "the group's configuration")
	p.kvWatch(p.bucket, p.key, "the group's configuration")
	for _, b := range []string{StaticBucket, ElasticBucket, StaticPartitionBucket, ElasticPartitionBucket} {
		p.b.pub(api+".STREAM.INFO.KV_"+b, "list groups: open the bucket "+b)
		p.kvWatch(b, ">", "every group's key in "+b+" (listing the groups: name clashes, check)")
	}
	p.b.set.Notes = append(p.b.set.Notes, "listing groups (the name-clash checks of create, and check) reads every key of the "+
		"configuration buckets: read only, but it shows the other groups' names and configurations")
	p.b.pub(api+".STREAM.INFO."+p.stream, "info, check: the stream's configuration and state")
	p.b.pub(api+".DIRECT.GET."+p.stream, "lag: count pending messages per partition and read the oldest one's time")
	p.b.pub(api+".STREAM.MSG.GET."+p.stream, "lag: read the oldest pending message's time when direct get is off")
	if p.k == KindElastic {
		p.b.pub(api+".STREAM.INFO."+ws, "info, check: the work stream's configuration and state")
		p.b.pub(api+".DIRECT.GET."+ws, "lag: the work stream's pending messages per partition")
		p.b.pub(api+".STREAM.MSG.GET."+ws, "lag: the work stream's oldest pending message")
	}
	if p.k == KindStatic {
		p.b.pub(api+".STREAM.INFO.KV_"+PositionsBucket, "info: open the bucket "+PositionsBucket+" of saved positions")
		if len(p.o.Members) == 0 {
			p.b.pub(api+".DIRECT.GET.KV_"+PositionsBucket+".$KV."+PositionsBucket+"."+p.key+".*", "info: read the members' saved positions")
		}
		for _, m := range p.o.Members {
			p.b.pub(api+".DIRECT.GET.KV_"+PositionsBucket+".$KV."+PositionsBucket+"."+positionKey(p.stream, p.group, m), "info: read member "+m+"'s saved position")
		}
	}
	gp := string(p.k) + "." + p.stream + "." + p.group
	p.b.pub(api+".STREAM.INFO.KV_"+PoisonBucket, "info, watch, check: open the bucket "+PoisonBucket+" of parked messages and counters")
	p.b.pub(api+".DIRECT.GET.KV_"+PoisonBucket+".$KV."+PoisonBucket+"."+gp+".>", "info: read the group's park state and counters")
	p.kvWatch(PoisonBucket, gp+".>", "the group's parked messages and counters")
	if p.k == KindElastic {
		dp := dynamicPrefix(p.stream, p.group) + ".>"
		p.b.pub(api+".STREAM.INFO.KV_"+DynamicBucket, "info, watch, check: open the bucket "+DynamicBucket+" of dynamic members and their liveness records (check: the server's time)")
		p.b.pub(api+".DIRECT.GET.KV_"+DynamicBucket+".$KV."+DynamicBucket+"."+dp, "info, watch, check: read the group's dynamic members and when each was last seen")
		p.kvWatch(DynamicBucket, dp, "the group's dynamic members (listing their keys)")
	}
	cons, narrow := p.consumers()
	for _, c := range cons {
		p.b.pub(api+".CONSUMER.INFO."+ws+"."+c, "info, watch, check: each member consumer's state, pin and ack floor")
	}
	p.b.pub(api+".CONSUMER.LIST."+ws, "check: find consumers on "+ws+" that clash with the group's")
	p.b.pub(api+".CONSUMER.NAMES."+ws, "create, check: find consumer names on "+ws+" that clash with the group's")
	p.b.sub("$JS.EVENT.ADVISORY.CONSUMER.PINNED."+ws+".*", "watch: pins as the server makes them")
	p.b.sub("$JS.EVENT.ADVISORY.CONSUMER.UNPINNED."+ws+".*", "watch: pins as the server drops them")
	if !narrow {
		p.b.set.Notes = append(p.b.set.Notes, "without the members named, consumer rights cover every consumer of "+p.stream+
			" (subjects match whole tokens, not the prefix "+p.group+"-): name the members to narrow them")
	}
}

func (p permCtx) operator() {
	api, ws := p.api, p.ws
	p.b.pub(api+".STREAM.CREATE.KV_"+p.bucket, "create: make the configuration bucket "+p.bucket+" on the first group")
	if p.k == KindStatic && p.o.Layout.orDefault() == LayoutPartition {
		p.b.pub(api+".STREAM.INFO.KV_"+PositionsBucket, "delete: open the positions bucket")
		p.kvWrite(PositionsBucket, p.key+".*", "the partitions' saved positions (purged on delete)")
	}
	p.kvWrite(p.bucket, p.key, "the group's configuration")
	p.b.pub(api+".STREAM.NAMES", "create: find groups whose server names would clash with this one")
	cons, _ := p.consumers()
	for _, c := range cons {
		p.b.pub(api+".CONSUMER.DELETE."+ws+"."+c, "delete: remove the group's member consumers")
		p.b.pub(api+".CONSUMER.UNPIN."+ws+"."+c, "step-down: unpin a member's active instance")
		p.b.pub(api+".CONSUMER.PAUSE."+ws+"."+c, "reset: pause and resume the members' consumers around a reset")
		p.b.pub(api+".CONSUMER.RESET."+ws+"."+c, "reset: move a member consumer to another position")
	}
	if p.k == KindStatic {
		p.b.pub(api+".CONSUMER.CREATE."+p.stream+".>", "reset: a short-lived counting consumer for the plan (ack none, in memory, removed by the server 2 s after; never deleted by cg, so no right to delete consumers is needed)")
		p.b.pub(api+".STREAM.MSG.GET."+p.stream, "reset: find the first message stored at or after a time")
		p.b.set.Notes = append(p.b.set.Notes, "reset's plan counts messages with a short-lived consumer of its own on "+p.stream+
			": consumer create on that stream is not narrowed to the group's names (a create cannot delete anything)")
	} else {
		p.b.pub(api+".STREAM.PURGE."+ws, "reset to the end: purge the members' partitions from the group's own work stream")
	}
	p.b.pub(api+".STREAM.CREATE.KV_"+PoisonBucket, "create: make the bucket "+PoisonBucket+" of parked messages and poison counters")
	p.kvWrite(PoisonBucket, string(p.k)+"."+p.stream+"."+p.group+".>", "release parked messages; remove the group's park state and counters on delete")
	if p.k == KindStatic {
		p.b.pub(api+".STREAM.CREATE.KV_"+PositionsBucket, "create: make the bucket "+PositionsBucket+" where members save their positions")
		p.b.pub(api+".STREAM.INFO.KV_"+PositionsBucket, "create, delete: open the positions bucket")
		for _, m := range p.o.Members {
			p.kvWrite(PositionsBucket, positionKey(p.stream, p.group, m), "member "+m+"'s saved position (purged on delete)")
		}
		if len(p.o.Members) == 0 {
			p.kvWrite(PositionsBucket, p.key+".*", "the members' saved positions (purged on delete)")
		}
	} else {
		p.kvWrite(DynamicBucket, dynamicPrefix(p.stream, p.group)+".>", "add: take a member that added itself over as the operator's; delete: remove the group's dynamic records")
		p.b.pub(api+".STREAM.CREATE."+ws, "create: make the group's work stream "+ws)
		p.b.pub(api+".STREAM.UPDATE."+ws, "create: repair the group's work stream "+ws)
		p.b.pub(api+".STREAM.DELETE."+ws, "delete: remove the group's work stream "+ws)
	}
}

// dynamicMember is what dynamic membership adds to a member's list: it
// marks itself and keeps a liveness record, adds itself to the group and
// drops itself on the clean stop of its last instance, and with the
// group's other dynamic instances drops the members gone for their
// session timeout (reading their records just before) and tidies their
// records away.
func (p permCtx) dynamicMember() {
	api := p.api
	dp := dynamicPrefix(p.stream, p.group) + ".>"
	p.b.pub(api+".STREAM.INFO.KV_"+DynamicBucket, "dynamic: open the bucket "+DynamicBucket+" of dynamic members and their liveness records")
	p.b.pub(api+".STREAM.CREATE.KV_"+DynamicBucket, "dynamic: the first dynamic join (of any group) makes the bucket "+DynamicBucket)
	p.b.pub(api+".DIRECT.GET.KV_"+DynamicBucket+".$KV."+DynamicBucket+"."+dp,
		"dynamic: read its own mark at start, and the latest write of a gone member's records just before dropping it (this group's keys only)")
	p.kvWatch(DynamicBucket, dp, "the group's dynamic members and liveness records (judging who is gone; on stop, its own member's other instances)")
	p.kvWrite(DynamicBucket, dp, "this group's dynamic records: its own mark and liveness record, and a gone member's once it is dropped")
	p.kvWrite(p.bucket, p.key, "the group's configuration: adding itself, dropping itself on its last clean stop, dropping members gone for their session timeout")
	p.b.set.Notes = append(p.b.set.Notes, "a dynamic member writes the group's configuration and every dynamic record of the group: "+
		"it drops members gone for their session timeout, which names cannot single out, so it could change the membership in any way")
}

// permName refuses a name that cannot be a subject token.
func permName(what, name string) error {
	if name == "" || strings.ContainsAny(name, ".*> \t\r\n") {
		return fmt.Errorf("%s %q cannot be part of a subject: no dots, spaces, * or >", what, name)
	}
	return nil
}

func permSubjectPrefix(s string) error {
	if strings.ContainsAny(s, "*> \t\r\n") || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return fmt.Errorf("inbox prefix %q is not a subject prefix", s)
	}
	return nil
}

// SubjectMatches reports whether subject is covered by pattern, NATS
// wildcards (* one token, > the rest) in pattern only.
func SubjectMatches(pattern, subject string) bool {
	pt, st := strings.Split(pattern, "."), strings.Split(subject, ".")
	for i, t := range pt {
		if t == ">" {
			return len(st) > i
		}
		if i >= len(st) || (t != "*" && t != st[i]) {
			return false
		}
	}
	return len(pt) == len(st)
}

// RolesAllowing lists the roles of the group whose permissions cover
// subject (publish or subscribe), for member when the member role is
// asked about ("" for none). o.Dynamic applies to the member role alone.
func RolesAllowing(k Kind, stream, group, member, subject string, publish bool, o PermissionOptions) []Role {
	var out []Role
	for _, r := range Roles() {
		oo := o
		oo.Role = r
		if r == RoleMember {
			if member == "" {
				continue
			}
			oo.Members = []string{member}
		} else {
			oo.Dynamic = false
		}
		set, err := Permissions(k, stream, group, oo)
		if err != nil {
			continue
		}
		list := set.Subscribe
		if publish {
			list = set.Publish
		}
		for _, e := range list {
			if SubjectMatches(e.Subject, subject) {
				out = append(out, r)
				break
			}
		}
	}
	return out
}

// PermissionError is the server refusing a subject to the user.
type PermissionError struct {
	// Publish is true for a refused publish, false for a subscribe.
	Publish bool
	Subject string
	// Server is the server's wording.
	Server string
}

func (e *PermissionError) Error() string {
	op := "subscribe to"
	if e.Publish {
		op = "publish to"
	}
	return "permission denied: this user may not " + op + " " + e.Subject
}

func (e *PermissionError) Unwrap() error { return ErrPermission }

// ParsePermissionViolation reads the server's wording of a permissions
// violation ("Permissions Violation for Publish to \"x\"", also after
// nats.go's "nats: permissions violation: " prefix).
func ParsePermissionViolation(msg string) (*PermissionError, bool) {
	low := strings.ToLower(msg)
	i := strings.Index(low, "permissions violation for ")
	if i < 0 {
		return nil, false
	}
	rest := msg[i+len("permissions violation for "):]
	e := &PermissionError{Server: strings.TrimSpace(msg)}
	switch {
	case strings.HasPrefix(strings.ToLower(rest), "publish to "):
		e.Publish = true
		rest = rest[len("publish to "):]
	case strings.HasPrefix(strings.ToLower(rest), "subscription to "):
		rest = rest[len("subscription to "):]
	default:
		return nil, false
	}
	rest = strings.TrimSpace(rest)
	if strings.HasPrefix(rest, `"`) {
		if j := strings.Index(rest[1:], `"`); j >= 0 {
			rest = rest[1 : j+1]
		}
	} else if j := strings.IndexAny(rest, " \r\n"); j >= 0 {
		rest = rest[:j]
	}
	e.Subject = rest
	return e, e.Subject != ""
}

// partitionConsumers are the last tokens of a partition-layout group's
// consumers: each by name when the partition count is known.
func (p permCtx) partitionConsumers() ([]string, bool) {
	if p.o.Partitions == 0 {
		return []string{"*"}, p.k == KindElastic
	}
	out := make([]string, p.o.Partitions)
	for i := range out {
		out[i] = PartitionConsumerName(p.group, i)
	}
	return out, true
}

// layoutMember is a member's list on a partition-layout group: what a
// member-layout member does, for each partition consumer it may come to
// own (an elastic member's partitions move, a static member's are named
// by the configuration, which permissions are not computed from).
func (p permCtx) layoutMember(m string) {
	api, ws := p.api, p.ws
	p.kvRead(p.bucket, p.key, "the group's configuration")
	p.kvWatch(p.bucket, p.key, "the group's configuration")
	p.b.pub(api+".STREAM.INFO."+p.stream, "join: read the stream's configuration (partition transform, replicas)")
	if p.k == KindElastic {
		p.b.pub(api+".STREAM.INFO."+ws, "join: check the group's work stream "+ws)
	}
	cons, narrow := p.partitionConsumers()
	for _, c := range cons {
		p.b.pub(api+".CONSUMER.INFO."+ws+"."+c, "bind to partition consumer "+c+" and read its pin and ack floor")
		p.b.pub(api+".CONSUMER.CREATE."+ws+"."+c+".>", "create partition consumer "+c+" (a single filter), or recreate it where it left off")
		p.b.pub(api+".CONSUMER.CREATE."+ws+"."+c, "create partition consumer "+c+" when the group has several filters")
		p.b.pub(api+".CONSUMER.MSG.NEXT."+ws+"."+c, "pull messages from "+c)
		p.b.pub("$JS.ACK."+ws+"."+c+".>", "ack, nak, term and in-progress messages of "+c)
		p.b.pub(api+".CONSUMER.UNPIN."+ws+"."+c, "hand the pin of "+c+" to a standby on stop or to a partition's new owner, and unpin a dead pinned instance")
		p.b.pub("_CG.PIN."+ws+"."+c+".*", "liveness: a standby asks the pinned instance of "+c+" whether it is alive")
		p.b.sub("_CG.PIN."+ws+"."+c+".*", "liveness: the pinned instance of "+c+" answers its standbys")
		if p.k == KindStatic {
			pk := positionKey(p.stream, p.group, partitionPositionName(0))
			if c != "*" {
				n := strings.TrimPrefix(c, p.group+"-p")
				pk = positionKey(p.stream, p.group, "=p"+n)
			} else {
				pk = p.key + ".*"
			}
			p.kvRead(PositionsBucket, pk, "the partition's saved position")
			p.kvWrite(PositionsBucket, pk, "the partition's saved position")
		}
	}
	p.b.set.Notes = append(p.b.set.Notes, "on a partition-layout group a member's rights cover every partition consumer of the group: "+
		"which partitions a member owns comes from the group's configuration (and moves, elastic), which permissions are not computed from")
	if !narrow {
		p.b.set.Notes = append(p.b.set.Notes, "without the partition count, consumer rights cover every consumer of "+ws+
			" (subjects match whole tokens, not the prefix "+p.group+"-p): give the partition count to name each partition consumer")
	}
	p.b.set.Responses = true
	p.b.set.ResponsesWhy = "liveness: the pinned instance answers its standbys' requests on their inboxes"
	pp := PoisonKeyPrefix(p.k, p.stream, p.group, m)
	p.b.pub(api+".STREAM.INFO.KV_"+PoisonBucket, "with a retry policy: open the bucket "+PoisonBucket+" of parked messages and poison counters")
	p.b.pub(api+".DIRECT.GET.KV_"+PoisonBucket+".$KV."+PoisonBucket+"."+pp+".>", "with a retry policy: read this member's park state and counters, its own keys only")
	p.kvWatch(PoisonBucket, pp+".>", "this member's park state and release requests")
	p.kvWrite(PoisonBucket, pp+".>", "this member's park state and counters, its own keys only")
	if p.o.DeadLetter != "" {
		p.b.pub(p.o.DeadLetter, "publish messages that failed too often (dead letters)")
		p.b.pub(api+".STREAM.NAMES", "with a dead-letter subject: check at join that a stream captures it")
	}
}
