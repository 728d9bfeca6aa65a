package cg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// KV buckets holding group configurations, as the reference names them.
const (
	StaticBucket  = "static-consumer-groups"
	ElasticBucket = "elastic-consumer-groups"
)

// PriorityGroup is the priority group every member consumer pins in.
const PriorityGroup = "PCG"

// Key is the KV key of a group's configuration.
func Key(stream, group string) string { return stream + "." + group }

// StaticConsumerName is the durable consumer a static member consumes from.
func StaticConsumerName(group, member string) string { return group + "-" + member }

func isNotFound(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrKeyNotFound) ||
		errors.Is(err, jetstream.ErrStreamNotFound)
}

// bucket returns the KV bucket, or ErrGroupNotFound when it does not exist.
func (c *Client) bucket(ctx context.Context, name string) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, name)
	if err != nil {
		if isNotFound(err) {
			return nil, ErrGroupNotFound
		}
		return nil, fmt.Errorf("open KV bucket %s: %w", name, err)
	}
	return kv, nil
}

// createConsumer is CreateConsumer, asked again for up to 2 s (within
// ctx) while the server answers "error creating store for consumer": made
// just after a consumer of the same name was deleted, the new one's store
// can collide with the removal of the old one's (a member recreating its
// deleted consumer failed so in 1 of 40 runs with CPU hogs beside it). The
// server words every other failure differently, and those are returned at
// once.
func (c *Client) createConsumer(ctx context.Context, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	wait := 25 * time.Millisecond
	deadline := time.Now().Add(2 * time.Second)
	for {
		cons, err := c.js.CreateConsumer(ctx, stream, cfg)
		if err == nil || !storeCollision(err) || time.Now().Add(wait).After(deadline) {
			return cons, err
		}
		select {
		case <-ctx.Done():
			return cons, err
		case <-time.After(wait):
		}
		wait = min(2*wait, 400*time.Millisecond)
	}
}

// storeCollision reports whether err is the server's failure to make a
// consumer's store, which a moment later may succeed.
func storeCollision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeConsumerCreate &&
		strings.Contains(apiErr.Description, "error creating store for consumer")
}

// kvKeys lists the keys of bucket kv under filter, in one request, from
// the subject index of the bucket's stream. A deleted or purged key is
// listed too while its marker stands: read each with Get, which says
// ErrKeyNotFound for it. jetstream's ListKeys walks the keys with an
// ordered consumer and misses a key rewritten while it walks (99 of 2 000
// listings against a key rewritten every millisecond, nats.go 1.55 with
// nats-server 2.15.2), and a liveness record, a poison counter or a
// group's configuration is rewritten all the time.
func (c *Client) kvKeys(ctx context.Context, kv jetstream.KeyValue, filter string) ([]string, error) {
	bucket := kv.Bucket()
	s, err := c.js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + bucket + "."
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(prefix+filter))
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, prefix))
	}
	slices.Sort(keys)
	return keys, nil
}

// liveKeys lists every key of kv that holds a value. The key walk of
// ListKeys skips deleted keys but may miss one rewritten meanwhile (see
// kvKeys), and the subject index lists deleted keys too: a key the index
// holds that the walk did not list is read to tell which it was.
func (c *Client) liveKeys(ctx context.Context, kv jetstream.KeyValue) ([]string, error) {
	indexed, err := c.kvKeys(ctx, kv, ">")
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	listed := map[string]bool{}
	for k := range lister.Keys() {
		listed[k] = true
	}
	if err := ctx.Err(); err != nil {
		return nil, err // stopped short
	}
	for _, k := range indexed {
		if listed[k] {
			continue
		}
		if _, err := kv.Get(ctx, k); err == nil {
			listed[k] = true
		} else if !isNotFound(err) {
			return nil, err
		}
	}
	keys := slices.Collect(maps.Keys(listed))
	slices.Sort(keys)
	return keys, nil
}

