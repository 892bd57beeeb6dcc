package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is a file being written under a temporary name. Its methods are not
// safe for concurrent use.
type File struct {
	tmp    *os.File
	path   string // the path given to Create, for messages
	dest   string // the name tmp is renamed to (path, or a link's target)
	perm   fs.FileMode
	done   bool
	direct bool // tmp is path itself, a device or FIFO: no rename
}

// TempPrefix is the name prefix of the temporary files written for a file
// named name (a base name), so that a caller can find the ones a killed
// process left behind.
func TempPrefix(name string) string { return "." + name + ".tmp-" }

// Create starts writing path: a temporary file in path's directory that
// Commit will rename to path with permissions perm. A path that is a
// character device or a FIFO is written into directly instead (see
// Classify); any other kind of file is refused by name.
func Create(path string, perm fs.FileMode) (*File, error) {
	kind, err := Classify(path)
	if err != nil {
		return nil, fmt.Errorf("writing %w", err)
	}
	if kind == Direct {
		f, err := takeDirect(path)
		if err != nil {
			return nil, fmt.Errorf("writing %w", err)
		}
		return &File{tmp: f, path: path, dest: path, perm: perm, direct: true}, nil
	}
	dest := target(path)
	tmp, err := os.CreateTemp(filepath.Dir(dest), TempPrefix(filepath.Base(dest))+"*")
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", path, err)
	}
	return &File{tmp: tmp, path: path, dest: dest, perm: perm}, nil
}

// Write writes p to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	if f.done {
		return 0, fmt.Errorf("writing %s: %w", f.path, os.ErrClosed)
	}
	n, err := f.tmp.Write(p)
	if err != nil {
		err = fmt.Errorf("writing %s: %w", f.path, err)
	}
	return n, err
}

// Commit publishes what was written: it fsyncs and closes the temporary
// file, sets its permissions, renames it to the path given to Create and
// fsyncs the directory. If any of that fails the temporary file is
// removed and path keeps its old content (unless only the directory's
// fsync failed: the new content is then in place but may not survive a
// crash). After Commit, successful or not, the File is done.
func (f *File) Commit() error {
	if f.done {
		return fmt.Errorf("committing %s: %w", f.path, os.ErrClosed)
	}
	f.done = true
	if f.direct {
		if err := f.tmp.Close(); err != nil {
			return fmt.Errorf("closing %s: %w", f.path, err)
		}
		return nil
	}
	if err := f.publish(); err != nil {
		_ = f.tmp.Close()
		_ = os.Remove(f.tmp.Name())
		return err
	}
	return syncDir(filepath.Dir(f.dest))
}

// publish is Commit up to the rename.
func (f *File) publish() error {
	if err := f.tmp.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", f.tmp.Name(), err)
	}
	if err := f.tmp.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", f.tmp.Name(), err)
	}
	if err := os.Chmod(f.tmp.Name(), f.perm); err != nil {
		return fmt.Errorf("writing %s: %w", f.path, err)
	}
	if err := os.Rename(f.tmp.Name(), f.dest); err != nil {
		return fmt.Errorf("renaming %s to %s: %w", f.tmp.Name(), f.dest, err)
	}
	return nil
}

// Abort discards what was written and removes the temporary file; path is
// untouched. It does nothing after Commit or another Abort, so a deferred
// Abort is the failure path of a function that ends in Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	_ = f.tmp.Close()
	if !f.direct {
		_ = os.Remove(f.tmp.Name())
	}
}

// WriteFile writes data to path atomically with permissions perm: after
// it returns path holds either its old content or all of data.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// syncDir fsyncs a directory so that a rename in it is durable. A file
// system that cannot fsync directories (EINVAL) is not an error: there the
// rename is as durable as it can be made. A variable so that tests can see
// it called.
var syncDir = func(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, fs.ErrInvalid) {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}
