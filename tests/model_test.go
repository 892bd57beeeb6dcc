package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
)

// TestModelCalibrateThenPredict calibrates the cost model on this machine
// through the binary (which runs its own bench link and bench allreduce as
// processes), then predicts from the file it wrote.
func TestModelCalibrateThenPredict(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "cost.json")
	r := meshtrain(ctx, nil, "--log-level", "error", "model", "calibrate", "--out", path, "--link-bytes", "16M")
	if r.err != nil {
		t.Fatalf("calibrate: %v", r)
	}
	f, err := calibrate.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, m := f.Params, f.Measured
	// Loopback on any machine this runs on: a round trip between 1 µs and
	// 10 ms, a stream between 10 MB/s and 100 GB/s, some CPU per byte.
	if m.RTT < 1e-6 || m.RTT > 10e-3 || p.Alpha <= 0 || p.Alpha > m.RTT {
		t.Errorf("round trip %g s, α %g s", m.RTT, p.Alpha)
	}
	if p.Beta < 10e6 || p.Beta > 100e9 || p.Gamma <= 0 || p.Fixed < 0 {
		t.Errorf("β %g B/s, γ %g s/B, fixed %g s", p.Beta, p.Gamma, p.Fixed)
	}
	if m.Large.Bytes != calibrate.LargeBytes || m.Large.Seconds <= m.Small.Seconds || m.Large.CPUSeconds <= 0 {
		t.Errorf("samples: small %+v, large %+v", m.Small, m.Large)
	}
	// The small all-reduce again on 4 ranks, and sparse pairs coded
	// somewhere between 0.1 and 1000 ns each.
	if m.Many.N != calibrate.ManyRanks || m.Many.Bytes != calibrate.SmallBytes || m.Many.Seconds <= 0 || p.Message < 0 {
		t.Errorf("many ranks: %+v, %g s a message", m.Many, p.Message)
	}
	if p.Pair < 0.1e-9 || p.Pair > 1e-6 || p.Pair != m.PairSeconds {
		t.Errorf("%g s a sparse pair (measured %g)", p.Pair, m.PairSeconds)
	}
	r = meshtrain(ctx, nil, "--log-level", "error", "model", "predict", "--params", path, "-n", "4", "--bytes", "16M")
	if r.err != nil || !strings.Contains(r.stdout, "ring all-reduce") {
		t.Fatalf("predict from the calibration: %v", r)
	}
}
