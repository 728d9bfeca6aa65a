package group

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/cg-dev/cg/internal/cmdutil"
	"github.com/cg-dev/cg/internal/render"
	"github.com/cg-dev/cg/pkg/cg"
)

// PoisonFlags are consume's poison-message flags as given: the retry
// policy (--max-deliver, --backoff, --on-poison, --dead-letter) and the
// demo handler's failures (--fail-subject).
type PoisonFlags struct {
	MaxDeliver int
	Backoff    []time.Duration
	OnPoison   string
	DeadLetter string
	// FailSubject is a NATS pattern: the demo handler fails every message
	// whose subject (partition token stripped) matches it.
	FailSubject string

	set bool // any retry-policy flag was given
}

// bindPoison adds the poison-message flags to fs.
func (p *PoisonFlags) bind(fs *pflag.FlagSet) {
	cmdutil.CountVar(fs, &p.MaxDeliver, "max-deliver", 0, 1, "5", "deliveries a message gets before it is poison, the first included (0: unlimited, as before; 1: no retry); then --on-poison applies; at most "+strconv.Itoa(cg.MaxDeliverMax))
	fs.Var(&backoffValue{p: &p.Backoff}, "backoff", "delays before the 2nd, 3rd, ... delivery of a failed message, comma-separated (the last repeats), such as 1s,5s,30s; kept by this instance (the member consumer's configuration is unchanged); at most "+strconv.Itoa(cg.MaxBackoffSteps)+" delays of at most "+cg.MaxBackoffDelay.String())
	fs.StringVar(&p.OnPoison, "on-poison", "", "what to do with a poison message: dead-letter (publish it to --dead-letter, then ack it), park (hold its key until 'release') or stop (the instance exits with an error naming it); default: dead-letter when --dead-letter is given, otherwise park")
	fs.StringVar(&p.DeadLetter, "dead-letter", "", "subject dead letters are published to, with Cg- headers naming where they came from; a stream of yours must capture it")
	fs.StringVar(&p.FailSubject, "fail-subject", "", "demo handler: fail (nak) every message whose subject, partition token stripped, matches this NATS pattern, such as 'orders.k7' or 'orders.*.refund'")
}

// check validates the flags as given in fs: one line per mistake, before
// anything is dialled or joined.
func (p *PoisonFlags) check(fs *pflag.FlagSet) error {
	for _, name := range []string{"max-deliver", "backoff", "on-poison", "dead-letter"} {
		if fs.Changed(name) {
			p.set = true
		}
	}
	if fs.Changed("on-poison") {
		switch p.OnPoison {
		case "dead-letter", "park", "stop":
		default:
			return cmdutil.UsageErrorf("invalid argument %q for \"--on-poison\" flag: use dead-letter, park or stop", p.OnPoison)
		}
	} else if p.set {
		p.OnPoison = "park"
		if p.DeadLetter != "" {
			p.OnPoison = "dead-letter"
		}
	}
	if fs.Changed("dead-letter") {
		if err := checkDeadLetter(p.DeadLetter); err != nil {
			return err
		}
	}
	switch {
	case p.OnPoison == "dead-letter" && p.DeadLetter == "":
		return cmdutil.UsageErrorf("--on-poison dead-letter needs --dead-letter SUBJECT: the subject a stream of yours captures, such as --dead-letter dlq.orders")
	case p.OnPoison == "stop" && p.DeadLetter != "":
		return cmdutil.UsageErrorf("--dead-letter %s is never used with --on-poison stop: leave it out, or use --on-poison dead-letter or park", p.DeadLetter)
	}
	if p.MaxDeliver == 1 && len(p.Backoff) > 0 {
		return cmdutil.UsageErrorf("--backoff is never used with --max-deliver 1 (no redelivery): leave it out, or allow retries with --max-deliver 2 or more")
	}
	if fs.Changed("fail-subject") {
		if p.FailSubject == "" || !server.IsValidSubject(p.FailSubject) {
			return cmdutil.UsageErrorf("invalid argument %q for \"--fail-subject\" flag: not a NATS subject pattern; write one such as orders.k7 or 'orders.*'", p.FailSubject)
		}
	}
	return nil
}

func checkDeadLetter(s string) error {
	switch {
	case s == "":
		return cmdutil.UsageErrorf("invalid argument \"\" for \"--dead-letter\" flag: name the subject dead letters go to, such as dlq.orders")
	case !server.IsValidSubject(s):
		return cmdutil.UsageErrorf("invalid argument %q for \"--dead-letter\" flag: not a valid subject; write one such as dlq.orders", s)
	case !server.IsValidLiteralSubject(s):
		return cmdutil.UsageErrorf("invalid argument %q for \"--dead-letter\" flag: a dead letter is published to one subject, without wildcards; write one such as dlq.orders", s)
	case strings.HasPrefix(s, "$"):
		return cmdutil.UsageErrorf("invalid argument %q for \"--dead-letter\" flag: subjects starting with $ are the server's; write one such as dlq.orders", s)
	}
	return nil
}

// policy is the retry policy the flags ask for; nil when none was given.
func (p *PoisonFlags) policy() *cg.RetryPolicy {
	if !p.set {
		return nil
	}
	action, _ := cg.ParsePoisonAction(p.OnPoison) // checked by check
	return &cg.RetryPolicy{MaxDeliver: p.MaxDeliver, Backoff: p.Backoff, OnPoison: action, DeadLetter: p.DeadLetter}
}

// PoisonLine is a poison event in consume's --json output.
type PoisonLine struct {
	Type   string    `json:"type"`   // "poison"
	Action string    `json:"action"` // dead-letter, park or release
	Time   time.Time `json:"time"`
	Member string    `json:"member"`
	Reason string    `json:"reason"`
}

