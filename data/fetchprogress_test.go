package data

import (
	"bytes"
	"testing"
)

// TestFetchMeter: off a terminal, a line each time the download passes a
// multiple of FetchReportBytes and one at the end; on a terminal, one line
// redrawn in place.
func TestFetchMeter(t *testing.T) {
	const M = 1 << 20
	for _, tc := range []struct {
		name   string
		tty    bool
		sizes  []int64
		failed bool
		want   string
	}{
		{"log", false, []int64{1 * M, 1 * M, 5 * M, 6 * M, 9 * M}, false,
			"f: 5.0 MiB downloaded\nf: 9.0 MiB downloaded\nf: 11.0 MiB downloaded, done\n"},
		{"log, failed", false, []int64{1 * M}, true, ""},
		{"terminal", true, []int64{1 * M, 1 * M, 5 * M}, false,
			"\rf: 1.0 MiB downloaded\rf: 5.0 MiB downloaded\rf: 11.0 MiB downloaded, done\n"},
		{"terminal, failed", true, []int64{1 * M}, true, "\rf: 1.0 MiB downloaded\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b bytes.Buffer
			m := newFetchMeter(&b, "f")
			m.tty = tc.tty
			for _, n := range tc.sizes {
				m.update(n)
			}
			m.done(11*M, tc.failed)
			if b.String() != tc.want {
				t.Errorf("got %q, want %q", b.String(), tc.want)
			}
		})
	}
}
