package cg

import "github.com/nats-io/nats.go"

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

// clear empties the ring.
func (r *seqRing) clear() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.seqs)
	r.set = map[uint64]bool{}
	r.next = 0
}
