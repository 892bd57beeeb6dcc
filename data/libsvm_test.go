package data

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestLibSVMGolden(t *testing.T) {
	f, err := os.Open("testdata/sparse.libsvm")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	src, err := NewLibSVMReader(f, "testdata/sparse.libsvm", SparseOptions{Dim: 10})
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []Example{
		{Label: 1, Indices: []int32{0, 2, 9}, Values: []float32{0.5, 1, -2}},
		{Label: -1, Indices: []int32{1, 3}, Values: []float32{1e-3, 1}},
		{Label: 0, Indices: []int32{0, 4}, Values: []float32{2, 1}},
		{Label: 1},
		{Label: 1, Indices: []int32{1, 9}, Values: []float32{3.25, 1}},
		{Label: -1, Indices: []int32{0, 1}, Values: []float32{1, 1}},
	}
	if len(got) != len(want) {
		t.Fatalf("read %d examples, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !sameExample(got[i], want[i]) {
			t.Errorf("example %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestLibSVMRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	exs := make([]Example, 50)
	for i := range exs {
		exs[i] = randomSparseExample(r, 300)
		if i%3 == 0 {
			for k := range exs[i].Values {
				exs[i].Values[k] = 1 // the one-hot short form
			}
		}
	}
	for _, zeroBased := range []bool{false, true} {
		var buf bytes.Buffer
		w := NewLibSVMWriter(&buf, zeroBased)
		for _, ex := range exs {
			if err := w.Write(ex); err != nil {
				t.Fatal(err)
			}
		}
		src, err := NewLibSVMReader(bytes.NewReader(buf.Bytes()), "rt", SparseOptions{Dim: 300, ZeroBased: zeroBased})
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(t, src)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(exs) {
			t.Fatalf("zeroBased=%v: read %d, wrote %d", zeroBased, len(got), len(exs))
		}
		for i := range exs {
			if !sameExample(got[i], exs[i]) {
				t.Fatalf("zeroBased=%v: example %d read as %+v, wrote %+v", zeroBased, i, got[i], exs[i])
			}
		}
	}
}

func TestLibSVMWriterFormat(t *testing.T) {
	ex := Example{Label: 0, Indices: []int32{0, 7}, Values: []float32{1, 0.5}}
	for zeroBased, want := range map[bool]string{false: "-1 1:1 8:0.5\n", true: "-1 0:1 7:0.5\n"} {
		var buf bytes.Buffer
		if err := NewLibSVMWriter(&buf, zeroBased).Write(ex); err != nil || buf.String() != want {
			t.Errorf("zeroBased=%v: wrote %q (%v), want %q", zeroBased, buf.String(), err, want)
		}
	}
}

func TestLibSVMRejects(t *testing.T) {
	for _, tc := range []struct {
		name, line string
		zeroBased  bool
		want       string
	}{
		{"label 2", "2 1:1", false, "line 2: label \"2\""},
		{"label word", "yes 1:1", false, "label \"yes\""},
		{"no colon", "1 5", false, "token \"5\": want index:value"},
		{"index 0 in 1-based", "1 0:1", false, "index 0 is outside [1, 10] (1-based)"},
		{"index past D", "1 11:1", false, "index 11 is outside [1, 10]"},
		{"index past D 0-based", "1 10:1", true, "index 10 is outside [0, 9] (0-based)"},
		{"bad index", "1 x:1", false, "index is not a non-negative integer"},
		{"signed index", "1 -3:1", false, "index is not a non-negative integer"},
		{"bad value", "1 1:abc", false, "value is not a number"},
		{"huge value", "1 1:1e300", false, "outside float32's range"},
		{"nan", "1 1:nan", false, "not finite"},
		{"duplicate", "1 3:1 3:2", false, "feature index 3 appears twice"},
		{"duplicate unsorted", "1 7:1 3:1 7:2", false, "feature index 7 appears twice"},
		{"duplicate 0-based", "1 3:1 3:2", true, "feature index 3 appears twice"},
		{"nan at 5", "1 2:1 5:nan", false, "value NaN of feature index 5 is not finite"},
		{"too long", "1 1:1 2:1 3:1 4:1 5:1 6:1 7:1 8:1 9:1", false, "line longer than 24 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := "1 1:1\n" + tc.line + "\n1 2:1\n"
			src, err := NewLibSVMReader(strings.NewReader(in), "bad.txt", SparseOptions{Dim: 10, ZeroBased: tc.zeroBased})
			if err != nil {
				t.Fatal(err)
			}
			src.maxLine = 24
			got, err := readAll(t, src)
			var rerr *RecordError
			if !errors.As(err, &rerr) || rerr.Record != 2 || !strings.Contains(err.Error(), "bad.txt: line 2") || !strings.Contains(err.Error(), tc.want) || len(got) != 1 {
				t.Fatalf("got %d examples, %v; want 1 and an error naming bad.txt line 2 containing %q", len(got), err, tc.want)
			}
			src, _ = NewLibSVMReader(strings.NewReader(in), "bad.txt", SparseOptions{Dim: 10, ZeroBased: tc.zeroBased, SkipCorrupt: true})
			src.maxLine = 24
			got, err = readAll(t, src)
			if err != nil || len(got) != 2 || src.Skipped() != 1 {
				t.Fatalf("skip-corrupt: %d examples, %d skipped, %v; want 2, 1, nil", len(got), src.Skipped(), err)
			}
		})
	}
	if _, err := NewLibSVMReader(strings.NewReader(""), "x", SparseOptions{}); err == nil || !strings.Contains(err.Error(), "--features") {
		t.Fatalf("Dim 0 accepted or unhelpful: %v", err)
	}
}

func FuzzLibSVMLine(f *testing.F) {
	for _, s := range []string{"+1 1:0.5 3:1 10:-2", "-1 qid:3 2:1e-3 # c", "0 5:1\t1:2", "1", "", "# x", "1 3:1 3:2", "1 1:nan"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, line string, zeroBased bool) {
		if strings.ContainsAny(line, "\n") {
			return
		}
		opts := SparseOptions{Dim: 1000, ZeroBased: zeroBased}
		var ex Example
		ok, err := parseLibSVMLine([]byte(line), &ex, opts)
		if err != nil || !ok {
			return
		}
		if err := finishSparse(&ex, opts.Dim, 0); err != nil {
			t.Fatalf("parsed an invalid example from %q: %v", line, err)
		}
		var buf bytes.Buffer
		if err := NewLibSVMWriter(&buf, zeroBased).Write(ex); err != nil {
			t.Fatal(err)
		}
		var again Example
		if ok, err := parseLibSVMLine(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), &again, opts); err != nil || !ok {
			t.Fatalf("re-reading %q: %v", buf.String(), err)
		}
		// The writer normalises 0 to -1.
		if ex.Label == 0 {
			ex.Label = -1
		}
		if !sameExample(ex, again) {
			t.Fatalf("%q -> %+v -> %q -> %+v", line, ex, buf.String(), again)
		}
	})
}

