package bench

import (
	"bytes"
	"testing"
)

// TestTable: fixed-width right-aligned columns, a header at once, a row
// whole or in parts, and groups' names centred over their columns.
func TestTable(t *testing.T) {
	cols := []column{{"size(B)", "%d", 10}, {"algo", "%s", 4}, {"time(us)", "%.1f", 6}, {"A→B", "%.3f", 5}}
	for _, tc := range []struct {
		name   string
		groups []group
		header string
	}{
		{"plain", nil, "     size(B)  algo  time(us)    A→B\n"},
		{"groups", []group{{2, 4, "timed"}}, "#                       timed\n     size(B)  algo  time(us)    A→B\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			tb, err := newTable(&b, cols, tc.groups...)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != tc.header {
				t.Fatalf("header %q, want %q", got, tc.header)
			}
			b.Reset()
			if err := tb.row(int64(4096), "ring", 12.345, 1.0); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), "        4096  ring      12.3  1.000\n"; got != want {
				t.Fatalf("row %q, want %q", got, want)
			}
			b.Reset()
			if err := tb.cells(int64(64), "tree"); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), "          64  tree"; got != want {
				t.Fatalf("a row's first cells %q, want %q", got, want)
			}
			if err := tb.cells(3.0, 2.5); err != nil {
				t.Fatal(err)
			}
			if got, want := b.String(), "          64  tree       3.0  2.500\n"; got != want {
				t.Fatalf("a row in two parts %q, want %q", got, want)
			}
		})
	}
}
