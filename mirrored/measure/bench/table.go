package bench

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// table writes a table a row at a time, each as soon as it is measured,
// in right-aligned columns of fixed width (a tabwriter would hold every
// row back until the last, and a long benchmark would show nothing). A
// row may be written in parts (cells), each part as soon as its figures
// are known.
type table struct {
	w    io.Writer
	cols []column
	next int // the column the next cell goes into
}

// column is a table column: its header, the printf verb of its values and
// the width they need; the column is as wide as the wider of header and
// width, plus two spaces before it.
type column struct {
	name, verb string
	width      int
}

func (c column) span() int { return max(c.width, utf8.RuneCountInString(c.name)) + 2 }

// group names columns from up to (not including) to, as nccl-tests'
// "out-of-place" and "in-place".
type group struct {
	from, to int
	name     string
}

// newTable writes the header line, after a line with the groups' names if
// there are groups.
func newTable(w io.Writer, cols []column, groups ...group) (*table, error) {
	t := &table{w: w, cols: cols}
	if len(groups) > 0 {
		if _, err := io.WriteString(w, t.groupLine(groups)); err != nil {
			return nil, err
		}
	}
	names := make([]any, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	return t, t.write(func(column) string { return "%s" }, names)
}

// groupLine is "#" and each group's name centred over its columns.
func (t *table) groupLine(groups []group) string {
	offset := func(col int) int {
		n := 0
		for _, c := range t.cols[:col] {
			n += c.span()
		}
		return n
	}
	var b strings.Builder
	b.WriteString("#")
	for _, g := range groups {
		start, width := offset(g.from), offset(g.to)-offset(g.from)
		left := start + (width-utf8.RuneCountInString(g.name))/2
		b.WriteString(strings.Repeat(" ", max(1, left-utf8.RuneCountInString(b.String()))))
		b.WriteString(g.name)
	}
	b.WriteByte('\n')
	return b.String()
}

// row writes one whole row, a value per column.
func (t *table) row(vals ...any) error {
	if t.next != 0 || len(vals) != len(t.cols) {
		panic(fmt.Sprintf("bench: a row of %d values in a table of %d columns, at column %d", len(vals), len(t.cols), t.next))
	}
	return t.cells(vals...)
}

// cells writes the next cells of the current row, and ends the line with
// the last column's.
func (t *table) cells(vals ...any) error {
	if t.next+len(vals) > len(t.cols) {
		panic(fmt.Sprintf("bench: %d values at column %d of a table of %d columns", len(vals), t.next, len(t.cols)))
	}
	return t.write(func(c column) string { return c.verb }, vals)
}

// write writes vals into the columns from t.next on, with verb's format.
func (t *table) write(verb func(column) string, vals []any) error {
	var b strings.Builder
	for i, v := range vals {
		c := t.cols[t.next+i]
		fmt.Fprintf(&b, "%*s", c.span(), fmt.Sprintf(verb(c), v))
	}
	if t.next += len(vals); t.next == len(t.cols) {
		t.next = 0
		b.WriteByte('\n')
	}
	_, err := io.WriteString(t.w, b.String())
	return err
}