// poisonAction names a poison event's cause as --on-poison does.
func poisonAction(c cg.EventCause) string {
	switch c {
	case cg.CauseDeadLettered:
		return "dead-letter"
	case cg.CauseParked:
		return "park"
	case cg.CauseReleased:
		return "release"
	}
	return string(c)
}

// onPoisonEvent counts and prints a poison event (the caller holds the
// output lock).
func (o *ConsumeOptions) onPoisonEvent(e cg.Event, sum *Summary, js *render.JSONStream, cs *render.ColorScheme, who string) {
	switch e.Cause {
	case cg.CauseDeadLettered:
		sum.DeadLettered++
	case cg.CauseParked:
		sum.Parked++
	case cg.CauseReleased:
		sum.Released++
	}
	if o.F.JSON {
		_ = js.Encode(PoisonLine{Type: "poison", Action: poisonAction(e.Cause), Time: e.Time, Member: e.Member, Reason: e.Reason})
		return
	}
	word := cs.Red(poisonAction(e.Cause))
	if e.Cause == cg.CauseReleased {
		word = cs.Green("release")
	}
	line := word + ": " + e.Reason
	if e.Cause == cg.CauseParked {
		line += fmt.Sprintf(" (let it go: cg %s release %s %s %s)", o.Kind, o.Stream, o.Group, o.Member)
	}
	fmt.Fprintf(o.F.IOStreams.ErrOut, "[%s] %s\n", who, line)
}

// fails says whether the demo handler fails a message on subject.
func (p *PoisonFlags) fails(subject string) bool {
	return p.FailSubject != "" && server.SubjectMatchesFilter(subject, p.FailSubject)
}

// errFailSubject is the error the demo handler records for a message it
// fails on purpose.
func errFailSubject(pattern string) error {
	return fmt.Errorf("demo handler: subject matches --fail-subject %s", pattern)
}

// backoffValue is --backoff: comma-separated durations, each with a unit.
type backoffValue struct{ p *[]time.Duration }

func (b *backoffValue) Type() string { return "durations" }

func (b *backoffValue) String() string {
	if b.p == nil || len(*b.p) == 0 {
		return ""
	}
	parts := make([]string, len(*b.p))
	for i, d := range *b.p {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func (b *backoffValue) Set(s string) error {
	if strings.TrimSpace(s) == "" {
		return errors.New("no delays: write them comma-separated, such as 1s,5s,30s")
	}
	var ds []time.Duration
	for i, part := range strings.Split(s, ",") {
		if strings.TrimSpace(part) == "" {
			return fmt.Errorf("delay %d is empty: write them comma-separated, such as 1s,5s,30s", i+1)
		}
		d, err := cmdutil.ParseDuration(part, "1s,5s,30s")
		if err != nil {
			return fmt.Errorf("delay %d: %w", i+1, err)
		}
		if d == 0 {
			return fmt.Errorf("delay %d is 0s: every delay must be positive, such as 1s,5s,30s (leave --backoff out to retry at once)", i+1)
		}
		ds = append(ds, d)
	}
	*b.p = ds
	return nil
}

// failMsg is the demo handler's failure of m (--fail-subject): it naks m,
// so a retry policy redelivers it after its backoff (or, without one, the
// server after the nak, without end), and prints the failure.
func (o *ConsumeOptions) failMsg(m *cg.Msg, md *jetstream.MsgMetadata, mdErr error, start time.Time,
	mu *sync.Mutex, sum *Summary, js *render.JSONStream, cs *render.ColorScheme, who string) {
	m.Fail(errFailSubject(o.Poison.FailSubject))
	nakErr := m.Nak()
	line := MsgLine{Type: "msg", Member: o.Member, Partition: m.Partition(), Subject: m.Subject(), PinID: m.PinID(),
		Millis: float64(time.Since(start).Microseconds()) / 1000, Failed: true, Time: time.Now()}
	if mdErr == nil {
		line.StreamSeq, line.Delivered = md.Sequence.Stream, md.NumDelivered
	}
	if nakErr != nil {
		line.AckError = nakErr.Error()
	}
	mu.Lock()
	defer mu.Unlock()
	sum.Failed++
	if o.F.JSON {
		_ = js.Encode(line)
		return
	}
	outcome := cs.Red("failed") + " (--fail-subject " + o.Poison.FailSubject + "), nak'd"
	if nakErr != nil {
		outcome = cs.Red("failed") + ", nak failed: " + nakErr.Error()
	}
	fmt.Fprintf(o.F.IOStreams.Out, "[%s] p%-3d %s seq=%d pin=%s %s delivery %d\n", who, line.Partition, line.Subject, line.StreamSeq,
		shortPin(line.PinID), outcome, line.Delivered)
}

// poisonSummary is the summary's poison line, "" when nothing failed.
func poisonSummary(s Summary) string {
	if s.Failed == 0 && s.DeadLettered == 0 && s.Parked == 0 && s.Released == 0 {
		return ""
	}
	return fmt.Sprintf("poison: %d deliveries failed, %d dead-lettered, %d parked, %d released", s.Failed, s.DeadLettered, s.Parked, s.Released)
}

// poisonJoinErr words the fix of a retry policy's join error.
func poisonJoinErr(err error, k cg.Kind, stream, group string) error {
	if errors.Is(err, cg.ErrNoPoisonState) {
		return fmt.Errorf("%w; re-run the group's 'cg %s create ...' for %s %s exactly as it was made (it makes the bucket and changes nothing else), or consume without --max-deliver, --backoff, --on-poison and --dead-letter", err, k, stream, group)
	}
	return err
}
