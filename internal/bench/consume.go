package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// SystemCLI is cg's consume command, `cg static consume <stream> <group>
// <member> --sleep 0 --json --count N`, one per member, as a user runs
// it. This package cannot import the command tree (the tree imports it),
// so the caller supplies the command as a Consume.
const SystemCLI = "cli"

// SystemCLIElastic is the same through an elastic group, `cg elastic
// consume …`, its members started once the group's work stream holds the
// whole backlog: the drain of a work stream, beside a plain consumer
// draining a work queue of the same backlog (Scenario.WorkQueue).
const SystemCLIElastic = "cli-elastic"

// kind is the kind of group sc runs.
func (s Scenario) kind() cg.Kind {
	if s.System == SystemElastic || s.System == SystemCLIElastic {
		return cg.KindElastic
	}
	return cg.KindStatic
}

// Consume runs cg with args (the command line after "cg") against the
// server at url, its output discarded, and returns when the command ends.
type Consume func(ctx context.Context, url string, args []string) error

// ConsumeArgs is the command line of member's consume in sc: it stops by
// itself after count messages, the member's share of the backlog.
func ConsumeArgs(sc Scenario, member string, count int) []string {
	args := []string{"--json", sc.kind().String(), "consume", Stream, Group, member, "--sleep", "0", "--count", strconv.Itoa(count)}
	o := sc.memberOptions()
	if o.Concurrency > 1 {
		args = append(args, "--concurrency", strconv.Itoa(o.Concurrency))
	}
	if o.MaxAckPending > 1 {
		args = append(args, "--max-ack-pending", strconv.Itoa(o.MaxAckPending))
	}
	return args
}

// RunConsume runs sc through the consume command: it makes the stream,
// preloads sc.Messages messages (a command that counts cannot start
// before its messages are there), creates the static group and starts one
// consume command per member, each told to stop after exactly the
// messages of its partitions. The clock runs from the start of the
// commands to the end of the last one, so joining, the pin and the stop
// are counted, as a user timing the command sees them. It then checks on
// the server that every member consumer has nothing pending and nothing
// unacknowledged. Per-key order is not observed here (the command prints
// no bench headers); the engine runs of the same scenario check it.
func RunConsume(ctx context.Context, env Env, sc Scenario, consume Consume) (Result, error) {
	res := Result{Scenario: sc}
	ctx, cancel := context.WithTimeout(ctx, env.limit())
	defer cancel()
	r, err := setUp(ctx, env, sc, &res)
	if err != nil {
		return res, err
	}
	defer r.tearDown()
	members := MemberNames(sc.Members)
	if sc.kind() == cg.KindElastic {
		err := runConsumeElastic(ctx, env, sc, consume, r, &res)
		return res, err
	}
	cfg := cg.StaticConfig{MaxMembers: sc.Partitions, Members: members}
	if err := staticLayout(sc, &cfg); err != nil {
		return res, err
	}
	if _, err := cg.New(r.js).CreateStatic(ctx, Stream, Group, cfg); err != nil {
		return res, err
	}
	if err := r.publish(ctx); err != nil {
		return res, err
	}
	counts := shares(cfg, sc)
	if err := runCommands(ctx, env, sc, consume, members, counts, &res); err != nil {
		return res, err
	}
	consumers := map[string]string{} // server consumer -> who reads it
	if sc.Layout == LayoutPartition {
		a := cfg.Assignment()
		for _, m := range members {
			for _, p := range a.MemberPartitions(m) {
				consumers[cg.PartitionConsumerName(Group, p)] = "member " + m
			}
		}
	} else {
		for _, m := range members {
			consumers[cg.StaticConsumerName(Group, m)] = "member " + m
		}
	}
	for name, who := range consumers {
		c, err := r.js.Consumer(ctx, Stream, name)
		if err != nil {
			return res, fmt.Errorf("%s: %s: consumer %s: %w", sc.Name(), who, name, err)
		}
		ci := c.CachedInfo()
		if ci.NumPending != 0 || ci.NumAckPending != 0 {
			return res, fmt.Errorf("%s: %s left %d pending and %d unacknowledged on %s", sc.Name(), who, ci.NumPending, ci.NumAckPending, name)
		}
	}
	res.rate(members, counts)
	return res, nil
}

