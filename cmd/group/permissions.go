package group

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// PermissionsOptions are the bound arguments of permissions.
type PermissionsOptions struct {
	F             *factory.Factory
	Kind          cg.Kind
	Stream, Group string
	Members       []string
	Role          string
	Format        string
	DeadLetter    string
	InboxPrefix   string
	Layout        string
	Partitions    int
	Dynamic       bool
}

// NewCmdPermissions builds `cg <kind> permissions <stream> <group>`.
func NewCmdPermissions(f *factory.Factory, k cg.Kind) *cobra.Command {
	opts := &PermissionsOptions{F: f, Kind: k}
	cmd := &cobra.Command{
		Use:   "permissions <stream> <group>",
		Short: "Print the NATS permissions a member, operator or viewer of a group needs",
		Long: "Print the publish and subscribe allow lists a NATS user needs to act in one role for one\n" +
			"group, computed from the names alone (no server is asked), each entry with why it is there:\n" +
			"  member    join, pull, ack, step down and stand by as member --member, and nothing else\n" +
			"  operator  create, change and delete the group" + map[cg.Kind]string{cg.KindElastic: " and its work stream"}[k] + ", and what the viewer reads\n" +
			"  viewer    info, watch and check, read only\n" +
			map[cg.Kind]string{cg.KindElastic: "--dynamic adds what a member run with 'consume --dynamic' writes: the group's configuration\n" +
				"(it adds and drops itself, and drops members gone for their session timeout) and the group's\n" +
				"dynamic membership records.\n"}[k] +
			"--format conf prints a permissions block to paste into a user of nats-server's configuration;\n" +
			"json (also --json) prints the lists for JWT tooling such as nsc. See docs/security.md.",
		Example: fmt.Sprintf("  cg %[1]s permissions ORDERS fulfillment --member m1\n"+
			"  cg %[1]s permissions ORDERS fulfillment --role operator --member m1,m2\n"+
			"  cg %[1]s permissions ORDERS fulfillment --role viewer --format json", k) +
			map[cg.Kind]string{cg.KindElastic: "\n  cg elastic permissions ORDERS fulfillment --member \"$POD_NAME\" --dynamic"}[k],
		Args: cmdutil.Args("stream", "group"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = args[0], args[1]
			return permissionsRun(cmd, opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&opts.Members, "member", nil, "the member (member role); for operator and viewer the group's members, to narrow consumer rights")
	fl.StringVar(&opts.Role, "role", "member", "member, operator or viewer")
	fl.StringVar(&opts.Format, "format", "conf", "conf (nats-server configuration) or json")
	fl.StringVar(&opts.DeadLetter, "dead-letter", "", "subject the member publishes dead letters to")
	fl.StringVar(&opts.InboxPrefix, "inbox-prefix", "_INBOX", "the user's reply inbox prefix (a per-user prefix keeps replies private)")
	fl.StringVar(&opts.Layout, "layout", "member", "the group's layout: member or partition (one consumer per partition, <group>-p<k>)")
	fl.IntVar(&opts.Partitions, "partitions", 0, "with --layout partition: the group's partition count, to name each partition consumer (0: rights cover every consumer of the stream)")
	fl.BoolVar(&opts.Dynamic, "dynamic", false, "with --role member: the member runs with 'consume --dynamic' (adds and drops itself, and drops members gone for their session timeout)")
	if k != cg.KindElastic {
		// Bound only to be refused in words rather than as an unknown flag.
		_ = fl.MarkHidden("dynamic")
	}
	return cmd
}

func permissionsRun(cmd *cobra.Command, o *PermissionsOptions) error {
	role, err := cg.ParseRole(o.Role)
	if err != nil {
		return cmdutil.UsageErrorf("--role %q: want member, operator or viewer", o.Role)
	}
	format := o.Format
	if o.F.JSON {
		format = "json"
	}
	if format != "conf" && format != "json" {
		return cmdutil.UsageErrorf("--format %q: want conf or json", o.Format)
	}
	if role == cg.RoleMember && len(o.Members) != 1 {
		return cmdutil.UsageErrorf("--role member needs exactly one --member M: the member the user consumes as")
	}
	if o.Dynamic && o.Kind != cg.KindElastic {
		return cmdutil.UsageErrorf("--dynamic: %s group %s has a fixed membership; only an elastic group's members add and drop themselves", o.Kind, o.Group)
	}
	if o.Dynamic && role != cg.RoleMember {
		return cmdutil.UsageErrorf("--dynamic goes with --role member: it adds to a member's rights what 'consume --dynamic' writes")
	}
	if o.DeadLetter != "" && role != cg.RoleMember {
		return cmdutil.UsageErrorf("--dead-letter goes with --role member: members publish dead letters")
	}
	layout, err := cmdutil.ParseLayout(o.Layout)
	if err != nil {
		return err
	}
	if o.Partitions < 0 || (o.Partitions > 0 && layout != cg.LayoutPartition) {
		return cmdutil.UsageErrorf("--partitions %d: give the partition count (1 or more) with --layout partition", o.Partitions)
	}
	set, err := cg.Permissions(o.Kind, o.Stream, o.Group, cg.PermissionOptions{
		Role: role, Members: o.Members, DeadLetter: o.DeadLetter, InboxPrefix: o.InboxPrefix, Domain: o.F.Conn.JSDomain,
		Layout: layout, Partitions: o.Partitions, Dynamic: o.Dynamic,
	})
	if err != nil {
		return cmdutil.NewUsageError(err)
	}
	line := permissionsLine(cmd, o)
	if format == "json" {
		return render.JSON(o.F.IOStreams.Out, PermissionsView(set, line))
	}
	writeConf(o.F.IOStreams.Out, set, line)
	return nil
}

// permissionsLine is the command that prints set, for the header comment.
func permissionsLine(cmd *cobra.Command, o *PermissionsOptions) string {
	parts := []string{"cg", string(o.Kind), "permissions", o.Stream, o.Group, "--role", o.Role}
	if len(o.Members) > 0 {
		parts = append(parts, "--member", strings.Join(o.Members, ","))
	}
	if o.Dynamic {
		parts = append(parts, "--dynamic")
	}
	if o.DeadLetter != "" {
		parts = append(parts, "--dead-letter", o.DeadLetter)
	}
	if o.Layout != "" && o.Layout != string(cg.LayoutMember) {
		parts = append(parts, "--layout", o.Layout)
	}
	if o.Partitions > 0 {
		parts = append(parts, "--partitions", strconv.Itoa(o.Partitions))
	}
	if cmd.Flags().Changed("inbox-prefix") {
		parts = append(parts, "--inbox-prefix", o.InboxPrefix)
	}
	return strings.Join(parts, " ")
}

// PermissionsJSON is the json of permissions: nats-server's permissions
// shape (publish/subscribe allow lists, allow_responses) plus the reasons.
type PermissionsJSON struct {
	Kind           string              `json:"kind"`
	Stream         string              `json:"stream"`
	Group          string              `json:"group"`
	Role           string              `json:"role"`
	Members        []string            `json:"members,omitempty"`
	Command        string              `json:"command"`
	Publish        PermissionsAllow    `json:"publish"`
	Subscribe      PermissionsAllow    `json:"subscribe"`
	AllowResponses bool                `json:"allow_responses"`
	Entries        []PermissionsReason `json:"entries"`
	Notes          []string            `json:"notes,omitempty"`
}

// PermissionsAllow is an allow list.
type PermissionsAllow struct {
	Allow []string `json:"allow"`
}

// PermissionsReason is one entry and why it is there.
type PermissionsReason struct {
	Type    string `json:"type"` // publish, subscribe or allow_responses
	Subject string `json:"subject,omitempty"`
	Why     string `json:"why"`
}

// PermissionsView is the json view of set.
func PermissionsView(set cg.PermissionSet, command string) PermissionsJSON {
	v := PermissionsJSON{
		Kind: string(set.Kind), Stream: set.Stream, Group: set.Group, Role: string(set.Role), Members: set.Members,
		Command: command, Publish: PermissionsAllow{Allow: set.PublishSubjects()}, Subscribe: PermissionsAllow{Allow: set.SubscribeSubjects()},
		AllowResponses: set.Responses, Notes: set.Notes,
	}
	for _, e := range set.Publish {
		v.Entries = append(v.Entries, PermissionsReason{Type: "publish", Subject: e.Subject, Why: e.Why})
	}
	for _, e := range set.Subscribe {
		v.Entries = append(v.Entries, PermissionsReason{Type: "subscribe", Subject: e.Subject, Why: e.Why})
	}
	if set.Responses {
		v.Entries = append(v.Entries, PermissionsReason{Type: "allow_responses", Why: set.ResponsesWhy})
	}
	return v
}

func writeConf(w io.Writer, set cg.PermissionSet, command string) {
	who := string(set.Role)
	if set.Role == cg.RoleMember {
		who = "member " + set.Members[0]
	}
	fmt.Fprintf(w, "# %s of %s group %s on stream %s, printed by: %s\n", who, set.Kind, set.Group, set.Stream, command)
	for _, n := range set.Notes {
		fmt.Fprintf(w, "# note: %s\n", n)
	}
	fmt.Fprintln(w, "permissions {")
	list := func(name string, es []cg.PermissionEntry) {
		fmt.Fprintf(w, "  %s {\n    allow: [\n", name)
		for _, e := range es {
			fmt.Fprintf(w, "      # %s\n      %s\n", e.Why, strconv.Quote(e.Subject))
		}
		fmt.Fprintln(w, "    ]\n  }")
	}
	list("publish", set.Publish)
	list("subscribe", set.Subscribe)
	if set.Responses {
		fmt.Fprintf(w, "  # %s\n  allow_responses: true\n", set.ResponsesWhy)
	}
	fmt.Fprintln(w, "}")
}
