package cg

import (
	"slices"
	"testing"

	"github.com/nats-io/nats.go"
)

// ackReplies are ack subjects of both forms, the second with and without
// the trailing tokens a newer server may add.
var ackReplies = []string{
	"$JS.ACK.ORDERS.g-m1.1.42.7.1700000000000000000.3",
	"$JS.ACK.ORDERS.g-m1.12.18446744073709551615.9.1700000000000000000.0",
	"$JS.ACK._.ACCHASH.ORDERS.g-m1.2.100.99.1700000000000000000.5.RND",
	"$JS.ACK.hub.ACCHASH.ORDERS.m1.1.5.5.1700000000000000000.0",
	"$JS.ACK.hub.ACCHASH.ORDERS.m1.1.5.5.1700000000000000000.0.a.b",
}

// ackSeqs reads what nats.go's Metadata reads, for both ack subject forms
// and for subjects that are not ack subjects at all.
func TestAckSeqsMatchesMetadata(t *testing.T) {
	for _, reply := range ackReplies {
		md, err := (&nats.Msg{Reply: reply, Sub: &nats.Subscription{}}).Metadata()
		if err != nil {
			t.Fatalf("%s: %v", reply, err)
		}
		d, s, c, ok := ackSeqs(&nats.Msg{Reply: reply})
		if !ok || d != md.NumDelivered || s != md.Sequence.Stream || c != md.Sequence.Consumer {
			t.Errorf("%s: got %d/%d/%d ok=%v, Metadata says %d/%d/%d", reply, d, s, c, ok, md.NumDelivered, md.Sequence.Stream, md.Sequence.Consumer)
		}
	}
	for _, reply := range []string{"", "_INBOX.x.y", "$JS.ACK.ORDERS.g-m1.1.42.7", "$JS.ACK.S.C.x.42.7.1.3", "$JS.ACK.S.C.1.-2.7.1.3", "$JS.ACK.a.b.S.C.1.2"} {
		if _, _, _, ok := ackSeqs(&nats.Msg{Reply: reply}); ok {
			t.Errorf("%q read as an ack subject", reply)
		}
		if got := streamSeq(&nats.Msg{Reply: reply}); got != 0 {
			t.Errorf("%q: stream seq %d", reply, got)
		}
	}
}

// ackMetadata builds what nats.go's Metadata reads, field for field, and
// leaves to it every subject it refuses.
func TestAckMetadataMatchesMetadata(t *testing.T) {
	for _, reply := range append(slices.Clone(ackReplies),
		"$JS.ACK.S.C.x.42.7.1.3",
		"$JS.ACK.S.C.1.-2.7.1.3",
		"$JS.ACK.a.b.S.C.1.2.3.4.5",
		"", "_INBOX.x.y", "$JS.ACK.ORDERS.g-m1.1.42.7", "$JS.ACK.a.b.S.C.1.2", "$JS.ACKX.a.b.c.d.e.f.g",
	) {
		raw := &nats.Msg{Reply: reply, Sub: &nats.Subscription{}}
		want, wantErr := jsMsg{m: raw}.slowMetadata()
		got, ok := ackMetadata(raw)
		if (wantErr != nil) == ok {
			t.Errorf("%q: read %v, Metadata's error %v", reply, ok, wantErr)
			continue
		}
		if ok && *got != *want {
			t.Errorf("%q: got %+v, Metadata says %+v", reply, *got, *want)
		}
	}
	if _, ok := ackMetadata(&nats.Msg{Reply: "$JS.ACK.S.C.1.2.3.4.5"}); ok {
		t.Error("a message of no subscription read (Metadata refuses it)")
	}
}

func BenchmarkAckSeqs(b *testing.B) {
	m := &nats.Msg{Reply: "$JS.ACK._.ACCHASH.ORDERS.g-m1.2.100.99.1700000000000000000.5.RND", Sub: &nats.Subscription{}}
	b.Run("ackSeqs", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			ackSeqs(m)
		}
	})
	b.Run("Metadata", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_, _ = m.Metadata()
		}
	})
}
