package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// The one rule for every output path meshtrain writes, kept here so that
// the start-up check (internal/writable) and the write agree:
//   - a missing path or a regular file is replaced atomically (a symbolic
//     link is followed: its target is replaced, the link kept);
//   - a character device (/dev/null, a terminal, /dev/stdout on one) or a
//     FIFO (/dev/stdout on a pipe) is written into directly, opened with
//     O_NONBLOCK so that a FIFO with no reader is an error, never a hang;
//   - anything else (a socket, a block device, a directory) is refused by
//     name.
//
// Nothing but a regular file is ever renamed over: renaming over
// /dev/full, as root, replaced the machine's device with a regular file.

// Kind is how a path is written.
type Kind int

const (
	// Replace: a missing path or a regular file, replaced atomically.
	Replace Kind = iota
	// Direct: a character device or a FIFO, written into in place.
	Direct
)

// Classify says how path would be written, or why it cannot be: a
// refusal names path and what it is. It never opens path, so it never
// blocks. The error of a path that cannot be examined wraps the
// os.Stat error (fs.ErrNotExist is not one: a missing path is Replace).
func Classify(path string) (Kind, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Replace, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	m := fi.Mode()
	switch {
	case m.IsRegular():
		return Replace, nil
	case m&fs.ModeCharDevice != 0, m&fs.ModeNamedPipe != 0:
		return Direct, nil
	}
	return 0, fmt.Errorf("%s is %s: an output must be a regular file, a character device or a FIFO", path, describe(m))
}

// describe names a file mode's type for an error message.
func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a regular file"
}

// held keeps FIFOs opened by Hold, by path, until Create takes them: a
// reader of a FIFO sees an end of file when its last writer closes, so the
// start-up check must not open and close it.
var held struct {
	sync.Mutex
	files map[string]*os.File
}

// Hold opens path, a FIFO or a character device, for writing without
// blocking and keeps it open for Create: a FIFO with no reader is an error
// naming it (at start-up, not after the run), and the reader found there
// stays connected until the output is written. Hold of a path already
// held does nothing.
func Hold(path string) error {
	held.Lock()
	defer held.Unlock()
	if held.files[path] != nil {
		return nil
	}
	f, err := openDirect(path)
	if err != nil {
		return err
	}
	if held.files == nil {
		held.files = map[string]*os.File{}
	}
	held.files[path] = f
	return nil
}

// openDirect opens a device or FIFO for writing, never blocking: a FIFO
// with no reader fails at once (ENXIO) instead of waiting for one.
func openDirect(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ENXIO) {
		return nil, fmt.Errorf("%s is a FIFO with no reader: start its reader first", path)
	}
	if err != nil {
		return nil, fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return f, nil
}

// takeDirect returns the file Hold kept for path, or opens it.
func takeDirect(path string) (*os.File, error) {
	held.Lock()
	f := held.files[path]
	delete(held.files, path)
	held.Unlock()
	if f != nil {
		return f, nil
	}
	return openDirect(path)
}

// target is the path a replacement is renamed to: path itself, or the
// file a symbolic link at path leads to, so that the link is kept.
func target(path string) string {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		return real
	}
	return path
}
