package text

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data"
)

// writeCorpus writes n documents per class under dir/pos and dir/neg
// (and a hidden file, which is skipped) and returns the two directories.
func writeCorpus(t *testing.T, dir string, n int) (pos, neg string) {
	t.Helper()
	pos, neg = filepath.Join(dir, "pos"), filepath.Join(dir, "neg")
	for _, d := range []string{pos, filepath.Join(neg, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		write(t, filepath.Join(pos, fmt.Sprintf("%03d.txt", i)), fmt.Sprintf("WIN money now %d! click here", i))
		write(t, filepath.Join(neg, "sub", fmt.Sprintf("%03d.eml", i)), fmt.Sprintf("Subject: minutes of meeting %d\n\nsee you", i))
	}
	write(t, filepath.Join(pos, ".DS_Store"), "junk")
	return pos, neg
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readLibSVM reads every example of a libsvm file (indices 1-based).
func readLibSVM(t *testing.T, path string, dim int) []data.Example {
	t.Helper()
	fh, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	r, err := data.NewLibSVMReader(fh, path, data.SparseOptions{Dim: dim})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := data.Collect(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var out []data.Example
	var b data.Batch
	for i := range ds.Len() {
		b = data.Batch{}
		ds.Append(&b, i)
		out = append(out, data.Example{Indices: b.Indices, Values: b.Values, Label: b.Labels[0]})
	}
	return out
}

func TestWriteText(t *testing.T) {
	dir := t.TempDir()
	pos, neg := writeCorpus(t, dir, 50)
	cfg := Config{Bag: BagOfWords{Features: 1 << 12, Values: BagBinary}, TestPercent: 30, Source: "test"}
	var outputs [2][]byte
	for run := range 2 {
		cfg.Out = filepath.Join(dir, fmt.Sprint("out", run))
		info, err := Write(context.Background(), cfg, DirCorpus(pos, 1), DirCorpus(neg, -1))
		if err != nil {
			t.Fatal(err)
		}
		if info.TrainExamples+info.TestExamples != 100 || info.TrainPositives+info.TestPositives != 50 || info.Features != 1<<12 || info.Source != "test" {
			t.Fatalf("info %+v: want 100 documents, 50 positive", info)
		}
		// The split is HeldOut's.
		want := 0
		for i := range 50 {
			if HeldOut([]byte(fmt.Sprintf("WIN money now %d! click here", i)), 30) {
				want++
			}
		}
		if info.TestPositives != want {
			t.Fatalf("%d positive test documents, HeldOut holds out %d", info.TestPositives, want)
		}
		train, test := readLibSVM(t, filepath.Join(cfg.Out, TrainFile), 1<<12), readLibSVM(t, filepath.Join(cfg.Out, TestFile), 1<<12)
		if len(train) != info.TrainExamples || len(test) != info.TestExamples {
			t.Fatalf("files hold %d and %d examples, info says %d and %d", len(train), len(test), info.TrainExamples, info.TestExamples)
		}
		// The first positive document, converted by hand.
		var ex data.Example
		cfg.Bag.Example([]byte("WIN money now 0! click here"), 1, &ex)
		if all := append(train, test...); !slices.ContainsFunc(all, func(e data.Example) bool { return e.Label == 1 && slices.Equal(e.Indices, ex.Indices) }) {
			t.Fatalf("document pos/000.txt is not in the output as %v", ex.Indices)
		}
		if _, err := os.Stat(filepath.Join(cfg.Out, InfoFile)); err != nil {
			t.Fatal(err)
		}
		outputs[run], _ = os.ReadFile(filepath.Join(cfg.Out, TrainFile))
	}
	if !bytes.Equal(outputs[0], outputs[1]) {
		t.Fatal("two conversions of one corpus differ")
	}
}

// TestWriteTextErrors: every failure names its cause and leaves no file.
func TestWriteTextErrors(t *testing.T) {
	dir := t.TempDir()
	pos, neg := writeCorpus(t, dir, 3)
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	bag := BagOfWords{Features: 100, Values: BagBinary}
	for _, tc := range []struct {
		name    string
		cfg     Config
		corpora []Corpus
		want    string
	}{
		{"no documents", Config{Bag: bag, TestPercent: 20}, []Corpus{DirCorpus(empty, 1)}, "no documents under"},
		{"missing directory", Config{Bag: bag, TestPercent: 20}, []Corpus{DirCorpus(filepath.Join(dir, "nope"), 1)}, "no such file"},
		{"all held out", Config{Bag: bag, TestPercent: 100}, []Corpus{DirCorpus(pos, 1), DirCorpus(neg, -1)}, "0 training and 6 test documents"},
		{"bad label", Config{Bag: bag, TestPercent: 20}, []Corpus{func(_ context.Context, fn func(Document) error) error {
			return fn(Document{Name: "x.txt", Text: []byte("a"), Label: 0})
		}}, "x.txt: label 0"},
		{"bad share", Config{Bag: bag, TestPercent: 101}, nil, "test share 101%"},
		{"bad bag", Config{Bag: BagOfWords{Features: 100, Values: "idf"}}, nil, `values "idf"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Out = filepath.Join(dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
			_, err := Write(context.Background(), tc.cfg, tc.corpora...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
			if ents, _ := os.ReadDir(tc.cfg.Out); len(ents) != 0 {
				t.Fatalf("left %d files in %s", len(ents), tc.cfg.Out)
			}
		})
	}
}
