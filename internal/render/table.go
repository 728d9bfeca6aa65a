package render

import (
	"io"
	"regexp"
	"strings"
	"unicode/utf8"
)

const columnGap = "  "

// Table prints rows in aligned columns. Cells may carry ANSI colors: the
// alignment counts only visible characters.
type Table struct {
	w    io.Writer
	rows [][]string
}

// NewTable returns a table that writes to w; headers, when given, form
// the first row.
func NewTable(w io.Writer, headers ...string) *Table {
	t := &Table{w: w}
	if len(headers) > 0 {
		t.AddRow(headers...)
	}
	return t
}

// AddRow appends a row; rows may have different lengths.
func (t *Table) AddRow(cells ...string) {
	t.rows = append(t.rows, cells)
}

// Render writes the table. The last cell of a row is never padded, so
// lines carry no trailing spaces.
func (t *Table) Render() error {
	var widths []int
	for _, row := range t.rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], VisibleWidth(cell))
		}
	}
	var b strings.Builder
	for _, row := range t.rows {
		for i, cell := range row {
			if i > 0 {
				b.WriteString(columnGap)
			}
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-VisibleWidth(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}

var ansiSGR = regexp.MustCompile("\x1b\\[[0-9;]*m")

// VisibleWidth is the number of characters s shows on a terminal, not
// counting ANSI color sequences.
func VisibleWidth(s string) int {
	return utf8.RuneCountInString(ansiSGR.ReplaceAllString(s, ""))
}
