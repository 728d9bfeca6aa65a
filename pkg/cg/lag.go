package cg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cg-dev/cg/pkg/cg/health"
	"github.com/cg-dev/cg/pkg/cg/partition"
	"github.com/nats-io/nats.go/jetstream"
)

// numPendingHeader is what a batched direct get says is left after a message.
const numPendingHeader = "Nats-Num-Pending"

// Lag, per member and per partition: how many messages are not yet acked
// and how long the oldest of them has waited.
//
// A member's count is exact and free: its consumer's num_pending (not yet
// delivered) plus num_ack_pending (delivered, not yet acked). A consumer
// says nothing per partition, so a partition is counted on the stream
// itself: the messages on its filters (<p>.<filter>) from just after its
// owner's ack floor. Which request does that depends on the stream:
//
//   - allow_direct (every elastic work stream): one batched direct get per
//     filter, {"seq":from,"next_by_subj":"<p>.<f>","batch":1}. The server
//     answers with the first matching message, whose sequence and time are
//     the oldest pending one, and a Nats-Num-Pending header counting the
//     matching messages after it: count and age in one round trip, with no
//     state created on the server.
//   - work-queue retention without direct get: every message still in the
//     stream is pending, so one paged stream info with per-subject counts,
//     summed by partition, and a message get per non-empty partition for
//     its oldest. (An extra consumer is no option here: a work-queue stream
//     refuses consumers that overlap the members', error 10100.)
//   - otherwise (limits or interest retention without direct get): an
//     ephemeral probe consumer per partition (ack none, memory storage, one
//     replica) starting at the owner's ack floor + 1; its create reply
//     carries num_pending, and it is deleted at once. Then a message get
//     for the oldest.
//
// The per-partition count assumes acks in order, which max_ack_pending 1
// (the default) guarantees; with more, a message acked ahead of an older
// unacked one is still counted until the ack floor passes it.
//
// Where counting starts: on a work-queue stream, the stream's start (what
// is acked is gone); for an owner whose consumer exists, just after its ack
// floor; for a static member whose consumer went away by inactivity, just
// after its saved position (where it will resume); otherwise (no member,
// or one that never joined) the stream's start.
//
// A partition whose owner's consumer has nothing pending at all is not
// asked about: a group that keeps up costs no request per partition. The
// server counts from the start of a stream cheaply (its per-subject
// totals) but from a sequence mid-way by scanning the block holding it, so
// a backlog behind an ack floor costs most: with 256 partitions over 20,000
// messages, an info takes about 2ms when every member is caught up, 30ms
// counting all partitions from the start, and 150-240ms when half of them
// count from a member's ack floor mid-stream (on one local server).
//
// The work is bounded: LagConcurrency requests at a time and LagTimeout in
// all. Partitions not read by then are marked unknown and GroupInfo.LagError
// says why, rather than the info call hanging.

// How per-partition lag was read (GroupInfo.LagMethod).
const (
	LagDirectGet     = "direct_get"
	LagSubjectCounts = "subject_counts"
	LagProbe         = "probe_consumer"
)

// LagConcurrency and LagTimeout bound the per-partition lag reads of one
// info call: requests in flight at once, and time for all of them.
var (
	LagConcurrency = 32
	LagTimeout     = 5 * time.Second
)

// lagScope says which partitions an info call reads the lag of.
type lagScope struct {
	all    bool
	member string // when !all: only this member's partitions ("" for none)
}

func (s lagScope) wants(owner string) bool { return s.all || (s.member != "" && owner == s.member) }

// lagInput is what an info call already knows when it reads lag.
type lagInput struct {
	stream string                             // the stream the member consumers read
	si     *jetstream.StreamInfo              // its info
	cis    map[string]*jetstream.ConsumerInfo // member -> consumer (nil: none)
	static bool                               // static members resume at saved positions
	group  string                             // for saved positions
	origin string                             // the group's own stream, for saved positions
	// parts, for a partition-layout group, holds each partition's own
	// consumer (nil: none); cis is then unused.
	parts map[int]*jetstream.ConsumerInfo
}

// ciOf is the consumer partition p is read through.
func (in lagInput) ciOf(p int, owner string) *jetstream.ConsumerInfo {
	if in.parts != nil {
		return in.parts[p]
	}
	return in.cis[owner]
}

// partitionJob is one partition to read.
type partitionJob struct {
	idx     int // in GroupInfo.PartitionLag
	p       int
	from    uint64
	filters []string
}

