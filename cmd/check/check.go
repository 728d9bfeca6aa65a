// Package check holds `cg check`: health checks of consumer groups for
// scripts and monitoring, with the monitoring plugins' exit codes.
package check

import (
	"context"
	"fmt"
	"strings"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/spf13/cobra"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/factory"
	"github.com/cg-dev/cg/internal/hints"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// Options are the bound arguments and flags of check.
type Options struct {
	F      *factory.Factory
	Stream string
	Group  string
	Kind   string
}

// Report is check's --json view.
type Report struct {
	// Status is ok, warning, critical or unknown; ExitCode says the same
	// as the process exits.
	Status        string    `json:"status"`
	ExitCode      int       `json:"exit_code"`
	Summary       string    `json:"summary"`
	ServerVersion string    `json:"server_version,omitempty"`
	Counts        Counts    `json:"counts"`
	Groups        []Group   `json:"groups"`
	Findings      []Finding `json:"findings"`
	// Error says why nothing could be checked (status unknown).
	Error string `json:"error,omitempty"`
}

// Counts are the findings by severity.
type Counts struct {
	Critical int `json:"critical"`
	Warning  int `json:"warning"`
	Unknown  int `json:"unknown"`
}

// Group is one group checked.
type Group struct {
	Kind   string `json:"kind"`
	Stream string `json:"stream"`
	Group  string `json:"group"`
	Status string `json:"status"`
}

// Finding is one problem found.
type Finding struct {
	Severity   string `json:"severity"`
	Code       string `json:"code"`
	Kind       string `json:"kind,omitempty"`
	Stream     string `json:"stream,omitempty"`
	Group      string `json:"group,omitempty"`
	Member     string `json:"member,omitempty"`
	Consumer   string `json:"consumer,omitempty"`
	Partitions []int  `json:"partitions,omitempty"`
	Pending    uint64 `json:"pending,omitempty"`
	Message    string `json:"message"`
	Hint       string `json:"hint,omitempty"`
}

const long = `Check consumer groups for what keeps them from consuming, and exit with the
status monitoring plugins use (Nagios, Icinga, Sensu, ...):

  0 OK        every check passed
  1 WARNING   something needs attention, nothing is stuck yet
  2 CRITICAL  messages are not being consumed, or will not be
  3 UNKNOWN   could not check: no server, no permission, or bad usage

With no arguments every stored static and elastic group is checked;
with a stream, its groups; with a stream and a group, that group, whichever
kind it is (--kind picks one). check changes nothing.

The first line of output is the status and a summary, as monitoring expects;
each finding follows on a line of its own: severity, code, group, what is
wrong and how to fix it. --json prints the same as one document. A check that
could not run at all prints "UNKNOWN: <why>" and exits 3.

Findings, by code (severity):
  server-too-old (critical)              the server lacks pinned consumers (2.11), or
                                         {{partition(N)}} on whole subjects (2.12)
  stream-missing (critical)              the group's stream does not exist
  group-missing (critical)               no such group (cg check <stream> <group>)
  config-invalid (critical)              the stored configuration does not parse or validate
  stream-not-partitioned (critical)      static: the stream lost its {{partition(N,...)}}
                                         subject transform
  stream-partitions-mismatch (critical)  static: the transform's N is not the group's
  stream-filter-mismatch (critical)      a group filter matches nothing the stream
                                         stores (static: behind the partition token)
  stream-subjects-unstamped (critical)   static: the filters select subjects the
                                         transform stores without a partition token
  work-stream-missing (critical)         elastic: the work stream <stream>-<group> is gone
  work-stream-drift (critical)           elastic: its source, transforms or retention
                                         differ from what the configuration gives
  work-stream-not-owned (critical)       elastic: a stream named <stream>-<group> exists
                                         but is not the group's; cg leaves it alone
  work-stream-settings (warning)         elastic: its caps, discard, replicas or direct
                                         get drifted; re-running create repairs them
  work-stream-source-error (critical)    elastic: the server cannot source the stream
  partition-unowned (critical)           no member owns some partitions (a warning for
                                         an elastic group never given members: its work
                                         stream keeps the messages for them)
  partition-unserved (critical)          a member has no live instance and messages wait
                                         on its partitions
  member-no-instance (warning)           a member has no live instance; nothing waits
                                         for it yet, or it never ran (a new group)
  consumer-filter-drift (critical)       a member consumer's filters differ from what
                                         the configuration gives the member
  consumer-priority-drift (critical)     a member consumer is not pinned in priority
                                         group PCG
  consumer-leftover (warning)            a consumer named like the group's belongs to
                                         no member
  partition-ceiling (critical)           more partitions, or filter subjects on one
                                         member, than cg's ceiling of 4096: cg starts
                                         none of them
  member-unusable (critical)             a member's consumer name is one the server
                                         refuses (such as ">"): its partitions are
                                         consumed by no one
  parked-message (warning)               a member holds a parked poison message: its key
                                         waits until 'cg <kind> release' lets it go
  dynamic-member-gone (warning)          elastic: a member that added itself (consume
                                         --dynamic) has not been seen for longer than its
                                         session timeout and is still in the group: no
                                         running dynamic instance has dropped it (its
                                         partitions get their own finding)
  check-failed (unknown)                 a request failed: part of a group went unchecked

A live instance is one pulling from its member consumer or holding its pin.
An elastic group may show drift or unserved partitions for a moment while it
rebalances: let monitoring retry before it alerts.
When findings mix, the status is the gravest: critical, then unknown (what
could not be checked may hide a critical fault), then warning.`

// NewCmd builds `cg check [<stream> [<group>]]`.
func NewCmd(f *factory.Factory) *cobra.Command {
	opts := &Options{F: f}
	cmd := &cobra.Command{
		Use:     "check [<stream> [<group>]]",
		Aliases: []string{"health"},
		Short:   "Check groups' health for scripts and monitoring: exit 0 OK, 1 warning, 2 critical, 3 unknown",
		Long:    long,
		Example: "  cg check\n" +
			"  cg check ORDERS\n" +
			"  cg check ORDERS fulfillment --json\n" +
			"  cg check ORDERS fulfillment --kind elastic || echo \"status $?\"",
		Args: args,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Stream, opts.Group = "", ""
			if len(args) > 0 {
				opts.Stream = args[0]
			}
			if len(args) > 1 {
				opts.Group = args[1]
			}
			switch opts.Kind {
			case "", "static", "elastic":
			default:
				return usage(cmdutil.UsageErrorf("--kind %q must be static or elastic", opts.Kind))
			}
			return checkRun(cmd.Context(), opts)
		},
	}
	// A usage error is UNKNOWN (3) here, as monitoring plugins have it,
	// not the usual 2, which would read as CRITICAL.
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usage(err) })
	cmd.Flags().StringVar(&opts.Kind, "kind", "", "check only groups of this kind: static or elastic")
	return cmd
}

