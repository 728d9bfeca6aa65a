package traffic

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Options.
const (
	DefaultMaxInFlight = 256
	DefaultAckTimeout  = 5 * time.Second
)

// Options describe a run of keyed traffic. At least one of Count, Duration
// or a cancellable context must end it.
type Options struct {
	// Subject is the subject pattern, as ParsePattern reads it.
	Subject string
	// Keys are the partition keys, used round-robin (or at random).
	Keys []string
	// Count is how many messages to publish; 0 means no limit.
	Count int
	// Duration bounds the run; 0 means no limit.
	Duration time.Duration
	// Rate is messages per second; 0 publishes as fast as the server acks,
	// with at most MaxInFlight publishes awaiting their ack.
	Rate float64
	// Random picks each message's key at random instead of in turn.
	Random bool
	// Seed seeds the random key choice; 0 picks one from the clock.
	Seed uint64
	// Size is the payload size in bytes; 0 sends a short JSON document.
	Size int
	// MaxInFlight bounds publishes awaiting their ack. Default 256.
	MaxInFlight int
	// AckTimeout is how long a publish may wait for its ack. Default 5s.
	AckTimeout time.Duration
	// Header is added to every message (a trace context, say).
	Header nats.Header
}

// Result is what a run published.
type Result struct {
	// Published counts messages the stream acknowledged.
	Published uint64 `json:"published"`
	// Failed counts publishes that got an error or no ack in time.
	Failed uint64 `json:"failed"`
	// Keys is the number of keys in use.
	Keys int `json:"keys"`
	// PerKey counts acknowledged messages per key; with no failure, key k
	// was published with key-seqs 1…PerKey[k].
	PerKey map[string]uint64 `json:"-"`
	// LastStreamSeq is the highest stream sequence acknowledged.
	LastStreamSeq uint64        `json:"last_stream_seq"`
	Elapsed       time.Duration `json:"-"`
}

// Rate is the achieved rate in messages per second.
func (r Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Published) / r.Elapsed.Seconds()
}

// Publisher publishes one run of keyed traffic. Its counters may be read
// from other goroutines while it runs.
type Publisher struct {
	js      jetstream.JetStream
	opts    Options
	pattern Pattern

	ran       atomic.Bool
	sent      atomic.Uint64
	published atomic.Uint64
	failed    atomic.Uint64
	lastSeq   atomic.Uint64

	mu     sync.Mutex
	perKey map[string]uint64
}

// NewPublisher checks opts and returns a publisher that publishes through js.
func NewPublisher(js jetstream.JetStream, opts Options) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("traffic: no JetStream context")
	}
	pat, err := ParsePattern(opts.Subject)
	if err != nil {
		return nil, err
	}
	if len(opts.Keys) == 0 {
		return nil, errors.New("at least one key is required")
	}
	seen := make(map[string]bool, len(opts.Keys))
	for _, k := range opts.Keys {
		if err := ValidateKey(k); err != nil {
			return nil, err
		}
		if seen[k] {
			return nil, fmt.Errorf("key %q is listed twice", k)
		}
		seen[k] = true
	}
	switch {
	case opts.Count < 0:
		return nil, fmt.Errorf("count %d is negative; use 0 for no limit", opts.Count)
	case opts.Duration < 0:
		return nil, fmt.Errorf("duration %v is negative; use 0 for no limit", opts.Duration)
	case opts.Rate < 0:
		return nil, fmt.Errorf("rate %v is negative; use 0 for as fast as possible", opts.Rate)
	case opts.Size < 0:
		return nil, fmt.Errorf("size %d is negative", opts.Size)
	case opts.MaxInFlight < 0 || opts.AckTimeout < 0:
		return nil, errors.New("max in-flight and ack timeout must not be negative")
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.AckTimeout == 0 {
		opts.AckTimeout = DefaultAckTimeout
	}
	return &Publisher{js: js, opts: opts, pattern: pat, perKey: make(map[string]uint64, len(opts.Keys))}, nil
}

// Publish runs one publisher with opts; see Publisher.Run.
func Publish(ctx context.Context, js jetstream.JetStream, opts Options) (Result, error) {
	p, err := NewPublisher(js, opts)
	if err != nil {
		return Result{}, err
	}
	return p.Run(ctx)
}

// Sent is the number of messages handed to the connection so far.
func (p *Publisher) Sent() uint64 { return p.sent.Load() }

// Published is the number of messages acknowledged so far.
func (p *Publisher) Published() uint64 { return p.published.Load() }

// Failed is the number of failed publishes so far.
func (p *Publisher) Failed() uint64 { return p.failed.Load() }

// Totals returns the acknowledged messages per key so far.
func (p *Publisher) Totals() map[string]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.perKey)
}

type inflight struct {
	fut    jetstream.PubAckFuture
	key    string
	sentAt time.Time
}

