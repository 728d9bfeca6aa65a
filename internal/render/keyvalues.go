package render

import (
	"fmt"
	"io"
	"strings"
)

// KeyValues prints a block of "Key: value" lines with the values aligned.
type KeyValues struct {
	w     io.Writer
	pairs [][2]string
}

// NewKeyValues returns an empty block that writes to w.
func NewKeyValues(w io.Writer) *KeyValues { return &KeyValues{w: w} }

// Add appends a line.
func (kv *KeyValues) Add(key, value string) {
	kv.pairs = append(kv.pairs, [2]string{key, value})
}

// Addf appends a line whose value is formatted.
func (kv *KeyValues) Addf(key, format string, args ...any) {
	kv.Add(key, fmt.Sprintf(format, args...))
}

// Render writes the block.
func (kv *KeyValues) Render() error {
	width := 0
	for _, p := range kv.pairs {
		width = max(width, VisibleWidth(p[0]))
	}
	var b strings.Builder
	for _, p := range kv.pairs {
		b.WriteString(p[0])
		b.WriteByte(':')
		if p[1] != "" {
			b.WriteString(strings.Repeat(" ", width-VisibleWidth(p[0])+1))
			b.WriteString(p[1])
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(kv.w, b.String())
	return err
}
