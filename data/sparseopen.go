package data

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// The sparse file formats OpenSparse reads.
const (
	// FormatTFRecord is TFRecord files of tf.train.Example records with
	// label, index and value features (OpenTFExample).
	FormatTFRecord = "tfrecord"
	// FormatLibSVM is libsvm/svmlight text (OpenLibSVM).
	FormatLibSVM = "libsvm"
)

// sparseFormat is one sparse reader: a new format is one entry here.
type sparseFormat struct {
	name string
	// exts are the file extensions (lower case) that mean this format
	// when none is given.
	exts []string
	open func(SparseOptions) Opener
}

// sparseFormats are tried in order; the last is the default for a file
// whose extension names none.
var sparseFormats = []sparseFormat{
	{name: FormatLibSVM, exts: []string{".libsvm", ".svm", ".svmlight", ".txt"}, open: OpenLibSVM},
	{name: FormatTFRecord, exts: []string{".tfrecord", ".tfrecords"}, open: OpenTFExample},
}

// SparseFormat returns the format a sparse file is read in: format if it
// is given (an error unless OpenSparse reads it), else the one its
// extension names (.libsvm, .svm, .svmlight and .txt are libsvm), else
// tfrecord. An empty path checks format alone.
func SparseFormat(format, path string) (string, error) {
	var names []string
	for _, f := range sparseFormats {
		names = append(names, f.name)
	}
	if format != "" {
		if !slices.Contains(names, format) {
			return "", fmt.Errorf("input format %q: want %s (or empty: by file extension)", format, strings.Join(names, " or "))
		}
		return format, nil
	}
	ext := strings.ToLower(filepath.Ext(path))
	for _, f := range sparseFormats {
		if slices.Contains(f.exts, ext) {
			return f.name, nil
		}
	}
	return FormatTFRecord, nil
}

// OpenSparse is the one way into sparse training files: it returns the
// Opener that reads each path in format (or, when that is "", in the
// format its extension names; see SparseFormat), every reader sharing
// opts (so one Inputs watches all the run's files).
func OpenSparse(format string, opts SparseOptions) (Opener, error) {
	if _, err := SparseFormat(format, ""); err != nil {
		return nil, err
	}
	openers := map[string]Opener{}
	for _, f := range sparseFormats {
		openers[f.name] = f.open(opts)
	}
	return func(ctx context.Context, path string) (Source, error) {
		name, _ := SparseFormat(format, path) // format was checked above
		return openers[name](ctx, path)
	}, nil
}

// CheckSparseFile checks a sparse input file before any work: that it
// exists, is a regular file (a FIFO is refused, never waited on), and
// is not gzip-compressed (by its magic bytes: read as libsvm or TFRecord
// it would fail deep inside a record).
func CheckSparseFile(path string) error {
	f, err := inputfile.Open(path) // never blocks on a FIFO: refuses it
	if errors.Is(err, inputfile.ErrNotRegular) {
		return nil // refused by name where the inputs are checked
	}
	if err != nil {
		return fmt.Errorf("input file: %w", err)
	}
	defer f.Close()
	var magic [2]byte
	if n, _ := f.Read(magic[:]); n == 2 && magic == [2]byte{0x1f, 0x8b} {
		return fmt.Errorf("input file %s is gzip-compressed: decompress it first (zcat %s > %s)", path, path, strings.TrimSuffix(path, ".gz"))
	}
	return nil
}
