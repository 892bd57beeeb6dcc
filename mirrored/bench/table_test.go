package bench

import (
	"bytes"
	"testing"
)

func TestTable(t *testing.T) {
	var b bytes.Buffer
	tb, err := newTable(&b, column{"size(B)", "%d", 10}, column{"algo", "%s", 4}, column{"time(us)", "%.1f", 6})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "     size(B)  algo  time(us)\n"; got != want {
		t.Fatalf("header %q, want %q", got, want)
	}
	b.Reset()
	if err := tb.row(int64(4096), "ring", 12.345); err != nil {
		t.Fatal(err)
	}
	if got, want := b.String(), "        4096  ring      12.3\n"; got != want {
		t.Fatalf("row %q, want %q", got, want)
	}
}
