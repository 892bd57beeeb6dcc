package console

import (
	"strings"
	"testing"
)

// screen is both streams of a shared terminal, in the order written.
type screen struct{ b strings.Builder }

func (s *screen) Write(p []byte) (int, error) { return s.b.Write(p) }

// TestLogLineClearsAndRedrawsTheBar: a log line written while a bar is
// drawn on stdout first clears the bar's line, then the bar is drawn
// again after it; with no bar drawn (cleared, or ended by a newline) the
// log line is written alone; off a shared terminal nothing is added.
func TestLogLineClearsAndRedrawsTheBar(t *testing.T) {
	var s screen
	term := NewWriters(&s, &s, true)
	out, errw := term.Stdout(), term.Stderr()
	out.Write([]byte("\r[==>   ] 3/10"))
	out.Write([]byte("\r[===>  ] 4/10"))
	errw.Write([]byte("INFO a log line\n"))
	if got, want := s.b.String(), "\r[==>   ] 3/10\r[===>  ] 4/10\r\x1b[KINFO a log line\n\r[===>  ] 4/10"; got != want {
		t.Errorf("screen %q, want %q", got, want)
	}
	s.b.Reset()
	out.Write([]byte("\r             \r")) // the bar cleared
	out.Write([]byte("epoch 1 done\n"))
	errw.Write([]byte("INFO another\n"))
	if got, want := s.b.String(), "\r             \repoch 1 done\nINFO another\n"; got != want {
		t.Errorf("screen %q, want %q", got, want)
	}
	if !out.IsTerminal() || !errw.IsTerminal() {
		t.Error("a shared terminal's writers are not terminals")
	}

	s.b.Reset()
	term = NewWriters(&s, &s, false)
	term.Stdout().Write([]byte("\r[==>   ] 3/10"))
	term.Stderr().Write([]byte("a log line\n"))
	if got, want := s.b.String(), "\r[==>   ] 3/10a log line\n"; got != want {
		t.Errorf("not a terminal: %q, want %q", got, want)
	}
}
