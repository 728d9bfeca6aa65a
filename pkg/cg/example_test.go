package cg_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// A Go program creating a static group over a partition-stamped stream and
// joining it as member m1. An embedded server stands in for a real one.
func Example() {
	dir, _ := os.MkdirTemp("", "cg-example")
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

	// The stream stamps a partition token, hashed from the customer, on
	// every subject: orders.alice -> <p>.orders.alice.
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

	done := make(chan struct{})
	handled := 0
	m, err := c.JoinStatic(ctx, "ORDERS", "fulfillment", "m1", func(_ context.Context, msg *cg.Msg) {
		// The partition token is already stripped from the subject.
		fmt.Printf("%s %s\n", msg.Subject(), msg.Data())
		_ = msg.DoubleAck(ctx)
		if handled++; handled == 3 {
			close(done)
		}
	}, cg.JoinOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Stop()

	for _, step := range []string{"buy", "pay", "ship"} {
		_, _ = js.Publish(ctx, "orders.alice", []byte(step))
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		fmt.Println("timed out")
	}
	// Output:
	// orders.alice buy
	// orders.alice pay
	// orders.alice ship
}
