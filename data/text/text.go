package text

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

// Document is one labelled text of a corpus.
type Document struct {
	Name  string  // where it came from (a path), for errors
	Text  []byte  // the whole text (an e-mail with its headers, a review, ...)
	Label float32 // +1 or -1
}

// File names Write writes in its output directory.
const (
	TrainFile = "train.libsvm"
	TestFile  = "test.libsvm"
	InfoFile  = "text-libsvm.json"
)

// Config configures a Writer.
type Config struct {
	Out         string     // output directory, created if missing
	Bag         BagOfWords // the features
	TestPercent int        // share of the documents held out (HeldOut), 0..100
	Source      string     // what the corpus is, recorded in Info
}

// Info describes a converted corpus; it is written next to the data
// as InfoFile.
type Info struct {
	Source         string  `json:"source"`
	Features       int     `json:"features"`
	Values         string  `json:"values"`
	TestPercent    int     `json:"test_percent"`
	TrainFile      string  `json:"train_file"`
	TestFile       string  `json:"test_file"`
	TrainExamples  int     `json:"train_examples"`
	TestExamples   int     `json:"test_examples"`
	TrainPositives int     `json:"train_positives"`
	TestPositives  int     `json:"test_positives"`
	MeanNonZeros   float64 `json:"mean_nonzeros"` // features per example
}

// Writer converts documents to a hashed bag of words in libsvm form
// (1-based indices, labels ±1), split into a training and a test file by
// HeldOut. The files appear complete or not at all: Commit publishes
// them, Abort (or a failed Add) leaves nothing behind.
type Writer struct {
	cfg      Config
	bag      BagOfWords
	files    [2]*atomicfile.File // train, test
	bufs     [2]*bufio.Writer
	libsvm   [2]*data.LibSVMWriter
	info     Info
	ex       data.Example
	nonZeros int // over all documents
}

// NewTextWriter checks cfg and starts the two files.
func NewTextWriter(cfg Config) (*Writer, error) {
	if err := cfg.Bag.Check(); err != nil {
		return nil, err
	}
	if cfg.TestPercent < 0 || cfg.TestPercent > 100 {
		return nil, fmt.Errorf("test share %d%%: want 0..100", cfg.TestPercent)
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("creating the output directory: %w", err)
	}
	w := &Writer{cfg: cfg, bag: BagOfWords{Features: cfg.Bag.Features, Values: cfg.Bag.Values}}
	w.info = Info{Source: cfg.Source, Features: cfg.Bag.Features, Values: cfg.Bag.Values, TestPercent: cfg.TestPercent,
		TrainFile: TrainFile, TestFile: TestFile}
	for k, name := range []string{TrainFile, TestFile} {
		f, err := atomicfile.Create(filepath.Join(cfg.Out, name), 0o644)
		if err != nil {
			w.Abort()
			return nil, err
		}
		w.files[k] = f
		w.bufs[k] = bufio.NewWriterSize(f, 1<<20)
		w.libsvm[k] = data.NewLibSVMWriter(w.bufs[k], false)
	}
	return w, nil
}

// Add converts doc and writes it to the training or the test file.
func (w *Writer) Add(doc Document) error {
	if doc.Label != 1 && doc.Label != -1 {
		w.Abort()
		return fmt.Errorf("%s: label %v: want +1 or -1", doc.Name, doc.Label)
	}
	w.bag.Example(doc.Text, doc.Label, &w.ex)
	k := 0
	if HeldOut(doc.Text, w.cfg.TestPercent) {
		k = 1
	}
	if err := w.libsvm[k].Write(w.ex); err != nil {
		w.Abort()
		return fmt.Errorf("%s: %w", doc.Name, err)
	}
	pos := 0
	if doc.Label > 0 {
		pos = 1
	}
	if k == 0 {
		w.info.TrainExamples++
		w.info.TrainPositives += pos
	} else {
		w.info.TestExamples++
		w.info.TestPositives += pos
	}
	w.nonZeros += len(w.ex.Indices)
	return nil
}

// Commit publishes the two files and the InfoFile, and returns the
// info. A corpus with no training or no test document is an error.
func (w *Writer) Commit() (*Info, error) {
	defer w.Abort()
	if w.info.TrainExamples == 0 || (w.info.TestExamples == 0 && w.cfg.TestPercent > 0) {
		return nil, fmt.Errorf("%d training and %d test documents: want some of each (a larger corpus, or another test share)",
			w.info.TrainExamples, w.info.TestExamples)
	}
	for k, f := range w.files {
		if err := w.bufs[k].Flush(); err != nil {
			return nil, err
		}
		if err := f.Commit(); err != nil {
			return nil, err
		}
	}
	w.info.MeanNonZeros = float64(w.nonZeros) / float64(w.info.TrainExamples+w.info.TestExamples)
	b, err := json.MarshalIndent(w.info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(w.cfg.Out, InfoFile), append(b, '\n'), 0o644); err != nil {
		return nil, err
	}
	info := w.info
	return &info, nil
}

// Abort discards the files not yet committed; it is safe to call twice,
// and after Commit.
func (w *Writer) Abort() {
	for _, f := range w.files {
		if f != nil {
			f.Abort()
		}
	}
}

// maxDocumentBytes bounds one document read from a directory, so that a
// stray disk image is an error, not an OOM.
const maxDocumentBytes = 64 << 20

// WalkDocuments calls fn with every regular file under dir (recursively,
// in lexical order, hidden files and directories skipped) as a document
// labelled label: the layout of most text-classification corpora (one
// directory per class, one file per document).
func WalkDocuments(ctx context.Context, dir string, label float32, fn func(Document) error) error {
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path != dir && len(d.Name()) > 0 && d.Name()[0] == '.' {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if st, err := d.Info(); err == nil && st.Size() > maxDocumentBytes {
			return fmt.Errorf("%s: %d bytes, more than the %d a document may have: not a text?", path, st.Size(), maxDocumentBytes)
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return fn(Document{Name: path, Text: text, Label: label})
	})
}

// A Corpus calls fn with each of its documents, in a fixed order.
type Corpus func(ctx context.Context, fn func(Document) error) error

// DirCorpus is the documents under dir (see WalkDocuments), labelled
// label; a directory without any is an error.
func DirCorpus(dir string, label float32) Corpus {
	return func(ctx context.Context, fn func(Document) error) error {
		n := 0
		err := WalkDocuments(ctx, dir, label, func(d Document) error {
			n++
			return fn(d)
		})
		if err == nil && n == 0 {
			err = fmt.Errorf("no documents under %s: want one file per document", dir)
		}
		return err
	}
}

// SpamAssassinCorpus is the messages of the tarball at path (see
// ReadSpamAssassin).
func SpamAssassinCorpus(path string) Corpus {
	return func(ctx context.Context, fn func(Document) error) error {
		return ReadSpamAssassin(ctx, path, fn)
	}
}

// Write converts the documents of every corpus, in order, into
// cfg.Out (see Writer) and returns what it wrote.
func Write(ctx context.Context, cfg Config, corpora ...Corpus) (*Info, error) {
	w, err := NewTextWriter(cfg)
	if err != nil {
		return nil, err
	}
	defer w.Abort()
	for _, c := range corpora {
		if err := c(ctx, w.Add); err != nil {
			return nil, err
		}
	}
	return w.Commit()
}
