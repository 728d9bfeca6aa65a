package health

import (
	"slices"
	"sync"
	"time"
)

// A live view of a group: a Sampler turns successive GroupInfos into
// Snapshots carrying rates and a status per partition and member, and
// cg's Client.WatchPins feeds it the server's pin advisories. The rules
// use no thresholds a user must pick, only what successive samples show:
//
//   - unknown: the partition's lag could not be read this time.
//   - unowned: no member owns the partition, or its owner has no running
//     instance (no consumer, or one with neither a waiting pull nor a pin).
//   - stalled: over the last StatusWindow samples the partition always had
//     messages pending while its owner made no progress at all: its
//     consumer delivered nothing new, its ack floor stood still and its
//     unacked count did not move (a hung handler, a poison message being
//     redelivered, a frozen process still holding the pin).
//   - lagging: over the last StatusWindow samples the partition always had
//     messages pending and that backlog never shrank and ended larger than
//     it began: the owner is not keeping up.
//   - ok: anything else, including a backlog being worked off.
//
// Until StatusWindow samples are in, stalled and lagging cannot be told.

// PartitionStatus is a partition's (or member's) health in a live view.
type PartitionStatus string

// The statuses, from healthy to worst.
const (
	StatusOK      PartitionStatus = "ok"
	StatusUnknown PartitionStatus = "unknown"
	StatusLagging PartitionStatus = "lagging"
	StatusStalled PartitionStatus = "stalled"
	StatusUnowned PartitionStatus = "unowned"
)

// Severity orders the statuses from ok (0) to unowned (4); a member shows
// its worst partition's.
func (s PartitionStatus) Severity() int {
	return slices.Index([]PartitionStatus{StatusOK, StatusUnknown, StatusLagging, StatusStalled, StatusUnowned}, s)
}

// StatusWindow is how many successive samples stalled and lagging look at.
const StatusWindow = 5

// maxPinEvents is how many recent pin events a snapshot carries.
const maxPinEvents = 10

// PinEvent is a pin or an unpin the server announced for a member consumer.
type PinEvent struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"` // "pinned" or "unpinned"
	Member   string    `json:"member,omitempty"`
	Consumer string    `json:"consumer"`
	PinID    string    `json:"pin_id,omitempty"`
	// Reason is why a pin was lost: "admin" (a step-down) or "timeout".
	Reason string `json:"reason,omitempty"`
}

// Snapshot is one sample of a group in a live view.
type Snapshot struct {
	Seq    int       `json:"seq"` // 1 for the first sample
	Time   time.Time `json:"time"`
	Kind   string    `json:"kind"`
	Stream string    `json:"stream"`
	Group  string    `json:"group"`
	// IntervalSeconds is the time since the previous sample (0 at first).
	IntervalSeconds float64 `json:"interval_seconds"`
	// Pending is the group's total of unacked messages (members' sum,
	// counting a member without consumer by its partitions).
	Pending uint64 `json:"pending"`
	// AckRate is the group's acks per second since the previous sample.
	AckRate *float64 `json:"ack_rate,omitempty"`
	// Statuses counts partitions by status.
	Statuses   map[PartitionStatus]int `json:"statuses"`
	Members    []MemberSnapshot        `json:"members"`
	Partitions []PartitionSnapshot     `json:"partitions"`
	// Events are the latest pin events of the group's consumers, oldest first.
	Events   []PinEvent `json:"events"`
	LagError string     `json:"lag_error,omitempty"`
}

// MemberSnapshot is one member in a snapshot.
type MemberSnapshot struct {
	Member     string          `json:"member"`
	Partitions []int           `json:"partitions"`
	Status     PartitionStatus `json:"status"` // its worst partition's
	// Live: the member has a running instance (a waiting pull or a pin).
	Live bool `json:"live"`
	// Instances is the number of waiting pull requests, about one per
	// running instance; Standbys is that less the pinned one.
	Instances   int       `json:"instances"`
	Standbys    int       `json:"standbys"`
	PinID       string    `json:"pin_id,omitempty"`
	PinnedSince time.Time `json:"pinned_since,omitzero"`
	// Lag is nil when unknown.
	Lag *Lag `json:"lag,omitempty"`
	// AckRate is acks (deliveries settled) per second since the previous
	// sample; nil at first or when the consumer was recreated meanwhile.
	AckRate *float64 `json:"ack_rate,omitempty"`
	// Dynamic and LastSeen are MemberStatus's: the member added itself,
	// and the server's time of its instances' latest liveness write.
	Dynamic  bool      `json:"dynamic,omitempty"`
	LastSeen time.Time `json:"last_seen,omitzero"`
}

