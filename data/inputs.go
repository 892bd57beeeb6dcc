package data

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// Inputs watches a run's data files: a run reads each several times (its
// examples counted up front, then every epoch, the test files at every
// evaluation), so each must be a regular file (inputfile.Open: a pipe or
// FIFO is refused at once with its name), and must not change while the
// run reads it. Inputs remembers each file as first opened (its size,
// modification time and identity) and fails a later open, or the close of
// a file read through (where a truncation or an append shows), of a file
// that differs from that with a *ChangedError naming it: a file truncated
// or appended to mid-run would otherwise train another model, silently.
// The zero value is not usable: NewInputs. A nil *Inputs only refuses
// files that are not regular.
type Inputs struct {
	mu   sync.Mutex
	seen map[string]os.FileInfo
}

// NewInputs returns an empty Inputs.
func NewInputs() *Inputs { return &Inputs{seen: map[string]os.FileInfo{}} }

// Open opens a data file for reading (see Inputs). Closing what it
// returns checks the file again.
func (in *Inputs) Open(path string) (io.ReadCloser, error) {
	f, err := inputfile.Open(path)
	switch {
	case err != nil:
		return nil, err
	case in == nil:
		return f, nil
	}
	if err := in.compare(path, f); err != nil {
		f.Close()
		return nil, err
	}
	return &watchedFile{File: f, in: in, path: path}, nil
}

// compare records f's state as path's if it is the first, else checks it
// against the first.
func (in *Inputs) compare(path string, f *os.File) error {
	st, err := f.Stat()
	if err != nil {
		return err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	was, ok := in.seen[path]
	if !ok {
		in.seen[path] = st
		return nil
	}
	if os.SameFile(was, st) && was.Size() == st.Size() && was.ModTime().Equal(st.ModTime()) {
		return nil
	}
	return &ChangedError{Path: path, Was: was, Now: st}
}

// ChangedError says a data file changed while a run read it.
type ChangedError struct {
	Path     string
	Was, Now os.FileInfo
}

func (e *ChangedError) Error() string {
	how := fmt.Sprintf("%d bytes modified %s, now %d bytes modified %s", e.Was.Size(), e.Was.ModTime().UTC().Format(time.RFC3339Nano),
		e.Now.Size(), e.Now.ModTime().UTC().Format(time.RFC3339Nano))
	if !os.SameFile(e.Was, e.Now) {
		how = "replaced by another file: " + how
	}
	return fmt.Sprintf("data file %s changed during the run (%s): the run reads it again every epoch, so it would train on other data than it counted; let whatever writes it finish first, or train on a copy", e.Path, how)
}

// IsChanged says whether err is (or wraps) a *ChangedError.
func IsChanged(err error) bool {
	var c *ChangedError
	return errors.As(err, &c)
}

// watchedFile checks its file against the first state seen when closed.
type watchedFile struct {
	*os.File
	in   *Inputs
	path string
}

func (w *watchedFile) Close() error {
	err := w.in.compare(w.path, w.File)
	if cerr := w.File.Close(); err == nil {
		err = cerr
	}
	return err
}