// TestLibSVMLongLines reads lines longer than the reader's buffer, a line
// over the limit (skipped with SkipCorrupt, the next line read), CRLF
// endings and a last line without one.
func TestLibSVMLongLines(t *testing.T) {
	var long strings.Builder
	long.WriteString("+1")
	for i := 1; i <= 30000; i++ { // about 250 KB: several buffers
		fmt.Fprintf(&long, " %d:1", i)
	}
	in := "-1 1:1\r\n" + long.String() + "\n" + long.String() + " 30001:1\r\n+1 2:1"
	for _, tc := range []struct {
		name    string
		maxLine int
		skip    bool
		want    []int // features of each example read
		skipped int
		err     string
	}{
		{"all fit", maxLibSVMLine, false, []int{1, 30000, 30001, 1}, 0, ""},
		{"one too long, skipped", long.Len() + 1, true, []int{1, 30000, 1}, 1, ""},
		{"one too long, an error", long.Len() + 1, false, []int{1, 30000}, 0, "bad.txt: line 3: line longer than"},
		{"both too long, skipped", 100, true, []int{1, 1}, 2, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, err := NewLibSVMReader(strings.NewReader(in), "bad.txt", SparseOptions{Dim: 40000, SkipCorrupt: tc.skip})
			if err != nil {
				t.Fatal(err)
			}
			src.maxLine = tc.maxLine
			var got []int
			for {
				ex, err := src.Next(context.Background())
				if err == io.EOF {
					break
				}
				if err != nil {
					if tc.err == "" || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("after %v: %v, want %q", got, err, tc.err)
					}
					break
				}
				got = append(got, len(ex.Indices))
			}
			if !slices.Equal(got, tc.want) || src.Skipped() != tc.skipped {
				t.Errorf("read %v, skipped %d; want %v, %d", got, src.Skipped(), tc.want, tc.skipped)
			}
		})
	}
}
