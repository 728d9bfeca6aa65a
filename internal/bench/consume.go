package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/partition"
)

// SystemCLI is cg's consume command, `cg static consume <stream> <group>
// <member> --sleep 0 --json --count N`, one per member, as a user runs
// it. This package cannot import the command tree (the tree imports it),
// so the caller supplies the command as a Consume.
const SystemCLI = "cli"

// Consume runs cg with args (the command line after "cg") against the
// server at url, its output discarded, and returns when the command ends.
type Consume func(ctx context.Context, url string, args []string) error

// ConsumeArgs is the command line of member's consume in sc: it stops by
// itself after count messages, the member's share of the backlog.
func ConsumeArgs(sc Scenario, member string, count int) []string {
	args := []string{"--json", "static", "consume", Stream, Group, member, "--sleep", "0", "--count", strconv.Itoa(count)}
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
		return res, fmt.Errorf("%s: the consume commands did not drain %d messages within %v", sc.Name(), sc.Messages, env.limit())
	}
	if len(errs) > 0 {
		return res, fmt.Errorf("%s: %v", sc.Name(), errs)
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
	for _, m := range members {
		res.Handled += counts[m]
	}
	if res.Elapsed > 0 {
		res.MsgsPerSec = float64(res.Handled) / res.Elapsed.Seconds()
	}
	return res, nil
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
