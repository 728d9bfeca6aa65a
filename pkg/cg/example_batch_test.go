package cg_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// dedupSink is an idempotent sink: per partition it keeps the highest
// stream sequence written and skips anything at or below it, so a batch
// replayed after a crash (written, never acked) is not written twice. A
// real sink stores that high-water mark in the same transaction as the
// rows.
type dedupSink struct {
	mu   sync.Mutex
	high map[int]uint64
	rows int
}

func (s *dedupSink) Write(_ context.Context, msgs []*cg.Msg) (written int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		md, err := m.Metadata()
		if err != nil {
			return written, err
		}
		if md.Sequence.Stream <= s.high[m.Partition()] {
			continue // a replay: already written
		}
		s.high[m.Partition()] = md.Sequence.Stream
		s.rows++
		written++
	}
	return written, nil
}

// A member that writes its messages to a sink in ordered batches of up to
// 10, acked only after the write succeeded (docs/batches.md). An embedded
// server stands in for a real one.
func ExampleBatchOptions() {
	dir, _ := os.MkdirTemp("", "cg-example-batch")
	defer os.RemoveAll(dir)
	srv, _ := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir, NoLog: true, NoSigs: true})
	go srv.Start()
	defer srv.Shutdown()
	srv.ReadyForConnections(5 * time.Second)

	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := context.Background()
	_, _ = js.CreateStream(ctx, jetstream.StreamConfig{
		Name: "ORDERS", Subjects: []string{"orders.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "orders.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}",
		},
	})
	c := cg.New(js)
	if _, err := c.CreateStatic(ctx, "ORDERS", "fulfillment", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		fmt.Println(err)
		return
	}
	for i := 1; i <= 25; i++ {
		_, _ = js.Publish(ctx, fmt.Sprintf("orders.c%d", i%5), []byte(fmt.Sprint(i)))
	}

	sink := &dedupSink{high: map[int]uint64{}}
	done := make(chan struct{})
	m, err := c.Join(ctx, cg.KindStatic, "ORDERS", "fulfillment", "m1", nil, cg.JoinOptions{
		Batch: &cg.BatchOptions{
			Size: 10,
			// A backlog fills batches at once; the last, short one is
			// called after waiting this long for more.
			Wait: time.Second,
			Handler: func(ctx context.Context, b *cg.Batch) error {
				n, err := sink.Write(ctx, b.Msgs)
				if err != nil {
					return err // the same batch again, in order, after a backoff
				}
				first, _ := b.Msgs[0].Metadata()
				last, _ := b.Msgs[len(b.Msgs)-1].Metadata()
				fmt.Printf("batch %d: %d messages, stream seqs %d-%d, %d written\n",
					b.Number, len(b.Msgs), first.Sequence.Stream, last.Sequence.Stream, n)
				if last.Sequence.Stream == 25 {
					close(done)
				}
				return nil // cg acks every message of the batch
			},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	<-done
	m.Stop()
	fmt.Println("rows:", sink.rows)
	// Output:
	// batch 1: 10 messages, stream seqs 1-10, 10 written
	// batch 2: 10 messages, stream seqs 11-20, 10 written
	// batch 3: 5 messages, stream seqs 21-25, 5 written
	// rows: 25
}
