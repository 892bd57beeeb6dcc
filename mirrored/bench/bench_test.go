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
	cfg.JSON, cfg.Sizes = false, []int64{4 << 10}
	if err := AllReduce(context.Background(), cfg, &out); err != nil || !strings.Contains(out.String(), "#wrong") || !strings.Contains(out.String(), "# Avg bus bandwidth") {
		t.Fatalf("table: %v\n%s", err, out.String())
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
	if err := Link(context.Background(), cfg, &out); err != nil || !strings.Contains(out.String(), "A→B alone") || !strings.Contains(out.String(), "slowest direction alone: ") {
		t.Fatalf("table: %v\n%s", err, out.String())
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