// PartitionSnapshot is one partition in a snapshot.
type PartitionSnapshot struct {
	Partition int             `json:"partition"`
	Owner     string          `json:"owner,omitempty"`
	Status    PartitionStatus `json:"status"`
	// Reason says what the status rests on.
	Reason string `json:"reason,omitempty"`
	Known  bool   `json:"known"`
	Lag
	// Rate is the change of Pending per second since the previous
	// sample: positive while the backlog grows, negative while it drains.
	Rate *float64 `json:"rate,omitempty"`
}

// progress is what changes when a member consumer does any work.
type progress struct {
	delivered, ackFloor uint64
	ackPending          int
}

// sample is what the sampler keeps of one GroupInfo.
type sample struct {
	at        time.Time
	known     map[int]bool
	pending   map[int]uint64
	owner     map[int]string
	progress  map[string]progress // members with a consumer
	ackFloors map[string]uint64   // consumer ack floor sequences
}

// Sampler turns successive GroupInfos of one group into Snapshots. AddPin
// may be called from any goroutine; Add from one at a time.
type Sampler struct {
	mu     sync.Mutex
	hist   []sample // the last StatusWindow samples, oldest first
	seq    int
	events []PinEvent // raw, newest last
}

// NewSampler returns a sampler with no history.
func NewSampler() *Sampler { return &Sampler{} }

// AddPin records a pin event; the next snapshot shows it when the
// consumer is one of the group's.
func (s *Sampler) AddPin(e PinEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, e)
	if len(s.events) > 4*maxPinEvents {
		s.events = slices.Clone(s.events[len(s.events)-2*maxPinEvents:])
	}
}