func (res *Result) rate(members []string, counts map[string]int) {
	for _, m := range members {
		res.Handled += counts[m]
	}
	if res.Elapsed > 0 {
		res.MsgsPerSec = float64(res.Handled) / res.Elapsed.Seconds()
	}
}

// runCommands starts one consume command per member with a share, at
// once, and clocks them from their start to the end of the last.
func runCommands(ctx context.Context, env Env, sc Scenario, consume Consume, members []string, counts map[string]int, res *Result) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	begin := time.Now()
	env.drain(true)
	for _, m := range members {
		if counts[m] == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := consume(ctx, env.URL, ConsumeArgs(sc, m, counts[m])); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("member %s: %w", m, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(begin)
	env.drain(false)
	if ctx.Err() != nil {
		return fmt.Errorf("%s: the consume commands did not drain %d messages within %v", sc.Name(), sc.Messages, env.limit())
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %v", sc.Name(), errs)
	}
	return nil
}

// runConsumeElastic is RunConsume for an elastic group: the backlog is
// published, the group made, and the commands started once its work
// stream holds every message, each told the messages its partitions hold
// there (the work stream's partition is its own hash, not the stream's).
// Afterwards the work stream, a work queue, must be empty: every message
// acked.
func runConsumeElastic(ctx context.Context, env Env, sc Scenario, consume Consume, r *run, res *Result) error {
	members := MemberNames(sc.Members)
	if err := r.publish(ctx); err != nil {
		return err
	}
	cfg := cg.ElasticConfig{MaxMembers: sc.Partitions, Members: members}
	if err := elasticLayout(sc, &cfg); err != nil {
		return err
	}
	if _, err := cg.New(r.js).CreateElastic(ctx, Stream, Group, cfg); err != nil {
		return err
	}
	if err := WaitFilled(ctx, r.js, sc.Messages); err != nil {
		return err
	}
	ws, err := r.js.Stream(ctx, cg.WorkStreamName(Stream, Group))
	if err != nil {
		return err
	}
	counts := map[string]int{}
	a := cfg.Assignment()
	for _, m := range members {
		for _, p := range a.MemberPartitions(m) {
			si, err := ws.Info(ctx, jetstream.WithSubjectFilter(strconv.Itoa(p)+".>"))
			if err != nil {
				return err
			}
			for _, n := range si.State.Subjects {
				counts[m] += int(n)
			}
		}
	}
	if err := runCommands(ctx, env, sc, consume, members, counts, res); err != nil {
		return err
	}
	si, err := ws.Info(ctx)
	if err != nil {
		return err
	}
	if si.State.Msgs != 0 {
		return fmt.Errorf("%s: the work stream kept %d messages: not every message was acked", sc.Name(), si.State.Msgs)
	}
	res.rate(members, counts)
	if res.Handled != sc.Messages {
		return fmt.Errorf("%s: the members' partitions held %d of %d messages", sc.Name(), res.Handled, sc.Messages)
	}
	return nil
}

// shares are the messages of each member's partitions in sc's backlog.
func shares(cfg cg.StaticConfig, sc Scenario) map[string]int {
	owner := map[int]string{}
	a := cfg.Assignment()
	for _, m := range cfg.Members {
		for _, p := range a.MemberPartitions(m) {
			owner[p] = m
		}
	}
	out := map[string]int{}
	for i, k := range Keys(sc.Keys) {
		n := sc.Messages / sc.Keys
		if i < sc.Messages%sc.Keys {
			n++
		}
		out[owner[partition.PartitionOfKey(k, sc.Partitions)]] += n
	}
	return out
}
