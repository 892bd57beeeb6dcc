package data

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/term"
)

// FetchReportBytes is how often, in bytes downloaded, a fetch that is not
// shown on a terminal writes a progress line.
const FetchReportBytes = 4 << 20

// fetchPoll is how often a fetch's download is measured.
const fetchPoll = 200 * time.Millisecond

// fetchMeter shows the bytes a fetch has downloaded: on a terminal one
// line redrawn in place, elsewhere (a log, CI) a line every
// FetchReportBytes and one at the end.
type fetchMeter struct {
	w    io.Writer
	tty  bool
	what string
	last int64 // bytes last shown
	next int64 // not tty: the next multiple of FetchReportBytes to report
}

func newFetchMeter(w io.Writer, what string) *fetchMeter {
	tty := false
	if t, ok := w.(interface{ IsTerminal() bool }); ok { // a writer sharing the terminal with the log
		tty = t.IsTerminal()
	} else if f, ok := w.(*os.File); ok {
		tty = term.IsTerminal(int(f.Fd()))
	}
	return &fetchMeter{w: w, tty: tty, what: what, next: FetchReportBytes}
}

// update shows n bytes downloaded so far.
func (m *fetchMeter) update(n int64) {
	if n == m.last {
		return
	}
	m.last = n
	switch {
	case m.tty:
		fmt.Fprintf(m.w, "\r%s: %s downloaded", m.what, mib(n))
	case n >= m.next:
		fmt.Fprintf(m.w, "%s: %s downloaded\n", m.what, mib(n))
		m.next = (n/FetchReportBytes + 1) * FetchReportBytes
	}
}

// done shows the final count and ends the line; after a failed fetch it
// only ends the line (the error says the rest).
func (m *fetchMeter) done(n int64, failed bool) {
	switch {
	case failed && m.tty && m.last > 0:
		fmt.Fprintln(m.w)
		return
	case failed:
		return
	case m.tty:
		fmt.Fprintf(m.w, "\r%s: %s downloaded, done\n", m.what, mib(n))
		return
	}
	fmt.Fprintf(m.w, "%s: %s downloaded, done\n", m.what, mib(n))
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// watchDownload measures, every fetchPoll until the returned function is
// called, the bytes of the files matching pattern (the tarball being
// downloaded) and shows them on w; stopping shows the final count, unless the
// fetch failed. With a nil w it does nothing.
func watchDownload(w io.Writer, what, pattern string) (stop func(failed bool)) {
	if w == nil {
		return func(bool) {}
	}
	m := newFetchMeter(w, what)
	size := func() (n int64) {
		matches, _ := filepath.Glob(pattern)
		for _, p := range matches {
			if fi, err := os.Stat(p); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(fetchPoll)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				m.update(size())
			}
		}
	})
	return func(failed bool) {
		close(quit)
		wg.Wait()
		m.done(size(), failed)
	}
}
