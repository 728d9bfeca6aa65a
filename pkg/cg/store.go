package cg

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

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
		lister, err := kv.ListKeys(ctx)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", bucket, err)
		}
		for k := range lister.Keys() {
			if s, g, ok := strings.Cut(k, "."); ok && g != "" {
				out = append(out, GroupRef{Kind: kind.String(), Stream: s, Group: g, Layout: src.layout})
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("list %s: %w", bucket, err) // stopped short
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
