package cg

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cg-dev/cg/pkg/cg/natstest"
)

// Listings of cg's buckets see every key that holds a value while other
// keys, or the same, are rewritten: a liveness record is rewritten every
// 500 ms and a group's configuration on every membership change. The
// key walk of jetstream's ListKeys missed a key rewritten meanwhile in
// about one listing of twenty, and info then showed a dynamic member
// never seen (a loaded run of the e2e suite).
func TestKeyListingsSeeKeysRewrittenMeanwhile(t *testing.T) {
	s := natstest.RunServer(t)
	_, js := natstest.JetStream(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "ORDERS", Subjects: []string{"orders.*"}}); err != nil {
		t.Fatal(err)
	}
	c := New(js)
	cfg := ElasticConfig{MaxMembers: 4, Members: []string{"a"},
		PartitioningFilters: []PartitioningFilter{{Filter: "orders.*", PartitioningWildcards: []int{1}}}}
	for _, g := range []string{"g", "gone"} {
		if _, err := c.CreateElastic(ctx, "ORDERS", g, cfg); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Delete(ctx, KindElastic, "ORDERS", "gone"); err != nil {
		t.Fatal(err)
	}
	dyn, err := c.bucketFor(ctx, DynamicBucket, 1)
	if err != nil {
		t.Fatal(err)
	}
	groups, err := c.bucket(ctx, ElasticBucket)
	if err != nil {
		t.Fatal(err)
	}
	group, err := groups.Get(ctx, Key("ORDERS", "g"))
	if err != nil {
		t.Fatal(err)
	}
	prefix, tok := dynamicPrefix("ORDERS", "g"), dynamicToken("a")
	mark, _ := json.Marshal(dynamicMarker{Member: "a", Since: time.Now(), SessionTimeout: "10s"})
	rec, _ := json.Marshal(dynamicRecord{Member: "a", Instance: "i1", SessionTimeout: "10s"})
	if _, err := dyn.Put(ctx, prefix+"."+tok+".i1", rec); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Put(ctx, prefix+"."+tok, mark); err != nil {
		t.Fatal(err)
	}
	// A stopped instance's record: deleted, its marker still in the index.
	if _, err := dyn.Put(ctx, prefix+"."+tok+".i0", rec); err != nil {
		t.Fatal(err)
	}
	if err := dyn.Delete(ctx, prefix+"."+tok+".i0"); err != nil {
		t.Fatal(err)
	}

	// Rewrite the liveness record and the group's configuration, each
	// as fast as the server takes it, until the listings are done.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	rewrite := func(kv jetstream.KeyValue, key string, val []byte) {
		defer wg.Done()
		for ctx.Err() == nil {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := kv.Put(ctx, key, val); err != nil && ctx.Err() == nil {
				t.Errorf("rewrite %s: %v", key, err)
				return
			}
		}
	}
	wg.Add(2)
	go rewrite(dyn, prefix+"."+tok+".i1", rec)
	go rewrite(groups, Key("ORDERS", "g"), group.Value())

	const listings = 100
	for i := range listings {
		seen := c.readDynamic(ctx, "ORDERS", "g")
		ds := seen[tok]
		if ds == nil || !ds.dynamic || ds.instances != 1 || ds.lastSeen.IsZero() {
			t.Errorf("listing %d of %d: the dynamic member a read as %+v, want dynamic, 1 instance, last seen", i+1, listings, ds)
			break
		}
		refs, err := c.ListGroups(ctx, KindElastic)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs[0].Group != "g" {
			t.Errorf("listing %d of %d: groups %+v, want g alone (gone was deleted)", i+1, listings, refs)
			break
		}
	}
	close(stop)
	wg.Wait()
}
