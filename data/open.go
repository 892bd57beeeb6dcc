package data

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// The image formats OpenImages reads, as ImageOptions.Format and
// ImageSet.Format name them.
const (
	// FormatMNIST is a directory of MNIST's four IDX files (raw or
	// gzipped), verified against the published MNIST unless
	// MNISTOptions.AllowUnverified; with no path, MNIST found or fetched
	// as LoadMNIST does.
	FormatMNIST = "mnist"
	// FormatNPZ is a NumPy .npz archive in Keras's layout: arrays
	// x_train, y_train, x_test, y_test (keras.datasets' mnist.npz).
	FormatNPZ = "npz"
	// FormatNPY is a directory of those four arrays as .npy files
	// (x_train.npy, ...).
	FormatNPY = "npy"
)

// ImageOptions configures OpenImages.
type ImageOptions struct {
	// Format is one of FormatMNIST, FormatNPZ, FormatNPY, or "" to tell
	// the format from the path and its contents.
	Format string
	// MNIST configures the MNIST reader (search, fetch, verification);
	// its Logger also receives the other readers' messages.
	MNIST MNISTOptions
}

// imageFormat is one reader OpenImages can dispatch to: a new format is
// one entry here and its reader.
type imageFormat struct {
	name string
	// what describes the format in errors.
	what string
	// detect says whether a directory (head nil), or a regular file
	// starting with head, is in this format.
	detect func(path string, isDir bool, head []byte) bool
	open   func(ctx context.Context, path string, opts ImageOptions) (*ImageSet, error)
}

var imageFormats = []imageFormat{
	{
		name: FormatMNIST, what: "a directory of MNIST's four IDX files",
		detect: func(path string, isDir bool, _ []byte) bool { return isDir && len(missingMNIST(path)) == 0 },
		open: func(_ context.Context, path string, opts ImageOptions) (*ImageSet, error) {
			return ReadMNISTDir(path, opts.MNIST)
		},
	},
	{
		name: FormatNPZ, what: "a NumPy .npz file holding x_train, y_train, x_test, y_test",
		detect: func(_ string, isDir bool, head []byte) bool { return !isDir && bytes.HasPrefix(head, []byte("PK")) },
		open:   func(_ context.Context, path string, _ ImageOptions) (*ImageSet, error) { return ReadNPZ(path) },
	},
	{
		name: FormatNPY, what: "a directory of x_train.npy, y_train.npy, x_test.npy, y_test.npy",
		detect: func(path string, isDir bool, _ []byte) bool {
			_, err := os.Stat(filepath.Join(path, kerasKeys[0]+".npy"))
			return isDir && err == nil
		},
		open: func(_ context.Context, path string, _ ImageOptions) (*ImageSet, error) { return ReadNPYDir(path) },
	},
}

// OpenImages is the one way into an image data set: every caller (the
// training and evaluation paths, the launcher, the measurements) opens
// its images here. With no path it returns MNIST as LoadMNIST does (found
// in MNISTOptions.Dir or the usual directories, else fetched, and
// verified). With a path it reads that file or directory in
// opts.Format, or, when that is "", in the format its contents show (a
// zip archive is .npz; a directory holds MNIST's IDX files or .npy
// arrays). A path that is not a regular file or directory (a FIFO) is
// refused at once, never waited on.
func OpenImages(ctx context.Context, path string, opts ImageOptions) (*ImageSet, error) {
	if path == "" {
		if opts.Format != "" && opts.Format != FormatMNIST {
			return nil, fmt.Errorf("image format %s needs a path: only MNIST is found or fetched without one", opts.Format)
		}
		return LoadMNIST(ctx, opts.MNIST)
	}
	f, err := imageFormatOf(path, opts.Format)
	if err != nil {
		return nil, err
	}
	set, err := f.open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	set.Format = f.name
	return set, nil
}

// imageFormatOf returns the reader for path: the one named, or the first
// whose detect accepts path's contents.
func imageFormatOf(path, name string) (imageFormat, error) {
	var names []string
	for _, f := range imageFormats {
		if f.name == name {
			return f, nil
		}
		names = append(names, f.name)
	}
	if name != "" {
		return imageFormat{}, fmt.Errorf("image format %q: want one of %s, or empty to tell it from the path", name, strings.Join(names, ", "))
	}
	st, err := os.Stat(path) // never blocks, not even on a FIFO
	if err != nil {
		return imageFormat{}, fmt.Errorf("image data set: %w", err)
	}
	var head []byte
	if !st.IsDir() {
		if head, err = readHead(path, 8); err != nil {
			return imageFormat{}, fmt.Errorf("image data set: %w", err)
		}
	}
	for _, f := range imageFormats {
		if f.detect(path, st.IsDir(), head) {
			return f, nil
		}
	}
	var whats []string
	for _, f := range imageFormats {
		whats = append(whats, f.what)
	}
	if bytes.HasPrefix(head, npyMagic) {
		return imageFormat{}, fmt.Errorf("%s is a single .npy array: an image set needs four (x_train, y_train, x_test, y_test), in a .npz or a directory", path)
	}
	return imageFormat{}, fmt.Errorf("%s is not an image data set meshtrain reads: want %s", path, strings.Join(whats, ", or "))
}

// readHead returns the first n bytes of a regular file (fewer if it is
// shorter), refusing anything else without blocking.
func readHead(path string, n int) ([]byte, error) {
	f, err := inputfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, n)
	k, err := io.ReadFull(f, b)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b[:k], nil
}
