package cg

import (
	"sync"

	"github.com/nats-io/nats.go"
)

// StageLog is what a recording delivery stage saw, for the external tests.
type StageLog struct {
	mu    sync.Mutex
	calls []string // "accept <stream seq>", "handBack", "wait"
}

// Calls is a copy of the calls the stages of a member got, in order.
func (l *StageLog) Calls() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.calls...)
}

func (l *StageLog) add(s string) {
	l.mu.Lock()
	l.calls = append(l.calls, s)
	l.mu.Unlock()
}

// WithRecordingStage plugs a second delivery stage into o: the serial one,
// recording every call the runtime makes. It proves the runtime reaches
// user code only through the stage.
func WithRecordingStage(o JoinOptions, l *StageLog) JoinOptions {
	o.stage = func(sink deliverySink) delivery { return &recordingStage{inner: newSerialDelivery(sink), log: l} }
	return o
}

type recordingStage struct {
	inner delivery
	log   *StageLog
}

func (r *recordingStage) accept(raw *nats.Msg) {
	seq := "?"
	if md, err := raw.Metadata(); err == nil {
		seq = itoa(md.Sequence.Stream)
	}
	r.log.add("accept " + seq)
	r.inner.accept(raw)
}

func (r *recordingStage) handBack() {
	r.log.add("handBack")
	r.inner.handBack()
}

func (r *recordingStage) wait() bool {
	r.log.add("wait")
	return r.inner.wait()
}

func itoa(n uint64) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// WithHashLanes makes a concurrent member fold its keys onto Concurrency
// fixed lanes by hash (the alternative to one queue per key), for the
// benchmark that compares them.
func WithHashLanes(o JoinOptions) JoinOptions {
	o.hashLanes = true
	return o
}
