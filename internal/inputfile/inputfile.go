// Package inputfile opens the files a run reads (data files, checkpoints,
// cluster specs) so that none can block it or be read only once: each
// must be a regular file. A pipe (`<(zcat shard.gz)`), a FIFO or a
// character device can be read only once, and a FIFO's open blocks in the
// kernel until a writer appears, beyond any deadline or signal; so they
// are refused with the file's name and why, without blocking: the open is
// non-blocking and the kind is checked on the open file.
package inputfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error for a file that is not a regular
// file.
var ErrNotRegular = errors.New("not a regular file")

// Check returns an error naming path when it exists and is not a regular
// file; os.Stat never blocks on a FIFO. A missing file is left to whoever
// opens it.
func Check(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return regular(path, st.Mode())
}

// Open opens path for reading if it is a regular file, else fails at once
// (see the package's doc) with an error naming it.
func Open(path string) (*os.File, error) {
	// O_NONBLOCK: opening a FIFO for reading returns at once instead of
	// waiting for a writer; it is refused just below. A regular file
	// ignores the flag.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if err := regular(path, st.Mode()); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// ReadFile is os.ReadFile for regular files only.
func ReadFile(path string) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// ErrTooLarge is wrapped by ReadFileMax's error for a file over its cap.
var ErrTooLarge = errors.New("over the size cap")

// ReadFileMax is ReadFile for a file of at most max bytes: a larger one is
// refused by its size, before it is read, and a file that grows while it
// is read is never read past max+1 bytes.
func ReadFileMax(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		return nil, fmt.Errorf("%s: %d bytes, %w of %d bytes", path, st.Size(), ErrTooLarge, max)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than %d bytes, %w", path, max, ErrTooLarge)
	}
	return b, nil
}

func regular(path string, mode fs.FileMode) error {
	if mode.IsRegular() {
		return nil
	}
	kind := "not a regular file"
	switch {
	case mode&fs.ModeNamedPipe != 0:
		kind = "a pipe or FIFO"
	case mode&fs.ModeCharDevice != 0:
		kind = "a character device"
	case mode&fs.ModeDevice != 0:
		kind = "a device"
	case mode&fs.ModeSocket != 0:
		kind = "a socket"
	case mode.IsDir():
		kind = "a directory"
	}
	return &NotRegularError{Path: path, Kind: kind}
}

// NotRegularError names a file that is not a regular file and says why
// it cannot be used.
type NotRegularError struct{ Path, Kind string }

func (e *NotRegularError) Error() string {
	if e.Kind == "a directory" {
		return fmt.Sprintf("%s is a directory, not a file", e.Path)
	}
	return fmt.Sprintf("%s is %s, which can be read only once (and a FIFO blocks until a writer appears), while meshtrain reads its inputs more than once (a data file is counted before training, then read every epoch) and with a deadline: write it to a regular file first (zcat shard.gz > shard)", e.Path, e.Kind)
}

func (e *NotRegularError) Unwrap() error { return ErrNotRegular }