// Run publishes until Count messages are sent, Duration has passed or ctx
// is done, then waits (at most AckTimeout each) for the acks of what it
// sent, so the result counts every message the stream stored. The first
// failed publish stops the run and is returned with the counts so far.
// A cancelled ctx is a normal end, not an error. Run may be called once.
func (p *Publisher) Run(ctx context.Context) (Result, error) {
	if !p.ran.CompareAndSwap(false, true) {
		return Result{}, errors.New("traffic: a publisher runs once")
	}
	o := p.opts
	start := time.Now()
	var end time.Time
	if o.Duration > 0 {
		end = start.Add(o.Duration)
	}
	seed := o.Seed
	if seed == 0 {
		seed = uint64(start.UnixNano())
	}
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))

	// A failure stops sending but not the wait for acks already due.
	sendCtx, stopSending := context.WithCancel(ctx)
	defer stopSending()
	var (
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		p.failed.Add(1)
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stopSending()
	}

	pending := make(chan inflight, o.MaxInFlight)
	collected := make(chan struct{})
	go func() {
		defer close(collected)
		for in := range pending {
			p.await(in, fail)
		}
	}()

	keySeq := make(map[string]uint64, len(o.Keys))
	var interval time.Duration
	if o.Rate > 0 {
		interval = time.Duration(float64(time.Second) / o.Rate)
	}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
loop:
	for i := 0; o.Count == 0 || i < o.Count; i++ {
		if sendCtx.Err() != nil {
			break
		}
		if interval > 0 {
			// Each message has its own due time, so a late wake-up is
			// caught up rather than lowering the rate.
			due := start.Add(time.Duration(i) * interval)
			if !end.IsZero() && due.After(end) {
				break
			}
			if wait := time.Until(due); wait > 0 {
				timer.Reset(wait)
				select {
				case <-sendCtx.Done():
					break loop
				case <-timer.C:
				}
			}
		}
		if !end.IsZero() && !time.Now().Before(end) {
			break
		}
		key := o.Keys[i%len(o.Keys)]
		if o.Random {
			key = o.Keys[rng.IntN(len(o.Keys))]
		}
		keySeq[key]++
		seq := keySeq[key]
		msg := &nats.Msg{
			Subject: p.pattern.Subject(key),
			Header:  nats.Header{KeyHeader: []string{key}, KeySeqHeader: []string{strconv.FormatUint(seq, 10)}},
			Data:    payload(key, seq, o.Size),
		}
		for k, v := range o.Header {
			msg.Header[k] = v
		}
		fut, err := p.js.PublishMsgAsync(msg)
		if err != nil {
			fail(fmt.Errorf("publish to %s: %w", msg.Subject, err))
			break
		}
		p.sent.Add(1)
		// A full channel is the in-flight bound: wait for acks to drain.
		pending <- inflight{fut: fut, key: key, sentAt: time.Now()}
	}
	close(pending)
	<-collected

	res := Result{
		Published:     p.published.Load(),
		Failed:        p.failed.Load(),
		Keys:          len(o.Keys),
		PerKey:        p.Totals(),
		LastStreamSeq: p.lastSeq.Load(),
		Elapsed:       time.Since(start),
	}
	errMu.Lock()
	defer errMu.Unlock()
	return res, firstErr
}

func (p *Publisher) await(in inflight, fail func(error)) {
	t := time.NewTimer(time.Until(in.sentAt.Add(p.opts.AckTimeout)))
	defer t.Stop()
	select {
	case ack := <-in.fut.Ok():
		p.mu.Lock()
		p.perKey[in.key]++
		p.mu.Unlock()
		p.published.Add(1)
		for {
			last := p.lastSeq.Load()
			if ack.Sequence <= last || p.lastSeq.CompareAndSwap(last, ack.Sequence) {
				break
			}
		}
	case err := <-in.fut.Err():
		fail(fmt.Errorf("publish to %s: %w", in.fut.Msg().Subject, err))
	case <-t.C:
		fail(fmt.Errorf("publish to %s: no ack from the stream within %v", in.fut.Msg().Subject, p.opts.AckTimeout))
	}
}

// payload is a short JSON document naming the message, padded or cut to
// size bytes when size is set.
func payload(key string, seq uint64, size int) []byte {
	doc := `{"key":"` + key + `","seq":` + strconv.FormatUint(seq, 10) + `}`
	if size == 0 {
		return []byte(doc)
	}
	b := make([]byte, size)
	n := copy(b, doc)
	for i := n; i < size; i++ {
		b[i] = ' '
	}
	return b
}

// Ceilings of the publisher's numeric options, as `cg publish`, `cg bench`
// and `cg demo` take them. A key a run used costs about 280 B (its name,
// the duplicate check, its sequence and count; TestMeasureKeyMemory), so
// MaxKeys keys take about 27 MB. MaxSize is the server's default largest
// message (max_payload, 1 MiB): it refuses anything bigger.
const (
	MaxKeys = 100_000
	MaxSize = 1 << 20
)