// fillLag sets gi's per-partition and per-member lag for the partitions in
// scope. It never fails: what it cannot read is marked unknown, with the
// reason in gi.LagError.
func (c *Client) fillLag(ctx context.Context, gi *health.GroupInfo, in lagInput, scope lagScope) {
	gi.SampledAt = time.Now().UTC()
	for i := range gi.Members {
		if ci := in.cis[gi.Members[i].Member]; ci != nil {
			gi.Members[i].Lag = &health.Lag{Pending: ci.NumPending + uint64(max(ci.NumAckPending, 0))}
		}
	}
	if !scope.all && scope.member == "" {
		return
	}
	n := gi.Partitions
	wq := in.si.Config.Retention == jetstream.WorkQueuePolicy
	switch {
	case in.si.Config.AllowDirect:
		gi.LagMethod = LagDirectGet
	case wq:
		gi.LagMethod = LagSubjectCounts
	default:
		gi.LagMethod = LagProbe
	}
	start := max(in.si.State.FirstSeq, 1)
	saved := map[string]uint64{}
	var jobs []partitionJob
	gi.PartitionLag = make([]health.PartitionLag, 0, n)
	idx := newLagFilterIndex(gi, in)
	for p := range n {
		if p%1024 == 0 && ctx.Err() != nil {
			gi.LagError = fmt.Sprintf("per-partition lag not read: %v", ctx.Err())
			return
		}
		owner := ""
		if p < len(gi.Owners) {
			owner = gi.Owners[p]
		}
		if !scope.wants(owner) {
			continue
		}
		filters, consumerHasIt := idx.filters(gi, p, owner)
		job := partitionJob{p: p, from: start, filters: filters}
		if ci := in.ciOf(p, owner); ci != nil && !wq {
			job.from = max(ci.AckFloor.Stream+1, start)
		} else if owner != "" && in.static && !wq && in.parts == nil {
			seq, ok := saved[owner]
			if !ok {
				if pos, found := c.savedPosition(ctx, in.origin, in.group, owner); found {
					seq = pos.AckFloor + 1
				}
				saved[owner] = seq
			}
			job.from = max(seq, start)
		}
		pl := health.PartitionLag{Partition: p, Owner: owner, FromSeq: job.from}
		if in.si.State.Msgs == 0 || job.from > in.si.State.LastSeq {
			// Nothing stored from there on: nothing to ask (an empty or
			// drained stream of many partitions costs no request each).
			pl.Known = true
			gi.PartitionLag = append(gi.PartitionLag, pl)
			continue
		}
		if ci := in.ciOf(p, owner); consumerHasIt && ci.NumPending == 0 && ci.NumAckPending == 0 {
			// A caught-up owner has nothing pending on any of its
			// partitions: no need to ask (the common, healthy case). Not
			// so for a partition its consumer does not filter yet (an
			// elastic member still rebalancing).
			pl.Known = true
			gi.PartitionLag = append(gi.PartitionLag, pl)
			continue
		}
		job.idx = len(gi.PartitionLag)
		gi.PartitionLag = append(gi.PartitionLag, pl)
		jobs = append(jobs, job)
	}
	if len(jobs) == 0 {
		memberLag(gi)
		return
	}

	lctx, cancel := context.WithTimeout(ctx, LagTimeout)
	defer cancel()
	var read func(context.Context, partitionJob) (health.Lag, error)
	switch gi.LagMethod {
	case LagDirectGet:
		read = func(ctx context.Context, j partitionJob) (health.Lag, error) { return c.directLag(ctx, in.stream, j) }
	case LagSubjectCounts:
		counts, err := c.subjectCounts(lctx, in.stream)
		if err != nil {
			gi.LagError = fmt.Sprintf("per-partition lag unknown: per-subject counts of %s: %v", in.stream, err)
			memberLag(gi)
			return
		}
		read = func(ctx context.Context, j partitionJob) (health.Lag, error) {
			return c.countedLag(ctx, in.stream, j, counts)
		}
	default:
		read = func(ctx context.Context, j partitionJob) (health.Lag, error) { return c.probeLag(ctx, in.stream, j) }
	}

	results := make([]health.PartitionLag, len(jobs))
	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(LagConcurrency, 1), len(jobs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l, err := read(lctx, jobs[i])
				if err != nil {
					errs[i] = err
					continue
				}
				results[i] = health.PartitionLag{Known: true, Lag: l}
			}
		}()
	}
