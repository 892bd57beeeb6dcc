// Package writable checks, before a long run starts, that the files and
// directories it will write at the end can be written: a summary that
// cannot be saved should fail the command at once, not after the training
// it was meant to record.
package writable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
)

// File checks that path can be written later, under atomicfile's rule
// (atomicfile.Classify) and without ever blocking: a regular file (or a
// missing one) must be replaceable, so its directory must exist and take a
// new file (an existing file is not modified); a character device is
// opened for writing without blocking; a FIFO must have a reader, and is
// held open (atomicfile.Hold) so that the reader stays connected until the
// write; anything else (a directory, a socket, a block device) is refused.
// The error names path and says what to do.
func File(path string) error {
	fi, err := os.Stat(path)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%s is a directory: give a file name", path)
	case err != nil && !missing(err):
		return fmt.Errorf("%s: %w", path, err)
	}
	if fi != nil {
		if err := existing(path, fi.Mode()); err != nil || !fi.Mode().IsRegular() {
			return err
		}
		if real, err := filepath.EvalSymlinks(path); err == nil {
			path = real // the rename happens beside a link's target
		}
	}
	dir := filepath.Dir(path)
	switch fi, err := os.Stat(dir); {
	case missing(err):
		return fmt.Errorf("%s cannot be written: its directory %s does not exist (create it first)", path, dir)
	case err != nil:
		return fmt.Errorf("%s cannot be written: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("%s cannot be written: %s is not a directory", path, dir)
	}
	if err := probe(dir); err != nil {
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return nil
}

// existing checks an existing path, fi its os.Stat: a regular file or a
// character device must open for writing (without blocking; nothing is
// written), a FIFO is held for the write, anything else is refused.
func existing(path string, fi fs.FileMode) error {
	kind, err := atomicfile.Classify(path)
	if err != nil {
		return err
	}
	if kind == atomicfile.Direct && fi&fs.ModeNamedPipe != 0 {
		return atomicfile.Hold(path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("%s cannot be written: %w", path, err)
	}
	return f.Close()
}

// missing says err means a path does not exist (or goes through a file).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// Dir checks that files can be created in dir, creating dir (and its
// parents) if it does not exist, as the run would.
func Dir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("directory %s cannot be created: %w", dir, err)
	}
	if err := probe(dir); err != nil {
		return fmt.Errorf("directory %s is not writable: %w", dir, err)
	}
	return nil
}

// probe creates and removes a temporary file in dir: the one test that
// covers permissions, read-only file systems and ACLs alike.
func probe(dir string) error {
	f, err := os.CreateTemp(dir, ".meshtrain-probe-*")
	if err != nil {
		return err
	}
	name := f.Name()
	return errors.Join(f.Close(), os.Remove(name))
}