// Add takes the next sample of the group and returns its snapshot.
func (s *Sampler) Add(gi GroupInfo) Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := gi.SampledAt
	if now.IsZero() {
		now = time.Now().UTC()
	}
	cur := sample{at: now, known: map[int]bool{}, pending: map[int]uint64{}, owner: map[int]string{},
		progress: map[string]progress{}, ackFloors: map[string]uint64{}}
	for _, pl := range gi.PartitionLag {
		cur.known[pl.Partition], cur.pending[pl.Partition] = pl.Known, pl.Pending
	}
	for p, o := range gi.Owners {
		cur.owner[p] = o
	}
	members := map[string]*MemberStatus{}
	consumers := map[string]string{}
	for i := range gi.Members {
		ms := &gi.Members[i]
		members[ms.Member] = ms
		consumers[ms.Consumer] = ms.Member
		if ms.ConsumerExists {
			cur.progress[ms.Member] = progress{ms.Delivered, ms.AckFloor, ms.AckPending}
			cur.ackFloors[ms.Member] = ms.AckFloorConsumerSeq
		}
	}
	var prev *sample
	if len(s.hist) > 0 {
		prev = &s.hist[len(s.hist)-1]
	}
	s.hist = append(s.hist, cur)
	if len(s.hist) > StatusWindow {
		s.hist = slices.Clone(s.hist[len(s.hist)-StatusWindow:])
	}
	s.seq++

	snap := Snapshot{Seq: s.seq, Time: now, Kind: gi.Kind, Stream: gi.Stream, Group: gi.Group,
		Statuses: map[PartitionStatus]int{}, LagError: gi.LagError, Members: []MemberSnapshot{}, Partitions: []PartitionSnapshot{}}
	var dt float64
	if prev != nil {
		dt = now.Sub(prev.at).Seconds()
		snap.IntervalSeconds = dt
	}
	rate := func(d float64) *float64 {
		r := d / dt
		return &r
	}

	worst := map[string]PartitionStatus{}
	for _, pl := range gi.PartitionLag {
		ps := PartitionSnapshot{Partition: pl.Partition, Owner: pl.Owner, Known: pl.Known, Lag: pl.Lag}
		ps.Status, ps.Reason = s.status(pl, members[pl.Owner])
		if prev != nil && dt > 0 && pl.Known && prev.known[pl.Partition] {
			ps.Rate = rate(float64(pl.Pending) - float64(prev.pending[pl.Partition]))
		}
		snap.Statuses[ps.Status]++
		if w, ok := worst[pl.Owner]; !ok || ps.Status.Severity() > w.Severity() {
			worst[pl.Owner] = ps.Status
		}
		snap.Partitions = append(snap.Partitions, ps)
	}

	var groupRate float64
	rated := false
	for _, ms := range gi.Members {
		m := MemberSnapshot{Member: ms.Member, Partitions: ms.Partitions, Live: memberLive(ms), Instances: ms.Waiting,
			Standbys: ms.Standbys, PinID: ms.PinID, PinnedSince: ms.PinnedSince, Lag: ms.Lag, Status: StatusOK,
			Dynamic: ms.Dynamic, LastSeen: ms.LastSeen}
		if w, ok := worst[ms.Member]; ok {
			m.Status = w
		} else if !m.Live && len(ms.Partitions) > 0 {
			m.Status = StatusUnowned
		}
		if ms.Lag != nil {
			snap.Pending += ms.Lag.Pending
		}
		if prev != nil && dt > 0 && ms.ConsumerExists {
			if before, ok := prev.ackFloors[ms.Member]; ok && ms.AckFloorConsumerSeq >= before {
				m.AckRate = rate(float64(ms.AckFloorConsumerSeq - before))
				groupRate += *m.AckRate
				rated = true
			}
		}
		snap.Members = append(snap.Members, m)
	}
	if rated {
		snap.AckRate = &groupRate
	}
	// Partitions nobody owns are in no member's count.
	for _, ps := range snap.Partitions {
		if ps.Owner == "" {
			snap.Pending += ps.Pending
		}
	}

	snap.Events = []PinEvent{}
	for _, e := range s.events {
		m, ok := consumers[e.Consumer]
		if !ok {
			continue
		}
		e.Member = m
		snap.Events = append(snap.Events, e)
	}
	if len(snap.Events) > maxPinEvents {
		snap.Events = snap.Events[len(snap.Events)-maxPinEvents:]
	}
	return snap
}

// memberLive reports whether a member has a running instance.
func memberLive(ms MemberStatus) bool { return ms.ConsumerExists && (ms.Waiting > 0 || ms.Pinned) }

// status applies the rules above to partition pl, owned by ms (nil: no
// member), given the history (which ends with the current sample).
func (s *Sampler) status(pl PartitionLag, ms *MemberStatus) (PartitionStatus, string) {
	switch {
	case !pl.Known:
		return StatusUnknown, "its lag could not be read"
	case pl.Owner == "" || ms == nil:
		return StatusUnowned, "no member owns it"
	case ms.Unusable != "":
		return StatusUnowned, "owner " + pl.Owner + " can never run: " + ms.Unusable
	case !ms.ConsumerExists:
		return StatusUnowned, "owner " + pl.Owner + " has no consumer: no instance is running"
	case !memberLive(*ms):
		return StatusUnowned, "owner " + pl.Owner + " has no running instance (no waiting pull, no pin)"
	}
	if len(s.hist) < StatusWindow {
		return StatusOK, ""
	}
	p := pl.Partition
	stuck, growing := true, true
	first := s.hist[0]
	for i, h := range s.hist {
		if h.owner[p] != pl.Owner || !h.known[p] || h.pending[p] == 0 {
			return StatusOK, ""
		}
		pr, ok := h.progress[pl.Owner]
		if !ok || pr != first.progress[pl.Owner] {
			stuck = false
		}
		if i > 0 && h.pending[p] < s.hist[i-1].pending[p] {
			growing = false
		}
	}
	if _, ok := first.progress[pl.Owner]; !ok {
		stuck = false
	}
	switch {
	case stuck:
		return StatusStalled, "messages pending while owner " + pl.Owner + " delivered and acked nothing over the last samples"
	case growing && s.hist[len(s.hist)-1].pending[p] > first.pending[p]:
		return StatusLagging, "backlog grew over the last samples"
	}
	return StatusOK, ""
}
