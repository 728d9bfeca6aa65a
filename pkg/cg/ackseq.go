package cg

import (
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ackSeqs reads a delivered message's delivery count and stream and
// consumer sequences off its ack subject, as Metadata does, but without
// allocating: the runtime asks for them several times a message (admit,
// the lanes' order, the acked set), and Metadata builds a whole struct,
// its strings and a timestamp each time. The subject is
// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>, or
// from newer servers $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.
// <delivered>.<sseq>.<cseq>.<ts>.<pending>[.<token>].
func ackSeqs(raw *nats.Msg) (delivered, stream, consumer uint64, ok bool) {
	s := raw.Reply
	if !strings.HasPrefix(s, "$JS.ACK.") {
		return 0, 0, 0, false
	}
	// One pass: where each token starts (the dots before them).
	var dots [16]int
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if n == len(dots) {
				return 0, 0, 0, false
			}
			dots[n] = i
			n++
		}
	}
	var at int // the token index of <delivered>
	switch tokens := n + 1; {
	case tokens == 9:
		at = 4
	case tokens >= 11:
		at = 6
	default:
		return 0, 0, 0, false
	}
	var vals [3]uint64
	for k := range vals {
		v, good := parseUint(s[dots[at+k-1]+1 : dots[at+k]])
		if !good {
			return 0, 0, 0, false
		}
		vals[k] = v
	}
	return vals[0], vals[1], vals[2], true
}

// ackMetadata is raw's metadata as nats.Msg.Metadata reads it off the ack
// subject, built once (Metadata builds nats' struct, which jsMsg.Metadata
// then copied into jetstream's: two allocations for every message whose
// handler asks). ok is false where Metadata would fail: the caller asks it
// then, for its error.
func ackMetadata(raw *nats.Msg) (*jetstream.MsgMetadata, bool) {
	s := raw.Reply
	if raw.Sub == nil || !strings.HasPrefix(s, "$JS.ACK.") {
		return nil, false
	}
	// $JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>,
	// or with <domain>.<account hash> before <stream> and perhaps a token
	// after <pending>: positions as nats.go numbers them, the domain and
	// hash left empty in the short form.
	n := strings.Count(s, ".") + 1
	if n != 9 && n < 11 {
		return nil, false
	}
	var tok [11]string
	for i := range tok {
		if n == 9 && (i == 2 || i == 3) {
			continue
		}
		tok[i], s, _ = strings.Cut(s, ".")
	}
	if tok[2] == "_" {
		tok[2] = ""
	}
	return &jetstream.MsgMetadata{
		Sequence:     jetstream.SequencePair{Consumer: ackNum(tok[8]), Stream: ackNum(tok[7])},
		NumDelivered: ackNum(tok[6]),
		NumPending:   ackNum(tok[10]),
		Timestamp:    time.Unix(0, int64(ackNum(tok[9]))),
		Stream:       tok[4],
		Consumer:     tok[5],
		Domain:       tok[2],
	}, true
}

// ackNum reads a number as nats.go does: 0 unless every byte is a digit.
func ackNum(d string) (n uint64) {
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0
		}
		n = n*10 + uint64(d[i]-'0')
	}
	return n
}

func parseUint(s string) (uint64, bool) {
	if s == "" || s[0] < '0' || s[0] > '9' {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

// streamSeq is raw's stream sequence (0 when raw is not a JetStream
// delivery).
func streamSeq(raw *nats.Msg) uint64 {
	_, s, _, _ := ackSeqs(raw)
	return s
}

// seqRing is a small set of recent stream sequences.
type seqRing struct {
	mu   sync.Mutex
	seqs []uint64
	set  map[uint64]bool
	next int
}

// newSeqRing sizes the set for n at once: it holds n sequences for good
// after the first n, and growing to that many, entry by entry, was a map
// growth every so often on every message's path.
func newSeqRing(n int) *seqRing {
	return &seqRing{seqs: make([]uint64, n), set: make(map[uint64]bool, n)}
}

func (r *seqRing) add(seq uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set[seq] {
		return
	}
	delete(r.set, r.seqs[r.next])
	r.seqs[r.next] = seq
	r.set[seq] = true
	r.next = (r.next + 1) % len(r.seqs)
}

func (r *seqRing) has(seq uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.set[seq]
}

// clear empties the ring.
func (r *seqRing) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.seqs)
	clear(r.set)
	r.next = 0
}

// sawDelivery notices that the member's consumer was reset (reset.go):
// delivery sequences only grow, redeliveries included, until the server
// resets the consumer, which starts them at 1 again. The stream sequences
// acked before it are then messages to handle again, not redeliveries of
// acked ones, so the binding forgets them. Called from the handler loop
// only.
func (b *binding) sawDelivery(raw *nats.Msg) {
	_, _, cseq, ok := ackSeqs(raw)
	if !ok {
		return
	}
	if cseq < b.lastDSeq {
		b.acked.clear()
	}
	b.lastDSeq = cseq
}