feed:
	for i := range jobs {
		select {
		case next <- i:
		case <-lctx.Done():
			for k := i; k < len(jobs); k++ {
				errs[k] = lctx.Err()
			}
			break feed
		}
	}
	close(next)
	wg.Wait()

	var failed int
	var first error
	for i, r := range results {
		if !r.Known {
			failed++
			if first == nil || (errors.Is(first, context.DeadlineExceeded) && !errors.Is(errs[i], context.DeadlineExceeded)) {
				first = errs[i]
			}
			continue
		}
		pl := &gi.PartitionLag[jobs[i].idx]
		pl.Known, pl.Lag = true, r.Lag
		if !pl.Oldest.IsZero() {
			pl.AgeSeconds = ageSeconds(gi.SampledAt, pl.Oldest)
		}
	}
	if failed > 0 {
		why := fmt.Sprint(first)
		if errors.Is(first, context.DeadlineExceeded) {
			why = fmt.Sprintf("not read within %s", LagTimeout)
		}
		gi.LagError = fmt.Sprintf("per-partition lag unknown for %d of %d partitions (%s): %s", failed, len(gi.PartitionLag), gi.LagMethod, why)
	}
	memberLag(gi)
}

// memberLag completes each member's lag from its partitions: the oldest
// pending message is the oldest of its partitions', and a member without a
// consumer has exactly its partitions' backlog pending.
func memberLag(gi *health.GroupInfo) {
	byPart := map[int]*health.PartitionLag{}
	for i := range gi.PartitionLag {
		byPart[gi.PartitionLag[i].Partition] = &gi.PartitionLag[i]
	}
	for i := range gi.Members {
		ms := &gi.Members[i]
		var sum health.Lag
		complete := len(ms.Partitions) > 0
		for _, p := range ms.Partitions {
			pl := byPart[p]
			if pl == nil || !pl.Known {
				complete = false
				break
			}
			sum.Pending += pl.Pending
			if pl.OldestSeq != 0 && (sum.OldestSeq == 0 || pl.OldestSeq < sum.OldestSeq) {
				sum.OldestSeq, sum.Oldest, sum.AgeSeconds = pl.OldestSeq, pl.Oldest, pl.AgeSeconds
			}
		}
		switch {
		case ms.Lag != nil && complete && ms.Lag.Pending > 0:
			ms.Lag.OldestSeq, ms.Lag.Oldest, ms.Lag.AgeSeconds = sum.OldestSeq, sum.Oldest, sum.AgeSeconds
		case ms.Lag == nil && complete:
			ms.Lag = &sum
		}
	}
}

// lagFilterIndex finds the subjects partition p's pending messages are
// on: the owner consumer's own filters for p when it has some (it may have
// been made by another implementation; fromConsumer is then true), else
// what the configuration gives. Each member's filters are grouped by
// partition once, so a group of N partitions costs O(N), not O(N²).
type lagFilterIndex struct {
	consumer map[string]map[int][]string // member -> partition -> its consumer's filters
	config   map[string]map[int][]string // member -> partition -> configured filters
}

func newLagFilterIndex(gi *health.GroupInfo, in lagInput) lagFilterIndex {
	idx := lagFilterIndex{consumer: map[string]map[int][]string{}, config: map[string]map[int][]string{}}
	for m, ci := range in.cis {
		if ci == nil {
			continue
		}
		fs := ci.Config.FilterSubjects
		if ci.Config.FilterSubject != "" {
			fs = append(slices.Clone(fs), ci.Config.FilterSubject)
		}
		idx.consumer[m] = byPartition(fs)
	}
	for p, ci := range in.parts {
		if ci == nil || p >= len(gi.Owners) {
			continue
		}
		owner := gi.Owners[p]
		if idx.consumer[owner] == nil {
			idx.consumer[owner] = map[int][]string{}
		}
		idx.consumer[owner][p] = byPartition(consumerFilters(ci.Config))[p]
	}
	for _, ms := range gi.Members {
		idx.config[ms.Member] = byPartition(ms.Filters)
	}
	return idx
}

func (idx lagFilterIndex) filters(gi *health.GroupInfo, p int, owner string) (filters []string, fromConsumer bool) {
	if out := idx.consumer[owner][p]; len(out) > 0 {
		return out, true
	}
	if owner != "" {
		if out := idx.config[owner][p]; len(out) > 0 {
			return out, false
		}
	}
	return partition.PartitionFilters([]int{p}, gi.Filters), false
}

func ageSeconds(now, t time.Time) float64 {
	d := now.Sub(t)
	if d < 0 {
		d = 0
	}
	return math.Round(d.Seconds()*1000) / 1000
}

// addOldest keeps the older of l's oldest message and (seq, t). (A
// function, not a method: Lag is health.Lag.)
func addOldest(l *health.Lag, seq uint64, t time.Time) {
	if seq != 0 && (l.OldestSeq == 0 || seq < l.OldestSeq) {
		l.OldestSeq, l.Oldest = seq, t
	}
}

