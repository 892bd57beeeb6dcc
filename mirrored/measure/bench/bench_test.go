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
	"github.com/meshtrain/meshtrain/collective/half"
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
// cannot stand in for): nccl-tests' columns, in place and out of place,
// nothing wrong, and a JSON that says what ran.
func TestAllReduceInProcess(t *testing.T) {
	var out bytes.Buffer
	cfg := AllReduceConfig{
		Cluster: Cluster{N: 3, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second},
		Sizes:   []int64{4 << 10, 300 << 10}, Algo: collective.Auto, MinTime: 20 * time.Millisecond, JSON: true,
	}
	if err := AllReduce(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var res AllReduceResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	rows := res.Rows
	if len(rows) != 2 || rows[0].Algo != "star" || rows[1].Algo != "ring" || rows[1].InPlace.BusBW <= 0 || rows[1].OutOfPlace.BusBW <= 0 {
		t.Fatalf("rows: %+v", rows)
	}
	for _, r := range rows {
		if r.Type != "float" || r.RedOp != "sum" || r.InPlace.Wrong != 0 || r.OutOfPlace.Wrong != 0 || r.OutOfPlace.TimeUS <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	if res.Format != AllReduceFormat || res.Peers != 3 || len(res.Addrs) != 3 || res.Security != "plaintext" || res.Version == "" || res.AvgBusBW <= 0 || res.LinkFaults != "none" {
		t.Errorf("result %+v", res)
	}
	if _, err := time.Parse(time.RFC3339, res.Started); err != nil {
		t.Errorf("started %q: %v", res.Started, err)
	}
	out.Reset()
	cfg.JSON, cfg.Sizes, cfg.N = false, []int64{4 << 10, 300 << 10}, 2
	if err := AllReduce(context.Background(), cfg, &out); err != nil {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
	ls := lines(out.String())
	checkAllReduceTable(t, ls[:len(ls)-1], "4096", "307200")
	if !strings.HasPrefix(ls[len(ls)-1], "# Avg bus bandwidth    : ") {
		t.Errorf("last line %q: want nccl-tests' average", ls[len(ls)-1])
	}
}

// TestLinkInProcess: every pair of 3 peers is measured, each direction
// alone and both at once; a one-way delay injected on every peer shows in
// every pair's round trips.
func TestLinkInProcess(t *testing.T) {
	const delay = time.Millisecond
	var out bytes.Buffer
	cfg := LinkConfig{Cluster: Cluster{N: 3, Security: p2p.SecurityTLS, InProcess: true, Timeout: 20 * time.Second,
		LinkFaults: collective.LinkFaults{Delay: delay}}, Bytes: 4 << 20, Pings: 30, JSON: true}
	if err := Link(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	var res LinkResult
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v in %s", err, out.String())
	}
	if len(res.Pairs) != 3 || res.Format != LinkFormat || res.Peers != 3 || !strings.Contains(res.LinkFaults, "1ms") {
		t.Fatalf("result %+v", res)
	}
	for _, p := range res.Pairs {
		if p.AToB <= 0 || p.BToA <= 0 || p.BothAToB <= 0 || p.BothBToA <= 0 || p.RTTP50 < 2*delay.Seconds()*1e6 || p.RTTP10 > p.RTTP90 {
			t.Errorf("pair %+v: want every rate > 0 and round trips ≥ %v", p, 2*delay)
		}
	}
	out.Reset()
	cfg.N, cfg.JSON, cfg.LinkFaults = 2, false, collective.LinkFaults{}
	if err := Link(context.Background(), cfg, &out); err != nil {
		t.Fatalf("table: %v\n%s", err, out.String())
	}
	ls := lines(out.String())
	if len(ls) != 5 || !strings.HasPrefix(ls[2], "  link  A→B alone") || len(strings.Fields(ls[3])) != 8 || !strings.HasPrefix(ls[4], "slowest direction alone: 0→1 at ") &&
		!strings.HasPrefix(ls[4], "slowest direction alone: 1→0 at ") {
		t.Fatalf("table:\n%s", out.String())
	}
}

// TestLinkSummary: the slowest direction is named, not averaged away.
func TestLinkSummary(t *testing.T) {
	r := LinkResult{Pairs: []LinkPair{
		{A: 0, B: 1, AToB: 1.0, BToA: 1.1, BothAToB: 0.9, BothBToA: 0.95, RTTP50: 50},
		{A: 0, B: 2, AToB: 1.0, BToA: 0.2, BothAToB: 0.9, BothBToA: 0.15, RTTP50: 70},
		{A: 1, B: 2, AToB: 0.9, BToA: 0.25, BothAToB: 0.8, BothBToA: 0.2, RTTP50: 60},
	}}
	r.summarize()
	if r.Slowest != "2→0" || r.SlowestGBps != 0.2 || r.MedianAloneGBps != 1.0 || r.FastestGBps != 1.1 || r.SlowestVsFastest != 0.2/1.1 || r.MinBothGBps != 0.15 || r.MedianRTTMicros != 60 {
		t.Errorf("summary %+v", r)
	}
}

// watcher is an output that cancels the run once what it holds satisfies
// until: what it holds then was written while the run was still going.
type watcher struct {
	buf    bytes.Buffer
	until  func(out string) bool
	cancel context.CancelFunc
}

func (w *watcher) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	if w.until(w.String()) {
		w.cancel()
	}
	return n, err
}

func (w *watcher) String() string { return w.buf.String() }

// lines returns the whole lines of out.
func lines(out string) []string {
	return strings.Split(out, "\n")[:strings.Count(out, "\n")]
}

// checkAllReduceTable checks main's text layout: the run, the placements,
// nccl-tests' columns, then rows of 15 fields with nothing wrong, the
// first of sizes.
func checkAllReduceTable(t *testing.T, ls []string, sizes ...string) {
	t.Helper()
	if len(ls) != 3+len(sizes) || !strings.HasPrefix(ls[0], "# meshtrain all-reduce: N=2, security plaintext, algo auto, all peers in one process") ||
		!slices.Equal(strings.Fields(ls[1]), []string{"#", "out-of-place", "in-place"}) ||
		strings.Join(strings.Fields(ls[2]), " ") != "size(B) count type redop algo iters time(us) algbw(GB/s) busbw(GB/s) #wrong time(us) algbw(GB/s) busbw(GB/s) #wrong cpu(us)" {
		t.Fatalf("header and %d rows:\n%s", len(sizes), strings.Join(ls, "\n"))
	}
	for i, size := range sizes {
		f := strings.Fields(ls[3+i])
		if len(f) != 15 || f[0] != size || f[2] != "float" || f[3] != "sum" || f[9] != "0" || f[13] != "0" || len(ls[3+i]) != len(ls[2]) {
			t.Errorf("row %q: want %s bytes, float, sum, nothing wrong, aligned with the header", ls[3+i], size)
		}
	}
}

// TestAllReduceRowsAsMeasured: the header appears at once and each row as
// its size is measured, not at the end: a run cancelled after its first
// row has printed it, and nothing of the sizes after it nor the average.
func TestAllReduceRowsAsMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &watcher{until: func(s string) bool { return strings.Count(s, "\n") >= 4 }, cancel: cancel}
	cfg := AllReduceConfig{
		Cluster: Cluster{N: 2, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second},
		Sizes:   []int64{4 << 10, 64 << 20}, Algo: collective.Auto, MinTime: 20 * time.Millisecond,
	}
	err := AllReduce(ctx, cfg, out)
	if err == nil {
		t.Fatalf("the run went on after the first row was cancelled:\n%s", out.String())
	}
	checkAllReduceTable(t, lines(out.String()), "4096")
	if strings.Contains(out.String(), "Avg bus bandwidth") {
		t.Errorf("a cancelled run printed the average:\n%s", out.String())
	}
}

// TestLinkRatesBeforeRoundTrips: a pair's rates appear as soon as they are
// measured, before its round trips (here 2000 of at least 2 ms each): a
// run cancelled once they are out has printed them and no round trip.
func TestLinkRatesBeforeRoundTrips(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &watcher{cancel: cancel, until: func(s string) bool {
		ls := strings.Split(s, "\n")
		return len(ls) > 3 && len(strings.Fields(ls[3])) >= 5
	}}
	cfg := LinkConfig{Cluster: Cluster{N: 2, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second,
		LinkFaults: collective.LinkFaults{Delay: time.Millisecond}}, Bytes: 1 << 20, Pings: 2000}
	if err := Link(ctx, cfg, out); err == nil {
		t.Fatalf("the run went on after it was cancelled:\n%s", out.String())
	}
	ls := strings.Split(out.String(), "\n")
	if len(ls) != 4 || !strings.HasPrefix(ls[0], "# meshtrain link: one libp2p stream each way, security plaintext") || !strings.HasPrefix(ls[1], "# pairs one at a time") ||
		strings.Join(strings.Fields(ls[2]), " ") != "link A→B alone B→A alone A→B both B→A both rtt Median(us) p10 p90" {
		t.Fatalf("output of a run cancelled after its first rates:\n%s", out.String())
	}
	if f := strings.Fields(ls[3]); len(f) != 5 || f[0] != "0-1" {
		t.Fatalf("the first pair's row %q: want its link and 4 rates, no round trips", ls[3])
	}
}

// TestSparseRowsAsMeasured: the header and the local line appear before
// the cluster runs, each cluster row as soon as its run ends: a run
// cancelled after the first row has printed it and nothing after.
func TestSparseRowsAsMeasured(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &watcher{until: func(s string) bool { return strings.Count(s, "\n") >= 4 }, cancel: cancel}
	cfg := SparseConfig{
		Peers: []int{2, 3}, Features: 5000, Batch: 20, Examples: 400, Steps: 30, DenseSteps: 3, LocalSteps: 30,
		Cluster: Cluster{Security: p2p.SecurityPlaintext, Timeout: 20 * time.Second, InProcess: true}, Seed: 1,
	}
	if err := Sparse(ctx, cfg, out); err == nil {
		t.Fatalf("the run went on after it was cancelled:\n%s", out.String())
	}
	ls := lines(out.String())
	if len(ls) != 4 || !strings.HasPrefix(ls[0], "# meshtrain sparse logistic regression: D=5000") || !strings.HasPrefix(ls[1], "local, one core: ") ||
		!strings.HasSuffix(ls[2], "  identical") || len(ls[3]) != len(ls[2]) {
		t.Fatalf("output of a run cancelled after its first row:\n%s", out.String())
	}
	if f := strings.Fields(ls[3]); len(f) != 13 || f[0] != "2" || f[1] != "sparse" || f[12] != "yes" {
		t.Fatalf("first row %q", ls[3])
	}
}

// TestAllReduceWire: with a 16-bit wire the bench times the 16-bit ring,
// its rows say so, and its exact check still finds nothing wrong.
func TestAllReduceWire(t *testing.T) {
	for _, f := range []half.Format{half.BF16, half.FP16} {
		var out bytes.Buffer
		cfg := AllReduceConfig{
			Cluster: Cluster{N: 3, Security: p2p.SecurityPlaintext, InProcess: true, Timeout: 20 * time.Second},
			Sizes:   []int64{4 << 10, 300 << 10}, Algo: collective.Auto, MinTime: 20 * time.Millisecond, JSON: true, Wire: f,
		}
		if err := AllReduce(context.Background(), cfg, &out); err != nil {
			t.Fatal(err)
		}
		var res AllReduceResult
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v in %s", err, out.String())
		}
		for _, r := range res.Rows {
			if r.Type != "float/"+f.String() || r.Algo != "ring" || r.InPlace.Wrong != 0 || r.OutOfPlace.Wrong != 0 || r.InPlace.BusBW <= 0 {
				t.Errorf("%s: row %+v", f, r)
			}
		}
	}
}
