package bench

import (
	"fmt"
	"io"
	"strings"
)

// table writes a table a row at a time, each as soon as it is measured,
// in right-aligned columns of fixed width (a tabwriter would hold every
// row back until the last, and a long benchmark would show nothing).
type table struct {
	w    io.Writer
	cols []column
}

// column is a table column: its header, the printf verb of its values and
// the width they need; the column is as wide as the wider of header and
// width.
type column struct {
	name, verb string
	width      int
}

// newTable writes the header line.
func newTable(w io.Writer, cols ...column) (*table, error) {
	t := &table{w: w, cols: cols}
	names := make([]any, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return t, t.line(func(c column) string { return "%s" }, names)
}

// row writes one row, a value per column.
func (t *table) row(vals ...any) error {
	if len(vals) != len(t.cols) {
		panic(fmt.Sprintf("bench: a row of %d values in a table of %d columns", len(vals), len(t.cols)))
	}
	return t.line(func(c column) string { return c.verb }, vals)
}

func (t *table) line(verb func(column) string, vals []any) error {
	var b strings.Builder
	for i, c := range t.cols {
		fmt.Fprintf(&b, "%*s", max(c.width, len(c.name))+2, fmt.Sprintf(verb(c), vals[i]))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(t.w, b.String())
	return err
}
