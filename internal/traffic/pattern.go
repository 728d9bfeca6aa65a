// Package traffic generates keyed test traffic and checks what consumers
// make of it. A Publisher stamps every message with its partition key and a
// per-key sequence (headers Cg-Key and Cg-Key-Seq); a Verifier, fed with
// what the handlers saw, counts duplicates, per-key order violations, gaps
// and losses. Both serve `cg publish`, `cg demo` and consumers' verification.
package traffic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Headers stamped on every published message.
const (
	// KeyHeader carries the message's partition key.
	KeyHeader = "Cg-Key"
	// KeySeqHeader carries the message's sequence within its key, from 1.
	KeySeqHeader = "Cg-Key-Seq"
)

// KeyPlaceholder marks where the key goes in a subject pattern.
const KeyPlaceholder = "{key}"

// Pattern is a subject with one place for the key.
type Pattern struct {
	before, after string
}

// ParsePattern reads a subject pattern: either with the placeholder {key}
// once (orders.{key}, orders.{key}.created, shop.cust-{key}) or with one
// '*' token standing for the key (orders.*).
func ParsePattern(s string) (Pattern, error) {
	const example = "write it like orders.{key} or orders.*"
	if s == "" {
		return Pattern{}, fmt.Errorf("subject pattern is empty; %s", example)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return Pattern{}, fmt.Errorf("subject pattern %q contains white space; %s", s, example)
	}
	toks := strings.Split(s, ".")
	for _, t := range toks {
		switch {
		case t == "":
			return Pattern{}, fmt.Errorf("subject pattern %q has an empty token; %s", s, example)
		case strings.Contains(t, ">"):
			return Pattern{}, fmt.Errorf("subject pattern %q contains '>'; a published subject names one key, %s", s, example)
		case strings.Contains(t, "*") && t != "*":
			return Pattern{}, fmt.Errorf("subject pattern %q: '*' must stand alone as a token; %s", s, example)
		}
	}
	if n := strings.Count(s, KeyPlaceholder); n > 0 {
		if n > 1 {
			return Pattern{}, fmt.Errorf("subject pattern %q has %s %d times; use it once", s, KeyPlaceholder, n)
		}
		if strings.Contains(s, "*") {
			return Pattern{}, fmt.Errorf("subject pattern %q has both %s and '*'; use one of them for the key", s, KeyPlaceholder)
		}
		i := strings.Index(s, KeyPlaceholder)
		return Pattern{before: s[:i], after: s[i+len(KeyPlaceholder):]}, nil
	}
	stars := 0
	at := -1
	for i, t := range toks {
		if t == "*" {
			stars++
			at = i
		}
	}
	switch stars {
	case 0:
		return Pattern{}, fmt.Errorf("subject pattern %q has no place for the key; %s", s, example)
	case 1:
		before := strings.Join(toks[:at], ".")
		if before != "" {
			before += "."
		}
		after := strings.Join(toks[at+1:], ".")
		if after != "" {
			after = "." + after
		}
		return Pattern{before: before, after: after}, nil
	default:
		return Pattern{}, fmt.Errorf("subject pattern %q has %d '*' tokens; mark the key's place with %s, e.g. orders.{key}.created", s, stars, KeyPlaceholder)
	}
}

// Subject is the pattern with key in its place.
func (p Pattern) Subject(key string) string { return p.before + key + p.after }

// String is the pattern written with the placeholder.
func (p Pattern) String() string { return p.Subject(KeyPlaceholder) }

// ValidateKey checks that key can stand in a subject.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return errors.New("key must not be empty")
	case strings.ContainsAny(key, ".*> \t\r\n"):
		return fmt.Errorf("key %q must not contain '.', '*', '>' or white space", key)
	}
	return nil
}

// Keys returns n key names prefix0001, prefix0002, …; the numbers are
// zero-padded to at least four digits so that keys sort in order.
func Keys(prefix string, n int) []string {
	width := max(4, len(strconv.Itoa(n)))
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%0*d", prefix, width, i+1)
	}
	return out
}

// KeyOf reads the key and per-key sequence stamped on a message. ok is
// false when either header is missing or the sequence is not a positive
// number.
func KeyOf(h nats.Header) (key string, seq uint64, ok bool) {
	if h == nil {
		return "", 0, false
	}
	key = h.Get(KeyHeader)
	seq, err := strconv.ParseUint(h.Get(KeySeqHeader), 10, 64)
	if key == "" || err != nil || seq == 0 {
		return "", 0, false
	}
	return key, seq, true
}