func usage(err error) error {
	return cmdutil.WithCode(cmdutil.CheckUnknown, cmdutil.NewUsageError(err))
}

func args(cmd *cobra.Command, args []string) error {
	if len(args) > 2 {
		return usage(fmt.Errorf("too many arguments (%d): %s takes [<stream> [<group>]]", len(args), cmd.CommandPath()))
	}
	for i, kind := range []string{"stream", "group"}[:len(args)] {
		validate := func(name string) error { return cg.ValidateName(kind, name) }
		if kind == "group" {
			validate = cg.ValidateStoredGroupName // the reference stores names with '.'
		}
		if err := validate(args[i]); err != nil {
			return usage(err)
		}
	}
	return nil
}

func checkRun(ctx context.Context, o *Options) error {
	c, err := o.F.Client()
	if err != nil {
		return o.couldNotCheck(err)
	}
	rep, err := c.Check(ctx, cg.CheckScope{Stream: o.Stream, Group: o.Group, Kind: cg.Kind(o.Kind)})
	if err != nil {
		return o.couldNotCheck(err)
	}
	view := newReport(rep)
	ios := o.F.IOStreams
	if o.F.JSON {
		if err := render.JSON(ios.Out, view); err != nil {
			return err
		}
	} else if err := renderText(o, view); err != nil {
		return err
	}
	if view.ExitCode == cmdutil.CheckOK {
		return nil
	}
	return cmdutil.WithCode(view.ExitCode, cmdutil.ErrSilent)
}

// couldNotCheck reports UNKNOWN on stdout, where monitoring reads the
// status, rather than as the usual error on stderr.
func (o *Options) couldNotCheck(err error) error {
	msg := hints.Error(err)
	if r := o.F.Refused(); r != "" && !strings.Contains(msg, r) {
		msg += "; the server refused: " + r
	}
	ios := o.F.IOStreams
	if o.F.JSON {
		view := Report{Status: string(health.SeverityUnknown), ExitCode: cmdutil.CheckUnknown, Summary: "UNKNOWN: " + msg,
			Groups: []Group{}, Findings: []Finding{}, Error: msg}
		if err := render.JSON(ios.Out, view); err != nil {
			return err
		}
	} else {
		cs := render.NewColorScheme(ios.ColorEnabled())
		fmt.Fprintf(ios.Out, "%s: %s\n", paint(cs, health.SeverityUnknown, "UNKNOWN"), msg)
	}
	return cmdutil.WithCode(cmdutil.CheckUnknown, cmdutil.ErrSilent)
}

