package traffic

import (
	"maps"
	"sort"
	"sync"
)

// Outcome classifies one handled message.
type Outcome string

// The outcomes Observe reports.
const (
	// Fresh: the first time this key/seq was handled, in order.
	Fresh Outcome = "fresh"
	// Duplicate: this key/seq was handled before (a redelivery, typically
	// around a failover: pinning is affinity, not a lock).
	Duplicate Outcome = "duplicate"
	// OutOfOrder: first time seen, but a later key-seq of the same key was
	// handled before it: per-key order was broken.
	OutOfOrder Outcome = "out_of_order"
	// Unkeyed: the message carried no usable key or key-seq (0).
	Unkeyed Outcome = "unkeyed"
)

// Check is what Observe found about one message.
type Check struct {
	Outcome Outcome `json:"outcome"`
	Key     string  `json:"key,omitempty"`
	KeySeq  uint64  `json:"key_seq,omitempty"`
	// Gap is how many key-seqs this message skipped past the highest one
	// handled for its key (0 when it follows on).
	Gap uint64 `json:"gap,omitempty"`
	// Baseline: this message set its key's baseline (mid-stream mode).
	Baseline bool `json:"baseline,omitempty"`
}

// VerifierOptions tune a Verifier.
type VerifierOptions struct {
	// MidStream is for a consumer that joined a stream already flowing:
	// the first key-seq seen for each key is its baseline, where counting
	// starts. Without it every key is expected from key-seq 1.
	MidStream bool
}

// Stats are a Verifier's counts.
type Stats struct {
	// Handled counts every observation, duplicates included.
	Handled uint64 `json:"handled"`
	// Processed counts distinct key/seq pairs.
	Processed uint64 `json:"processed"`
	// Duplicates counts observations of a key/seq already handled.
	Duplicates uint64 `json:"duplicates"`
	// Violations counts key/seqs handled after a later key-seq of their key.
	Violations uint64 `json:"order_violations"`
	// Gaps counts jumps of more than one over a key's highest key-seq.
	Gaps uint64 `json:"gaps"`
	// Missing counts key-seqs below each key's highest (and from its
	// baseline) not handled so far: gaps not yet filled in.
	Missing uint64 `json:"missing"`
	// Unkeyed counts messages without usable key headers.
	Unkeyed uint64 `json:"unkeyed"`
	// Keys is the number of keys seen.
	Keys int `json:"keys"`
	// ByWho counts observations per handler.
	ByWho map[string]uint64 `json:"by_who,omitempty"`
}

// Verifier checks per-key delivery: fed with every handled message, it
// counts duplicates, order violations and gaps, and (given what was
// published) losses. It is safe for concurrent use. Memory per key stays
// small while key-seqs arrive roughly in order: only key-seqs seen above
// the first hole are remembered one by one.
type Verifier struct {
	midStream bool

	mu         sync.Mutex
	keys       map[string]*keyState
	handled    uint64
	processed  uint64
	duplicates uint64
	violations uint64
	gaps       uint64
	unkeyed    uint64
	byWho      map[string]uint64
	lastStream map[string]uint64
}

// keyState: every key-seq in [base, floor] has been seen; above holds the
// ones seen beyond floor+1; below those seen under base (mid-stream mode,
// handled late).
type keyState struct {
	base, floor, high uint64
	above             map[uint64]struct{}
	below             map[uint64]struct{}
}

func (k *keyState) seen(seq uint64) bool {
	if seq < k.base {
		_, ok := k.below[seq]
		return ok
	}
	if seq <= k.floor {
		return true
	}
	_, ok := k.above[seq]
	return ok
}

func (k *keyState) add(seq uint64) {
	switch {
	case seq < k.base:
		if k.below == nil {
			k.below = map[uint64]struct{}{}
		}
		k.below[seq] = struct{}{}
	case seq == k.floor+1:
		k.floor++
		for {
			if _, ok := k.above[k.floor+1]; !ok {
				break
			}
			delete(k.above, k.floor+1)
			k.floor++
		}
	default:
		if k.above == nil {
			k.above = map[uint64]struct{}{}
		}
		k.above[seq] = struct{}{}
	}
	k.high = max(k.high, seq)
}

