package worker

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"unicode/utf8"
)

// Line is one message as a JSON line: what a long-lived worker reads on
// its stdin (with an ID) and what a batch command reads, one per message.
type Line struct {
	ID        uint64              `json:"id,omitempty"`
	Stream    string              `json:"stream"`
	Group     string              `json:"group"`
	Member    string              `json:"member"`
	Subject   string              `json:"subject"`
	Partition int                 `json:"partition"`
	Seq       uint64              `json:"seq"`
	Delivered uint64              `json:"delivered"`
	Key       *string             `json:"key,omitempty"`
	Headers   map[string][]string `json:"headers,omitempty"`
	// Data is the body: as it is when it is valid UTF-8, otherwise
	// base64 (standard, padded) and Base64 is true.
	Data   string `json:"data"`
	Base64 bool   `json:"base64,omitempty"`
}

// NewLine is the line of a message with metadata m and body data.
func NewLine(id uint64, m Meta, data []byte) Line {
	l := Line{ID: id, Stream: m.Stream, Group: m.Group, Member: m.Member, Subject: m.Subject, Partition: m.Partition,
		Seq: m.Seq, Delivered: m.Delivered, Headers: m.Headers}
	if m.HasKey {
		k := m.Key
		l.Key = &k
	}
	if utf8.Valid(data) {
		l.Data = string(data)
	} else {
		l.Data, l.Base64 = base64.StdEncoding.EncodeToString(data), true
	}
	return l
}

// Body is the message body the line carries.
func (l Line) Body() ([]byte, error) {
	if l.Base64 {
		return base64.StdEncoding.DecodeString(l.Data)
	}
	return []byte(l.Data), nil
}

// Result is a long-lived worker's answer for one message, one JSON line on
// its stdout: {"id":7,"ok":true}, {"id":7,"error":"why"} (a failure: the
// retry policy decides), or {"id":7,"error":"why","poison":true} (it will
// never succeed: the poison action at once).
type Result struct {
	ID     uint64 `json:"id"`
	OK     bool   `json:"ok,omitempty"`
	Error  string `json:"error,omitempty"`
	Poison bool   `json:"poison,omitempty"`
}

// PoisonError is a failure that retrying cannot cure (a worker's poison
// result, an HTTP 4xx): the retry policy's poison action applies at once.
type PoisonError struct{ Err error }

func (e *PoisonError) Error() string { return e.Err.Error() }
func (e *PoisonError) Unwrap() error { return e.Err }

// IsPoison says whether err is a PoisonError.
func IsPoison(err error) bool {
	var p *PoisonError
	return errors.As(err, &p)
}

func encodeLine(l Line) ([]byte, error) {
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
