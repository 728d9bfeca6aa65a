package render

import (
	"encoding/json"
	"io"
	"sync"
)

// JSON writes v as one indented JSON document followed by a newline.
func JSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// JSONStream writes newline-delimited JSON: one compact document per line,
// for output that is read while it is produced (consume). It is safe for
// concurrent use, so lines from different goroutines never interleave.
type JSONStream struct {
	mu  sync.Mutex
	enc *json.Encoder
}

// NewJSONStream returns a stream that writes to w.
func NewJSONStream(w io.Writer) *JSONStream {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return &JSONStream{enc: enc}
}

// Encode writes v as one line.
func (s *JSONStream) Encode(v any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enc.Encode(v)
}