// directLag counts partition j with one batched direct get per filter.
func (c *Client) directLag(ctx context.Context, stream string, j partitionJob) (health.Lag, error) {
	var l health.Lag
	for _, f := range j.filters {
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
			Batch   int    `json:"batch"`
		}{j.from, f, 1})
		msg, err := c.Conn().RequestWithContext(ctx, apiPrefix(c.js)+"DIRECT.GET."+stream, req)
		if err != nil {
			return l, fmt.Errorf("direct get %s on %s: %w", f, stream, err)
		}
		if code := msg.Header.Get("Status"); code != "" {
			if code == "404" {
				continue // nothing pending on f
			}
			return l, fmt.Errorf("direct get %s on %s: status %s %s", f, stream, code, msg.Header.Get("Description"))
		}
		np, err := strconv.ParseUint(msg.Header.Get(numPendingHeader), 10, 64)
		if err != nil {
			return l, fmt.Errorf("direct get %s on %s: no %s header (server older than 2.11?)", f, stream, numPendingHeader)
		}
		seq, _ := strconv.ParseUint(msg.Header.Get(jetstream.SequenceHeader), 10, 64)
		ts, _ := time.Parse(time.RFC3339Nano, msg.Header.Get(jetstream.TimeStampHeaer))
		l.Pending += np + 1
		addOldest(&l, seq, ts)
	}
	return l, nil
}

// subjectCounts returns the per-subject message counts of a stream; the
// client pages through them (the server sends at most 100,000 a page).
func (c *Client) subjectCounts(ctx context.Context, stream string) (map[string]uint64, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	si, err := s.Info(ctx, jetstream.WithSubjectFilter(">"))
	if err != nil {
		return nil, err
	}
	return si.State.Subjects, nil
}

// countedLag counts partition j from per-subject counts (a work-queue
// stream holds only what is pending) and reads its oldest message.
func (c *Client) countedLag(ctx context.Context, stream string, j partitionJob, counts map[string]uint64) (health.Lag, error) {
	var l health.Lag
	tok := strconv.Itoa(j.p) + "."
	for subj, n := range counts {
		if !strings.HasPrefix(subj, tok) {
			continue
		}
		for _, f := range j.filters {
			if subjectSubset(subj, f) {
				l.Pending += n
				break
			}
		}
	}
	if l.Pending == 0 {
		return l, nil
	}
	return l, c.oldestByGet(ctx, stream, j, &l)
}

// probeLag counts partition j with a short-lived consumer starting at
// j.from, then reads its oldest message.
func (c *Client) probeLag(ctx context.Context, stream string, j partitionJob) (health.Lag, error) {
	var l health.Lag
	cfg := jetstream.ConsumerConfig{
		Description:       "cg lag probe",
		DeliverPolicy:     jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:       j.from,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: 5 * time.Second, // in case the delete below is lost
	}
	if len(j.filters) == 1 {
		cfg.FilterSubject = j.filters[0]
	} else {
		cfg.FilterSubjects = j.filters
	}
	cons, err := c.createConsumer(ctx, stream, cfg)
	if err != nil {
		return l, fmt.Errorf("lag probe on %s: %w", stream, err)
	}
	name := cons.CachedInfo().Name
	l.Pending = cons.CachedInfo().NumPending
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	_ = c.js.DeleteConsumer(dctx, stream, name)
	cancel()
	if l.Pending == 0 {
		return l, nil
	}
	return l, c.oldestByGet(ctx, stream, j, &l)
}

// oldestByGet reads the first message at or after j.from on each filter
// with the stream message get API, keeping the oldest in l.
func (c *Client) oldestByGet(ctx context.Context, stream string, j partitionJob, l *health.Lag) error {
	for _, f := range j.filters {
		req, _ := json.Marshal(struct {
			Seq     uint64 `json:"seq"`
			NextFor string `json:"next_by_subj"`
		}{j.from, f})
		msg, err := c.Conn().RequestWithContext(ctx, apiPrefix(c.js)+"STREAM.MSG.GET."+stream, req)
		if err != nil {
			return fmt.Errorf("message get %s on %s: %w", f, stream, err)
		}
		var resp struct {
			Error *struct {
				Code        int    `json:"err_code"`
				Description string `json:"description"`
			} `json:"error"`
			Message *struct {
				Seq  uint64    `json:"seq"`
				Time time.Time `json:"time"`
			} `json:"message"`
		}
		if err := json.Unmarshal(msg.Data, &resp); err != nil {
			return fmt.Errorf("message get %s on %s: %w", f, stream, err)
		}
		if resp.Error != nil {
			if resp.Error.Code == int(jetstream.JSErrCodeMessageNotFound) {
				continue
			}
			return fmt.Errorf("message get %s on %s: %s", f, stream, resp.Error.Description)
		}
		if resp.Message != nil {
			addOldest(l, resp.Message.Seq, resp.Message.Time)
		}
	}
	return nil
}
