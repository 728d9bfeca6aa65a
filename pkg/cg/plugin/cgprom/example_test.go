package cgprom_test

import (
	"context"
	"log"
	"net/http"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/plugin/cgprom"
)

// A member instance whose metrics are served on /metrics.
func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	reg := prometheus.NewRegistry()
	metrics, err := cgprom.New(reg)
	if err != nil {
		log.Fatal(err)
	}
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go func() { log.Fatal(http.ListenAndServe("127.0.0.1:9464", nil)) }()

	m, err := cg.New(js).JoinStatic(context.Background(), "ORDERS", "workers", "m1",
		func(ctx context.Context, msg *cg.Msg) { _ = msg.Ack() },
		cg.JoinOptions{Observers: []cg.Observer{metrics}})
	if err != nil {
		log.Fatal(err)
	}
	_ = m.Wait()
}
