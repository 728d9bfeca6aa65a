package cg_test

import (
	"context"
	"testing"
	"time"

	"github.com/cg-dev/cg/pkg/cg"
	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// A reset that loses its connection while it waits for a running instance
// to settle cannot resume the member consumer it paused: the pause is a
// lease the reset renews while it runs, so the consumer resumes by itself
// within the lease (10 s), not after the reset's whole bound (it stayed
// paused for 90 s), and the member goes on.
func TestResetThatDiesLeavesNoConsumerPausedLong(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	laneStream(t, js, 8)
	ctx := ctxT(t)
	admin := cg.New(js)
	if _, err := admin.CreateStatic(ctx, "ORDERS", "g", cg.StaticConfig{MaxMembers: 8, Members: []string{"m1"}}); err != nil {
		t.Fatal(err)
	}
	publishKeyed(t, js, keyNames(4), 4)
	hold := make(chan struct{})
	handled := make(chan struct{}, 100)
	memberC, _ := cg.NewFromConn(natstest.Connect(t, s), "")
	m, err := memberC.JoinStatic(ctx, "ORDERS", "g", "m1", func(_ context.Context, msg *cg.Msg) {
		<-hold // the first message is held unacked: the reset waits for it
		_ = msg.Ack()
		handled <- struct{}{}
	}, cg.JoinOptions{AckWait: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Stop()
	natstest.Eventually(t, 20*time.Second, "a message in hand", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && cons.CachedInfo().NumAckPending == 1
	})

	nc := natstest.Connect(t, s)
	resetC, _ := cg.NewFromConn(nc, "")
	done := make(chan error, 1)
	go func() {
		_, err := resetC.Reset(ctx, cg.KindStatic, "ORDERS", "g", nil, cg.ResetTarget{Start: true})
		done <- err
	}()
	natstest.Eventually(t, 20*time.Second, "the member consumer paused by the reset", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && cons.CachedInfo().Paused
	})
	nc.Close() // the reset dies here, its consumer paused
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a reset whose connection closed reported success")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the reset did not return after its connection closed")
	}
	close(hold)
	start := time.Now()
	natstest.Eventually(t, 20*time.Second, "the consumer resumed by itself", func() bool {
		cons, err := js.Consumer(ctx, "ORDERS", "g-m1")
		return err == nil && !cons.CachedInfo().Paused
	})
	t.Logf("resumed %s after the reset died", time.Since(start).Round(100*time.Millisecond))
	for range 4 {
		select {
		case <-handled:
		case <-time.After(20 * time.Second):
			t.Fatal("the member did not go on after the pause ran out")
		}
	}
}
