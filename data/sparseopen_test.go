package data

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSparseFormat: the format is the one given, else the extension's,
// else tfrecord; an unknown one is refused naming those read.
func TestSparseFormat(t *testing.T) {
	cases := []struct{ format, path, want, err string }{
		{"", "train.libsvm", FormatLibSVM, ""},
		{"", "a/b/TRAIN.SVM", FormatLibSVM, ""},
		{"", "x.svmlight", FormatLibSVM, ""},
		{"", "x.txt", FormatLibSVM, ""},
		{"", "part-00000", FormatTFRecord, ""},
		{"", "x.tfrecord", FormatTFRecord, ""},
		{FormatTFRecord, "x.txt", FormatTFRecord, ""},
		{FormatLibSVM, "part-00000", FormatLibSVM, ""},
		{"csv", "x.csv", "", `input format "csv": want libsvm or tfrecord (or empty: by file extension)`},
	}
	for _, c := range cases {
		got, err := SparseFormat(c.format, c.path)
		if got != c.want || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("SparseFormat(%q, %q) = %q, %v; want %q, %q", c.format, c.path, got, err, c.want, c.err)
		}
	}
	if _, err := OpenSparse("csv", SparseOptions{Dim: 4}); err == nil {
		t.Error("OpenSparse(csv) succeeded")
	}
}

// TestOpenSparse: one opener reads a libsvm and a TFRecord file of the
// same examples to the same examples, each by its extension.
func TestOpenSparse(t *testing.T) {
	exs := []Example{{Indices: []int32{0, 3}, Values: []float32{1, 0.5}, Label: 1}, {Indices: []int32{2}, Values: []float32{2}, Label: 0}}
	dir := t.TempDir()
	svm := filepath.Join(dir, "a.svm")
	if err := os.WriteFile(svm, []byte("1 1:1 4:0.5\n0 3:2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(dir, "b.records")
	if err := os.WriteFile(tf, writeTFExamples(t, exs), 0o644); err != nil {
		t.Fatal(err)
	}
	open, err := OpenSparse("", SparseOptions{Dim: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{svm, tf} {
		src, err := open(testCtx(t), p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for i := 0; ; i++ {
			ex, err := src.Next(testCtx(t))
			if err == io.EOF {
				if i != len(exs) {
					t.Errorf("%s: %d examples, want %d", p, i, len(exs))
				}
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if i >= len(exs) || !slices.Equal(ex.Indices, exs[i].Indices) || !slices.Equal(ex.Values, exs[i].Values) || ex.Label != exs[i].Label {
				t.Fatalf("%s: example %d = %+v, want %+v", p, i, ex, exs[i])
			}
		}
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
	}
}
