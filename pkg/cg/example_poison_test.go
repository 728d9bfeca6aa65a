package cg_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// A member with a retry policy: a message whose handler fails three times
// is published to a dead-letter subject (captured by a stream of the
// program's own), with headers naming where it came from, and acked; the
// rest of its key follows only after it. docs/poison.md explains the
// choices.
func Example_poison() {
	dir, _ := os.MkdirTemp("", "cg-example-poison")
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
		Name: "ORDERS", Subjects: []string{"orders.*.*"},
		SubjectTransform: &jetstream.SubjectTransformConfig{
			Source: "orders.*.*", Destination: "{{partition(4,1)}}.orders.{{wildcard(1)}}.{{wildcard(2)}}",
		},
	})
	// The dead letters' stream is the program's: cg only publishes to it.
	dlq, _ := js.CreateStream(ctx, jetstream.StreamConfig{Name: "DEAD", Subjects: []string{"dlq.orders"}})

	c := cg.New(js)
	// Creating the group also makes the KV bucket poison state lives in.
	if _, err := c.CreateStatic(ctx, "ORDERS", "fulfillment", cg.StaticConfig{MaxMembers: 4, Members: []string{"m1"}}); err != nil {
		fmt.Println(err)
		return
	}

	done := make(chan struct{})
	m, err := c.JoinStatic(ctx, "ORDERS", "fulfillment", "m1", func(_ context.Context, msg *cg.Msg) {
		if string(msg.Data()) == "refund" {
			// Failed: record why (for the Cg-Error header), and nak.
			msg.Fail(errors.New("refunds are not supported"))
			_ = msg.Nak()
			return
		}
		fmt.Printf("handled %s %s\n", msg.Subject(), msg.Data())
		_ = msg.DoubleAck(ctx)
		if string(msg.Data()) == "ship" {
			close(done)
		}
	}, cg.JoinOptions{
		Retry: &cg.RetryPolicy{
			MaxDeliver: 3, // deliveries in all, the first included
			Backoff:    []time.Duration{50 * time.Millisecond, 100 * time.Millisecond},
			OnPoison:   cg.PoisonDeadLetter,
			DeadLetter: "dlq.orders",
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Stop()

	_, _ = js.Publish(ctx, "orders.alice.refund", []byte("refund"))
	_, _ = js.Publish(ctx, "orders.alice.ship", []byte("ship"))
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		fmt.Println("timed out")
		return
	}
	dl, err := dlq.GetMsg(ctx, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range []string{cg.HeaderDLSubject, cg.HeaderDLSequence, cg.HeaderDLDeliveries, cg.HeaderDLReason, cg.HeaderDLError} {
		fmt.Printf("%s: %s\n", h, dl.Header.Get(h))
	}
	// Output:
	// handled orders.alice.ship ship
	// Cg-Subject: orders.alice.refund
	// Cg-Sequence: 1
	// Cg-Deliveries: 3
	// Cg-Reason: max_deliver
	// Cg-Error: refunds are not supported
}