// bucketFor opens a bucket, creating it with the stream's replicas when missing.
func (c *Client) bucketFor(ctx context.Context, name string, replicas int) (jetstream.KeyValue, error) {
	kv, err := c.js.KeyValue(ctx, name)
	if err == nil {
		return kv, nil
	}
	if !isNotFound(err) {
		return nil, fmt.Errorf("open KV bucket %s: %w", name, err)
	}
	kv, err = c.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: name, Replicas: max(replicas, 1), Storage: jetstream.FileStorage})
	if err != nil {
		// Another administrator may have created it first.
		if kv2, err2 := c.js.KeyValue(ctx, name); err2 == nil {
			return kv2, nil
		}
		return nil, fmt.Errorf("create KV bucket %s: %w", name, err)
	}
	return kv, nil
}

// decodeStatic parses and checks a stored static value; errors name the key.
func decodeStatic(key string, raw []byte) (StaticConfig, error) {
	var cfg StaticConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("%w: key %s in bucket %s is not valid JSON: %v", ErrInvalidConfig, key, StaticBucket, err)
	}
	if err := cfg.ValidateStored(); err != nil {
		return cfg, fmt.Errorf("%w: key %s in bucket %s: %v", ErrInvalidConfig, key, StaticBucket, err)
	}
	return cfg, nil
}

// getStatic reads a static group's configuration and its KV revision,
// from the bucket of whichever layout holds it.
func (c *Client) getStatic(ctx context.Context, stream, group string) (StaticConfig, uint64, error) {
	sg, err := c.findGroup(ctx, KindStatic, stream, group)
	if err != nil {
		return StaticConfig{}, 0, err
	}
	cfg, err := decodeStatic(sg.entry.Key(), sg.entry.Value())
	return cfg, sg.entry.Revision(), err
}

// GroupRef names a stored group.
type GroupRef struct {
	Kind   string `json:"kind"` // static or elastic
	Stream string `json:"stream"`
	Group  string `json:"group"`
	// Layout is "partition" for a partition-layout group, empty for the
	// member layout.
	Layout Layout `json:"layout,omitempty"`
}

// ListGroups returns every stored group of the given kinds (none: both)
// on every stream, from one key listing per kind and layout, sorted by
// stream, group and kind. A kind with no bucket yet has no groups.
func (c *Client) ListGroups(ctx context.Context, kinds ...Kind) ([]GroupRef, error) {
	if len(kinds) == 0 {
		kinds = Kinds()
	}
	var out []GroupRef
	type source struct {
		kind   Kind
		bucket string
		layout Layout
	}
	var sources []source
	for _, kind := range kinds {
		if err := kind.Valid(); err != nil {
			return nil, err
		}
		for _, l := range Layouts() {
			sources = append(sources, source{kind, kind.LayoutBucket(l), l.stored()})
		}
	}
	for _, src := range sources {
		kind, bucket := src.kind, src.bucket
		kv, err := c.bucket(ctx, bucket)
		if errors.Is(err, ErrGroupNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		keys, err := c.liveKeys(ctx, kv)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", bucket, err)
		}
		for _, k := range keys {
			if s, g, ok := strings.Cut(k, "."); ok && g != "" {
				out = append(out, GroupRef{Kind: kind.String(), Stream: s, Group: g, Layout: src.layout})
			}
		}
	}
	slices.SortFunc(out, func(a, b GroupRef) int {
		return cmp.Or(strings.Compare(a.Stream, b.Stream), strings.Compare(a.Group, b.Group), strings.Compare(a.Kind, b.Kind))
	})
	return out, nil
}

// listGroups returns the names of the groups of kind k stored for stream, sorted.
func (c *Client) listGroups(ctx context.Context, k Kind, stream string) ([]string, error) {
	refs, err := c.ListGroups(ctx, k)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range refs {
		if r.Stream == stream {
			out = append(out, r.Group)
		}
	}
	return out, nil
}
