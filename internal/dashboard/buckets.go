package dashboard

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg"
)

// Groups come and go through the configuration buckets. Listing them reads
// every key through a short-lived consumer on the bucket, too costly to do
// several times a second; instead the dashboard watches both buckets (one
// long-lived watcher each) and lists again when a key changes, and lists
// anyway every listEvery in case a change was missed (a watcher remade
// after a reconnect, say).

// bucketRetry is how often a bucket that is not there yet (no group of
// that kind was ever made) is looked for again.
const bucketRetry = time.Second

// watchBuckets runs until ctx ends.
func (s *Server) watchBuckets(ctx context.Context) {
	buckets := []string{cg.StaticBucket, cg.ElasticBucket, cg.StaticPartitionBucket, cg.ElasticPartitionBucket}
	done := make(chan struct{}, len(buckets))
	for _, b := range buckets {
		go func() { defer func() { done <- struct{}{} }(); s.watchBucket(ctx, b) }()
	}
	for range buckets {
		<-done
	}
}

func (s *Server) watchBucket(ctx context.Context, bucket string) {
	for ctx.Err() == nil {
		if s.connected() {
			s.followBucket(ctx, bucket)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(bucketRetry):
		}
	}
}

// followBucket watches bucket until the watcher ends or ctx does: every
// change asks Run to list the groups again at once.
func (s *Server) followBucket(ctx context.Context, bucket string) {
	octx, cancel := context.WithTimeout(ctx, 5*time.Second)
	kv, err := s.client.JetStream().KeyValue(octx, bucket)
	cancel()
	if err != nil {
		return
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	w, err := kv.WatchAll(wctx, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		return
	}
	defer func() { _ = w.Stop() }()
	// What changed before the watcher was there (the put that made the
	// bucket, say) is only seen by listing.
	s.relist.Store(true)
	s.kick()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e != nil {
				s.relist.Store(true)
				s.kick()
			}
		}
	}
}
