package chaos

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/partition"
)

// The headers cg publish stamps and consume --verify reads, spelled out
// rather than taken from internal/traffic, so that a rename there fails
// here.
const (
	keyHeader    = "Cg-Key"
	keySeqHeader = "Cg-Key-Seq"
)

// keySeq names one published message: its key and its sequence in the key.
type keySeq struct {
	key string
	seq uint64
}

func (k keySeq) String() string { return fmt.Sprintf("%s#%d", k.key, k.seq) }

// publisher publishes keyed messages to orders.<key> at a steady pace (plus
// bursts on demand) until it has published max or is stopped. Each message
// is retried until the stream acknowledges it, with a message id so that a
// retry after a lost ack (a server restart, a leader change) is
// deduplicated by the stream rather than stored twice: key k's messages are
// then exactly k#1…k#last[k], published in that order.
type publisher struct {
	js    jetstream.JetStream
	keys  []string
	every time.Duration
	max   int

	burst chan int
	stop  chan struct{}
	done  chan struct{}

	mu      sync.Mutex
	last    map[string]uint64 // last key-seq published per key
	sseq    map[keySeq]uint64 // stream sequence of each
	pubAt   []time.Time       // when each was acknowledged, in order
	pubKS   []keySeq          // which each was, beside pubAt
	count   int
	retries int
	lastErr error
	lastAt  time.Time
}

// publishedBetween counts the messages acknowledged between a and b.
func (p *publisher) publishedBetween(a, b time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, at := range p.pubAt {
		if at.After(a) && at.Before(b) {
			n++
		}
	}
	return n
}

func newPublisher(ctx context.Context, js jetstream.JetStream, keys []string, every time.Duration, max int) *publisher {
	p := &publisher{js: js, keys: keys, every: every, max: max, burst: make(chan int, 16),
		stop: make(chan struct{}), done: make(chan struct{}),
		last: map[string]uint64{}, sseq: map[keySeq]uint64{}}
	go p.run(ctx)
	return p
}

func (p *publisher) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	i := 0
	for p.published() < p.max {
		n := 1
		select {
		case <-ctx.Done():
			return
		case <-p.stop:
			return
		case <-tick.C:
		case n = <-p.burst:
		}
		for ; n > 0 && p.published() < p.max; n-- {
			if !p.publishOne(ctx, p.keys[i%len(p.keys)]) {
				return
			}
			i++
		}
	}
}

// publishAckWait is how long a publish waits for the stream's ack before
// it is sent again (the message id makes a second copy a duplicate the
// stream drops). A publish lost with the server it went to (a restart, a
// cluster node shut down) would otherwise leave every partition without
// new messages for this long, which the scenarios would take for a
// failover gap of the members.
const publishAckWait = 500 * time.Millisecond

func (p *publisher) publishOne(ctx context.Context, key string) bool {
	p.mu.Lock()
	seq := p.last[key] + 1
	p.mu.Unlock()
	msg := &nats.Msg{Subject: "orders." + key, Data: []byte(`{"k":"` + key + `"}`), Header: nats.Header{}}
	msg.Header.Set(keyHeader, key)
	msg.Header.Set(keySeqHeader, strconv.FormatUint(seq, 10))
	id := fmt.Sprintf("%s-%d", key, seq)
	for {
		actx, cancel := context.WithTimeout(ctx, publishAckWait)
		ack, err := p.js.PublishMsg(actx, msg, jetstream.WithMsgID(id))
		cancel()
		if err == nil {
			p.mu.Lock()
			p.last[key] = seq
			p.sseq[keySeq{key, seq}] = ack.Sequence
			p.count++
			p.lastAt = time.Now()
			p.pubAt = append(p.pubAt, p.lastAt)
			p.pubKS = append(p.pubKS, keySeq{key, seq})
			p.mu.Unlock()
			return true
		}
		p.mu.Lock()
		p.retries++
		p.lastErr = err
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-p.stop:
			// The stream may or may not have it; a redelivery of the id
			// later would be deduplicated, but nothing more is sent, so
			// the message does not count as published.
			return false
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (p *publisher) published() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.count
}

// sendBurst publishes n messages at once (on top of the pace).
func (p *publisher) sendBurst(n int) { p.burst <- n }

// finish stops publishing and returns what was published.
func (p *publisher) finish() (last map[string]uint64, sseq map[keySeq]uint64, retries int) {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last, p.sseq, p.retries
}

// keysFor returns keys k000, k001, … until each of n partitions has at
// least per keys (by the server's hash, which cg.PartitionOfKey is tested
// against), so every member gets traffic.
func keysFor(n, per int) []string {
	count := make([]int, n)
	var keys []string
	for i := 0; ; i++ {
		full := true
		for _, c := range count {
			if c < per {
				full = false
			}
		}
		if full {
			return keys
		}
		k := fmt.Sprintf("k%03d", i)
		if p := partition.PartitionOfKey(k, n); count[p] < per {
			count[p]++
			keys = append(keys, k)
		}
	}
}
