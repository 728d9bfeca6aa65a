package cg_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
)

// JoinOptions above their ceilings are refused with ErrAboveCeiling
// before anything is joined: no consumer is made.
func TestJoinRefusesOptionsAboveCeilings(t *testing.T) {
	_, js, _ := laneSetup(t, "m1")
	c := cg.New(js)
	ctx := ctxT(t)
	h := func(context.Context, *cg.Msg) {}
	bh := func(context.Context, *cg.Batch) error { return nil }
	for _, tc := range []struct {
		name string
		opts cg.JoinOptions
		h    cg.Handler
		want string
	}{
		{"concurrency", cg.JoinOptions{Concurrency: 100000}, h, "Concurrency 100000 is above cg's ceiling of 1024"},
		{"max ack pending", cg.JoinOptions{MaxAckPending: cg.MaxAckPendingMax + 1}, h, "MaxAckPending 4097 is above cg's ceiling of 4096"},
		{"batch size", cg.JoinOptions{Batch: &cg.BatchOptions{Size: 100000, Handler: bh}}, nil, "Batch.Size 100000 is above cg's ceiling of 1024"},
		{"max deliver", cg.JoinOptions{Retry: &cg.RetryPolicy{MaxDeliver: 5000}}, h, "Retry.MaxDeliver 5000 is above cg's ceiling of 1000"},
		{"backoff steps", cg.JoinOptions{Retry: &cg.RetryPolicy{MaxDeliver: 5, Backoff: make([]time.Duration, 101)}}, h, "Retry.Backoff entries 101"},
		{"backoff delay", cg.JoinOptions{Retry: &cg.RetryPolicy{MaxDeliver: 5, Backoff: []time.Duration{48 * time.Hour}}}, h, "Retry.Backoff delay 48h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", tc.h, tc.opts)
			if err == nil {
				m.Stop()
				t.Fatal("joined")
			}
			if !errors.Is(err, cg.ErrAboveCeiling) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want ErrAboveCeiling saying %q", err, tc.want)
			}
			st, err := js.Stream(ctx, "ORDERS")
			if err != nil {
				t.Fatal(err)
			}
			if n := st.CachedInfo().State.Consumers; n != 0 {
				t.Fatalf("%d consumers made by a refused join", n)
			}
		})
	}
	// At the ceilings the member runs.
	m, err := c.JoinStatic(ctx, "ORDERS", "g", "m1", h, cg.JoinOptions{Concurrency: cg.MaxConcurrency})
	if err != nil {
		t.Fatal(err)
	}
	m.Stop()
}