// missing counts the holes between base and high.
func (k *keyState) missing() uint64 {
	if k.high < k.base {
		return 0
	}
	return k.high - k.floor - uint64(len(k.above))
}

// seenUpTo counts distinct key-seqs in [base, n].
func (k *keyState) seenUpTo(n uint64) uint64 {
	if n < k.base {
		return 0
	}
	c := min(k.floor, n) + 1 - k.base
	for s := range k.above {
		if s <= n {
			c++
		}
	}
	return c
}

// NewVerifier returns an empty Verifier.
func NewVerifier(opts VerifierOptions) *Verifier {
	return &Verifier{
		midStream:  opts.MidStream,
		keys:       map[string]*keyState{},
		byWho:      map[string]uint64{},
		lastStream: map[string]uint64{},
	}
}

// Observe records that who handled the message key/keySeq stored at
// streamSeq, and says what that was. A keySeq of 0 or an empty key is
// counted as unkeyed.
func (v *Verifier) Observe(key string, keySeq, streamSeq uint64, who string) Check {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.handled++
	v.byWho[who]++
	v.lastStream[who] = max(v.lastStream[who], streamSeq)
	if key == "" || keySeq == 0 {
		v.unkeyed++
		return Check{Outcome: Unkeyed, Key: key, KeySeq: keySeq}
	}
	c := Check{Key: key, KeySeq: keySeq}
	k, ok := v.keys[key]
	if !ok {
		base := uint64(1)
		if v.midStream {
			base = keySeq
			c.Baseline = true
		}
		k = &keyState{base: base, floor: base - 1, high: base - 1}
		v.keys[key] = k
	}
	switch {
	case k.seen(keySeq):
		v.duplicates++
		c.Outcome = Duplicate
		return c
	case keySeq < k.high:
		v.violations++
		c.Outcome = OutOfOrder
	default:
		c.Outcome = Fresh
		if keySeq > k.high+1 {
			c.Gap = keySeq - k.high - 1
			v.gaps++
		}
	}
	v.processed++
	k.add(keySeq)
	return c
}

// Stats returns the counts so far.
func (v *Verifier) Stats() Stats {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := Stats{
		Handled:    v.handled,
		Processed:  v.processed,
		Duplicates: v.duplicates,
		Violations: v.violations,
		Gaps:       v.gaps,
		Unkeyed:    v.unkeyed,
		Keys:       len(v.keys),
		ByWho:      maps.Clone(v.byWho),
	}
	for _, k := range v.keys {
		s.Missing += k.missing()
	}
	return s
}

// Lost counts published messages not handled: published[k] is the number
// of messages published for key k, with key-seqs 1…published[k]. For each
// key, the key-seqs from its baseline (1, or the first one seen in
// mid-stream mode) up to published[k] that were never handled are lost; a
// key never seen loses all of its messages.
func (v *Verifier) Lost(published map[string]uint64) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	var lost uint64
	for key, n := range published {
		k, ok := v.keys[key]
		if !ok {
			lost += n
			continue
		}
		if n < k.base {
			continue
		}
		lost += n - k.base + 1 - k.seenUpTo(n)
	}
	return lost
}

// Distinct is the number of distinct key-seqs handled for key.
func (v *Verifier) Distinct(key string) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	k, ok := v.keys[key]
	if !ok {
		return 0
	}
	return k.floor + 1 - k.base + uint64(len(k.above)) + uint64(len(k.below))
}

// Keys lists the keys seen, sorted.
func (v *Verifier) Keys() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make([]string, 0, len(v.keys))
	for k := range v.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// LastStreamSeq is the highest stream sequence who has handled.
func (v *Verifier) LastStreamSeq(who string) uint64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.lastStream[who]
}
