// Package console shares one terminal between what a command shows in
// place on stdout (a progress bar, a fetch's byte count) and the lines it
// logs on stderr: a log line first clears the unfinished stdout line, and
// that line is drawn again after it, so neither is written over the other.
package console

import (
	"bytes"
	"io"
	"os"
	"sync"

	"golang.org/x/term"
)

// Terminal serialises the writes of stdout and stderr. When both are the
// same kind of terminal, it remembers stdout's unfinished line (what
// follows its last carriage return or newline) and redraws it after each
// stderr write; elsewhere it only passes the bytes on.
type Terminal struct {
	mu       sync.Mutex
	out, err io.Writer
	outTTY   bool // stdout is a terminal
	shared   bool // stdout and stderr are both terminals: one screen
	line     []byte
}

// New returns the Terminal of stdout and stderr.
func New(stdout, stderr *os.File) *Terminal {
	outTTY := isTerminal(stdout)
	return &Terminal{out: stdout, err: stderr, outTTY: outTTY, shared: outTTY && isTerminal(stderr)}
}

func isTerminal(f *os.File) bool { return f != nil && term.IsTerminal(int(f.Fd())) }

// NewWriters returns a Terminal over any two writers; shared says whether
// they show on one screen (for tests).
func NewWriters(stdout, stderr io.Writer, shared bool) *Terminal {
	return &Terminal{out: stdout, err: stderr, outTTY: shared, shared: shared}
}

// Stdout is the writer of results and of what is drawn in place.
func (t *Terminal) Stdout() *Writer { return &Writer{t: t, stdout: true} }

// Stderr is the writer of log lines.
func (t *Terminal) Stderr() *Writer { return &Writer{t: t} }

// Writer is one of a Terminal's two streams.
type Writer struct {
	t      *Terminal
	stdout bool
}

// IsTerminal says whether the stream is a terminal, so that what draws
// in place (observe.IsTerminal, the data fetch's meter) still does
// through a Writer.
func (w *Writer) IsTerminal() bool {
	if w.stdout {
		return w.t.outTTY
	}
	return w.t.shared
}

func (w *Writer) Write(p []byte) (int, error) {
	t := w.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if w.stdout {
		n, err := t.out.Write(p)
		if t.shared {
			t.track(p[:n])
		}
		return n, err
	}
	drawn := t.shared && len(bytes.TrimSpace(t.line)) > 0
	if drawn {
		_, _ = io.WriteString(t.out, "\r\x1b[K") // clear the line the bar is on
	}
	n, err := t.err.Write(p)
	if drawn {
		_, _ = t.out.Write(append([]byte{'\r'}, t.line...))
	}
	return n, err
}

// Sync is for zap's WriteSyncer: a terminal has nothing to flush.
func (w *Writer) Sync() error { return nil }

// track follows what stdout's current line shows.
func (t *Terminal) track(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			t.line = append(t.line, p...)
			return
		}
		t.line = t.line[:0] // a carriage return starts the line anew, a newline ends it
		p = p[i+1:]
	}
}
