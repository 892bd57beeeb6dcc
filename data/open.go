package data

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
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
	// FormatImages is a folder of class folders of image files
	// (DIR/<class>/*.png, or DIR/train/<class>/… and DIR/test/<class>/…),
	// as keras.utils.image_dataset_from_directory and torchvision's
	// ImageFolder read them.
	FormatImages = "images"
	// FormatCSV is a table with a header row and a label column.
	FormatCSV = "csv"
)

// FormatNames lists the formats OpenImages reads, for flags' help.
var FormatNames = []string{FormatNPZ, FormatNPY, FormatImages, FormatCSV, FormatMNIST}

// ImageOptions configures OpenImages.
type ImageOptions struct {
	// Format is one of FormatMNIST, FormatNPZ, FormatNPY, or "" to tell
	// the format from the path and its contents.
	Format string
	// MNIST configures the MNIST reader (search, fetch, verification);
	// its Logger also receives the other readers' messages.
	MNIST MNISTOptions
	// Read is how the user-data readers read (image size, colour mode,
	// validation split, label column, corrupt files, shard).
	Read ReadOptions
}

// ReadOptions configure the readers of user data sets: image folders
// (ImageSize, ColorMode, ValidationSplit, SkipCorrupt), CSV tables
// (LabelColumn, ValidationSplit) and NumPy arrays (Shard).
type ReadOptions struct {
	// ImageSize is the H×W every image of a folder is resized to
	// (bilinear, see ResizeBilinear); zero keeps the files' size, which
	// must then be one size for all.
	ImageSize [2]int
	// ColorMode is "grayscale" (1 channel) or "rgb" (3; "" means rgb,
	// Keras's default): what an image folder's files are converted to.
	ColorMode string
	// ValidationSplit, in (0, 1), is the fraction of a folder's or a
	// table's examples held out as the test split, when it has no test
	// split of its own: each example is held out by a hash of its
	// relative path (an image) or line number (a row) and SplitSeed, so
	// every peer, and eval given the run's seed, makes the same split.
	ValidationSplit float64
	SplitSeed       uint64
	// LabelColumn names a CSV table's label column; "" means the last.
	LabelColumn string
	// SkipCorrupt skips an image file that does not decode, with a
	// warning naming it, instead of failing.
	SkipCorrupt bool
	// Features, if set, encodes a CSV table's columns as recorded (eval
	// of a checkpoint) instead of as its training rows say.
	Features *Features
	// Shard, when World > 1, has readers that can load only the
	// training examples of one peer (NumPy arrays, image folders) do so
	// (see Images.Shard); the test split is read whole.
	Shard Shard
}

// Check says whether o's values can be applied.
func (o ReadOptions) Check() error {
	switch {
	case o.ImageSize[0] < 0 || o.ImageSize[1] < 0 || (o.ImageSize[0] == 0) != (o.ImageSize[1] == 0) || o.ImageSize[0] > MaxImageSide || o.ImageSize[1] > MaxImageSide:
		return fmt.Errorf("image size %d×%d: want both sides from 1 to %d", o.ImageSize[0], o.ImageSize[1], MaxImageSide)
	case o.ColorMode != "" && o.ColorMode != ColorGrayscale && o.ColorMode != ColorRGB:
		return fmt.Errorf("colour mode %q: want %s or %s", o.ColorMode, ColorGrayscale, ColorRGB)
	case !(o.ValidationSplit >= 0 && o.ValidationSplit < 1):
		return fmt.Errorf("validation split %v: want a fraction from 0 (none) to below 1", o.ValidationSplit)
	case o.Shard.World > 1 && (o.Shard.Rank < 0 || o.Shard.Rank >= o.Shard.World):
		return fmt.Errorf("shard rank %d of %d: want 0 to %d", o.Shard.Rank, o.Shard.World, o.Shard.World-1)
	}
	return nil
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
		open: func(_ context.Context, path string, opts ImageOptions) (*ImageSet, error) {
			return readNPZFile(path, opts.Read)
		},
	},
	{
		name: FormatNPY, what: "a directory of x_train.npy, y_train.npy, x_test.npy, y_test.npy",
		detect: func(path string, isDir bool, _ []byte) bool {
			_, err := os.Stat(filepath.Join(path, kerasKeys[0]+".npy"))
			return isDir && err == nil
		},
		open: func(_ context.Context, path string, opts ImageOptions) (*ImageSet, error) {
			return readNPYDir(path, opts.Read)
		},
	},
}

// RegisterFormat adds a reader to OpenImages's table, after those there:
// name is its ImageOptions.Format, what describes it in errors, detect
// says whether a directory (head nil), or a regular file starting with
// head, is in its format, and open reads one. The readers of image
// folders (data/folder) and CSV tables (data/table) live in packages of
// their own and register from their init, as image/png registers with
// image; a program that reads them imports them (mirrored does).
func RegisterFormat(name, what string, detect func(path string, isDir bool, head []byte) bool,
	open func(ctx context.Context, path string, opts ImageOptions) (*ImageSet, error)) {
	imageFormats = append(imageFormats, imageFormat{name: name, what: what, detect: detect, open: open})
}

// HeldOut says whether the example keyed key (an image's path relative
// to its folder, a row's line) goes to the validation split of fraction
// frac: an FNV-1a hash of the seed and the key, mixed by SplitMix64's
// finaliser (FNV's top bits barely move when only the key's last bytes
// differ, as in "line 7" and "line 8"), read as a fraction of 2^64,
// below frac. Every peer, and eval given the run's seed, computes
// the same split without reading any file.
func HeldOut(key string, seed uint64, frac float64) bool {
	if frac <= 0 {
		return false
	}
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(key))
	return float64(splitmix(h.Sum64()))/math.Pow(2, 64) < frac
}

// Colour modes of ReadOptions.ColorMode, as Keras names them.
const (
	ColorGrayscale = "grayscale"
	ColorRGB       = "rgb"
)

const (
	// MaxImageSide bounds --image-size and an image file's own size, so
	// that a corrupt header claiming 60,000×60,000 pixels is an error,
	// not an allocation of gigabytes.
	MaxImageSide = 8192
	// MaxClasses is the most classes a data set may have: labels are
	// bytes (Images.Labels), and nn's classifiers take 2 to 256. A data
	// set of more is refused by its reader, naming the label.
	MaxClasses = maxLabel + 1
)

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
	set, err := openPath(ctx, path, opts)
	if err != nil && ctx.Err() == nil {
		return nil, badData{err}
	}
	return set, err
}

// ErrBadData is wrapped by every error OpenImages returns for a data set
// named by its path that cannot be read as asked (a missing array,
// shapes that disagree, a label outside the classes, a corrupt image, a
// FIFO, a CSV row of the wrong length): the user's to fix, as a bad
// command line is (meshtrain exits 2 on it, before any training step).
var ErrBadData = errors.New("bad data set")

// BadData marks err as ErrBadData's: a data set that does not fit what
// was asked of it (a model whose input shape is not the data's, too).
func BadData(err error) error { return badData{err} }

type badData struct{ err error }

func (e badData) Error() string   { return e.err.Error() }
func (e badData) Unwrap() []error { return []error{e.err, ErrBadData} }

// openPath is OpenImages of a path.
func openPath(ctx context.Context, path string, opts ImageOptions) (*ImageSet, error) {
	if err := opts.Read.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
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
