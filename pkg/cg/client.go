// Package cg is the engine behind the cg command: partitioned consumer
// groups on NATS JetStream. Every message that shares a partition key is
// handled by one member at a time, in order, while different keys run in
// parallel, with hot-standby instances and no coordinator outside NATS.
//
// The package never prints, logs or exits: administration calls return
// typed values and errors (sentinels such as ErrGroupNotFound), and the
// member runtime reports what happens to it through an events callback.
package cg

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Client administers groups and joins members. It is safe for concurrent use.
type Client struct {
	js jetstream.JetStream

	// posKV is the bucket of saved positions once opened (positions.go):
	// pinned instances save theirs every second and on stop, and opening
	// the bucket each time was a round trip more each time.
	posMu sync.Mutex
	posKV jetstream.KeyValue
}

// New returns a Client that works through js.
func New(js jetstream.JetStream) *Client {
	return &Client{js: js}
}

// NewFromConn returns a Client on nc; domain selects a JetStream domain
// ("" for the default).
func NewFromConn(nc *nats.Conn, domain string) (*Client, error) {
	var (
		js  jetstream.JetStream
		err error
	)
	if domain != "" {
		js, err = jetstream.NewWithDomain(nc, domain)
	} else {
		js, err = jetstream.New(nc)
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	return New(js), nil
}

// JetStream returns the JetStream handle the client uses.
func (c *Client) JetStream() jetstream.JetStream { return c.js }

// Conn returns the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.js.Conn() }

// Version is a server version as major, minor, patch.
type Version struct{ Major, Minor, Patch int }

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// AtLeast reports whether v is at least major.minor.
func (v Version) AtLeast(major, minor int) bool {
	return v.Major > major || (v.Major == major && v.Minor >= minor)
}

// ParseVersion reads "2.11.4", "v2.12.0-beta.1" and the like.
func ParseVersion(s string) (Version, error) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	if i := strings.IndexAny(s, "-+ "); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) < 2 {
		return Version{}, fmt.Errorf("server version %q is not major.minor.patch", s)
	}
	var v Version
	nums := []*int{&v.Major, &v.Minor, &v.Patch}
	for i := 0; i < len(parts) && i < 3; i++ {
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return Version{}, fmt.Errorf("server version %q is not major.minor.patch", s)
		}
		*nums[i] = n
	}
	return v, nil
}

// ServerVersion is the version of the server the client is connected to.
func (c *Client) ServerVersion() (Version, error) {
	return ParseVersion(c.Conn().ConnectedServerVersion())
}

// Feature requirements of the server, checked before anything is created.
var (
	// MinPinning is the first server version with pinned_client priority groups.
	MinPinning = Version{2, 11, 0}
	// MinWholeSubjectPartition is the first server version whose
	// {{partition(N)}} without token indexes hashes the whole subject.
	MinWholeSubjectPartition = Version{2, 12, 0}
)

// CheckServerVersion returns ErrServerTooOld, worded with what needs what,
// when v lacks pinning or (when wholeSubject) the partition(N) shorthand.
func CheckServerVersion(v Version, wholeSubject bool) error {
	if !v.AtLeast(MinPinning.Major, MinPinning.Minor) {
		return fmt.Errorf("%w: server is %s, pinned consumers need nats-server 2.11 or later; upgrade the server", ErrServerTooOld, v)
	}
	if wholeSubject && !v.AtLeast(MinWholeSubjectPartition.Major, MinWholeSubjectPartition.Minor) {
		return fmt.Errorf("%w: server is %s, {{partition(N)}} without token indexes needs nats-server 2.12 or later; upgrade the server or list the wildcard indexes", ErrServerTooOld, v)
	}
	return nil
}
