package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
)

// TestModelPredictAndExtrapolate runs predict and extrapolate on a
// calibration file written by hand: the rows, the bounds, the PNG.
func TestModelPredictAndExtrapolate(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "cost.json")
	p := cost.Params{Alpha: 50e-6, Beta: 1e9, Gamma: 2e-9, Fixed: 30e-6, RankCores: 1}
	if err := calibrate.Save(params, calibrate.File{Params: p, Security: "tls"}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		app := newApp()
		var out bytes.Buffer
		app.Writer = &out
		if err := app.RunContext(context.Background(), append([]string{"meshtrain", "--log-level", "error", "model"}, args...)); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
		return out.String()
	}
	out := run("predict", "--params", params, "-n", "4", "--rate", "1.8gbit", "--features", "33762578", "--touched", "1000", "--compute", "1ms")
	for _, want := range []string{"β 215.2 MB/s", "ring all-reduce", "942 ms  bandwidth", "sparse all-gather (k=1000)", "step, sparse exchange", "latency"} {
		if !strings.Contains(out, want) {
			t.Errorf("predict: no %q in\n%s", want, out)
		}
	}
	// --rtt 1ms: α 500 µs instead of the file's 50.
	if out := run("predict", "--params", params, "-n", "2", "--rtt", "1ms", "--touched", "0"); !strings.Contains(out, "α 500 µs") {
		t.Errorf("predict --rtt 1ms: no α of 500 µs in\n%s", out)
	}
	png := filepath.Join(dir, "x.png")
	out = run("extrapolate", "--params", params, "--rate", "1gbit", "--max-n", "1000", "--png", png)
	if !strings.Contains(out, "gradient exchange: sparse wins for N = 2–1000") || !strings.Contains(out, "1000  2.47 s bandwidth") {
		t.Errorf("extrapolate:\n%s", out)
	}
	if st, err := os.Stat(png); err != nil || st.Size() < 1000 {
		t.Errorf("PNG: %v", err)
	}
	app := newApp()
	err := app.RunContext(context.Background(), []string{"meshtrain", "model", "predict", "--params", filepath.Join(dir, "missing.json")})
	if err == nil || !strings.Contains(err.Error(), "meshtrain model calibrate") {
		t.Errorf("missing calibration: %v, want an error saying to calibrate", err)
	}
}
