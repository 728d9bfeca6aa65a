package dashboard

import (
	"github.com/cg-dev/cg/internal/traffic"
	"github.com/cg-dev/cg/pkg/cg"
)

// Handled is the "handled" event of msg, handled by instance (a name the
// producer picks, such as "m1/a") of member: for Emit from a handler, as
// the demo's. Key is the message's Cg-Key header (cg publish sets it),
// Seq its stream sequence, PinID the pin it was delivered under and
// Partitions its partition.
func Handled(stream, group, member, instance string, msg *cg.Msg) Event {
	e := Event{Type: TypeHandled, Stream: stream, Group: group, Member: member, Instance: instance,
		Subject: msg.Subject(), PinID: msg.PinID(), Partitions: []int{msg.Partition()}}
	if raw := msg.Raw(); raw != nil {
		if h := raw.Headers(); h != nil {
			e.Key = h.Get(traffic.KeyHeader)
		}
		if md, err := raw.Metadata(); err == nil {
			e.Seq = md.Sequence.Stream
		}
	}
	return e
}
