package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
)

func TestParseSizes(t *testing.T) {
	got, err := ParseSizes("4K, 64K,1M,16M,3,2G")
	if err != nil || !slices.Equal(got, []int64{4 << 10, 64 << 10, 1 << 20, 16 << 20, 3, 2 << 30}) {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "4Q", "-1", "1.5M"} {
		if _, err := ParseSizes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestAllReduceInProcess runs the benchmark end to end with in-process
// peers (the multi-process mode re-executes the binary, which a test binary
// cannot stand in for).
func TestAllReduceInProcess(t *testing.T) {
	var out bytes.Buffer
	cfg := AllReduceConfig{
		Cluster: Cluster{N: 3, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second},
		Sizes:   []int64{4 << 10, 300 << 10}, Algo: collective.Auto, MinTime: 20 * time.Millisecond, JSON: true,
	}
	if err := AllReduce(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var rows []Row
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(rows) != 2 || rows[0].Algo != "star" || rows[1].Algo != "ring" || !rows[0].Correct || !rows[1].Correct || rows[1].BusBW <= 0 {
		t.Fatalf("rows: %+v", rows)
	}
}

func TestLinkInProcess(t *testing.T) {
	var out bytes.Buffer
	cfg := LinkConfig{Cluster: Cluster{Security: p2p.SecurityTLS, InProcess: true, Timeout: 20 * time.Second}, Bytes: 8 << 20, Pings: 50}
	if err := Link(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "GB/s each way") || !strings.Contains(out.String(), "round trip of 4096 B") {
		t.Fatalf("output: %s", out.String())
	}
}

// rowWatcher is an output that cancels the run once it has received the
// header lines and `rows` rows: what it holds then was written while the
// run was still going.
type rowWatcher struct {
	buf          bytes.Buffer
	header, rows int
	cancel       context.CancelFunc
}

func (w *rowWatcher) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if strings.Count(w.String(), "\n") >= w.header+w.rows {
		w.cancel()
	}
	return n, err
}

func (w *rowWatcher) String() string { return w.buf.String() }

// TestAllReduceRowsAsMeasured: the header appears at once and each row as
// its size is measured, not at the end: a run cancelled after its first
// row has printed it, and nothing of the sizes after it.
func TestAllReduceRowsAsMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &rowWatcher{header: 2, rows: 1, cancel: cancel}
	cfg := AllReduceConfig{
		Cluster: Cluster{N: 2, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second},
		Sizes:   []int64{4 << 10, 64 << 20}, Algo: collective.Auto, MinTime: 20 * time.Millisecond,
	}
	err := AllReduce(ctx, cfg, out)
	if err == nil {
		t.Fatalf("the run went on after the first row was cancelled:\n%s", out.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "# meshtrain all-reduce") || !strings.Contains(lines[1], "busbw(GB/s)") || strings.Fields(lines[2])[0] != "4096" {
		t.Fatalf("output of a run cancelled after its first row (%v):\n%s", err, out.String())
	}
}