func exitCode(s health.Severity) int {
	switch s {
	case health.SeverityWarning:
		return cmdutil.CheckWarning
	case health.SeverityCritical:
		return cmdutil.CheckCritical
	case health.SeverityUnknown:
		return cmdutil.CheckUnknown
	}
	return cmdutil.CheckOK
}

func newReport(rep health.CheckReport) Report {
	status := rep.Status()
	v := Report{
		Status:        string(status),
		ExitCode:      exitCode(status),
		ServerVersion: rep.ServerVersion,
		Counts: Counts{
			Critical: rep.Count(health.SeverityCritical),
			Warning:  rep.Count(health.SeverityWarning),
			Unknown:  rep.Count(health.SeverityUnknown),
		},
		Groups:   make([]Group, 0, len(rep.Groups)),
		Findings: make([]Finding, 0, len(rep.Findings)),
	}
	for _, g := range rep.Groups {
		v.Groups = append(v.Groups, Group{Kind: g.Kind, Stream: g.Stream, Group: g.Group, Status: string(g.Status)})
	}
	for _, f := range rep.Findings {
		v.Findings = append(v.Findings, Finding{Severity: string(f.Severity), Code: f.Code, Kind: f.Kind, Stream: f.Stream,
			Group: f.Group, Member: f.Member, Consumer: f.Consumer, Partitions: f.Partitions, Pending: f.Pending,
			Message: hints.Message(f.Message, f.Cause), Hint: hints.Remedy(f.Remedy, f.Hint)})
	}
	v.Summary = summary(v)
	return v
}

// summary is the status line: "OK: 3 groups checked, nats-server 2.12.1"
// or "CRITICAL: 2 critical, 1 warning; 3 groups checked, ...".
func summary(v Report) string {
	var counts []string
	for _, c := range []struct {
		n    int
		word string
	}{{v.Counts.Critical, "critical"}, {v.Counts.Unknown, "unknown"}, {v.Counts.Warning, "warning"}} {
		if c.n == 1 || (c.n > 1 && c.word != "warning") {
			counts = append(counts, fmt.Sprintf("%d %s", c.n, c.word))
		} else if c.n > 1 {
			counts = append(counts, fmt.Sprintf("%d warnings", c.n))
		}
	}
	groups := "no groups found"
	switch n := len(v.Groups); n {
	case 0:
	case 1:
		groups = "1 group checked"
	default:
		groups = fmt.Sprintf("%d groups checked", n)
	}
	if v.ServerVersion != "" {
		groups += ", nats-server " + v.ServerVersion
	}
	s := strings.ToUpper(v.Status) + ": "
	if len(counts) > 0 {
		s += strings.Join(counts, ", ") + "; "
	}
	return s + groups
}

func renderText(o *Options, v Report) error {
	ios := o.F.IOStreams
	cs := render.NewColorScheme(ios.ColorEnabled())
	status, rest, _ := strings.Cut(v.Summary, ":")
	fmt.Fprintf(ios.Out, "%s:%s\n", paint(cs, health.Severity(v.Status), status), rest)
	if len(v.Findings) == 0 {
		return nil
	}
	t := render.NewTable(ios.Out)
	for _, f := range v.Findings {
		msg := f.Message
		if f.Hint != "" {
			msg += "; " + f.Hint
		}
		t.AddRow(paint(cs, health.Severity(f.Severity), strings.ToUpper(f.Severity)), f.Code, where(cs, f), msg)
	}
	return t.Render()
}

// where names what a finding is about: "static ORDERS/fulfillment",
// "stream ORDERS" or "server".
func where(cs *render.ColorScheme, f Finding) string {
	switch {
	case f.Group != "" && f.Kind != "":
		return f.Kind + " " + f.Stream + "/" + cs.Bold(f.Group)
	case f.Group != "":
		return f.Stream + "/" + cs.Bold(f.Group)
	case f.Stream != "":
		return "stream " + f.Stream
	}
	return "server"
}

func paint(cs *render.ColorScheme, s health.Severity, text string) string {
	switch s {
	case health.SeverityOK:
		return cs.Green(text)
	case health.SeverityWarning:
		return cs.Yellow(text)
	case health.SeverityCritical:
		return cs.Red(text)
	}
	return cs.Bold(text)
}
