package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// TestPointClass: tbf's bucket (netns.Rate.Burst) at 1.8 Gbit is 178 kB
// (64 KiB and 0.5 ms), at 100 Mbit 71.8 kB; a point counts as in the
// bucket only when each leg's bytes fit and matter.
func TestPointClass(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    Point
		want string
	}{
		// 150 kB at 215 MB/s is 0.7 ms of 1 ms: in the bucket.
		{"mid-size", Point{Rate: "1.8gbit", Bound: "bandwidth", Link: 150e3, Legs: 1, Predicted: 1e-3}, classBucket},
		// A gossip round: 150 kB each way, one leg after the other.
		{"two legs", Point{Rate: "1.8gbit", Bound: "bandwidth", Link: 300e3, Legs: 2, Predicted: 2e-3}, classBucket},
		// 200 kB in one leg: beyond the bucket.
		{"large", Point{Rate: "1.8gbit", Bound: "bandwidth", Link: 200e3, Legs: 1, Predicted: 1.2e-3}, classBandwidth},
		// 19 µs of 200 µs: the bytes do not matter.
		{"latency", Point{Rate: "1.8gbit", Bound: "latency", Link: 4096, Predicted: 200e-6}, classOther},
		// 75 kB at 100 Mbit, over its 71.8 kB bucket.
		{"100mbit", Point{Rate: "100mbit", Bound: "bandwidth", Link: 75e3, Legs: 1, Predicted: 6.2e-3}, classBandwidth},
		{"cpu", Point{Rate: "1gbit", Bound: "cpu", Link: 50e6, Predicted: 0.6}, classOther},
	} {
		if got := tc.p.class(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestLongCourseOnTwoHosts runs the course experiment small (2 hosts, a
// 1-step baseline, one dense run of 3 steps, 20 sparse steps) and checks
// every part of its report is there.
func TestLongCourseOnTwoHosts(t *testing.T) {
	longtest.Require(t, "the course's runs on two emulated hosts")
	if err := netns.Available(); err != nil {
		t.Skipf("no emulated hosts here: %v", err)
	}
	if testing.Short() {
		t.Skip("-short: 2 workers with 135 MB models")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	params := filepath.Join(dir, "cost.json")
	p := cost.Params{Alpha: 20e-6, Beta: 1e9, Gamma: 2e-9, Message: 40e-6, Pair: 3e-9, RankCores: 1}
	if err := calibrate.Save(params, calibrate.File{Params: p, Security: "tls"}); err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = out
	err = course(ctx, []string{"-n", "2", "-params", params, "-examples", "2000", "-baseline-steps", "1", "-dense-steps", "3", "-sparse-steps", "20"})
	os.Stdout = stdout
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("course: %v\n%s", err, b)
	}
	for _, want := range []string{"1 steps (start-up baseline)", "run 2: dense exchange, 3 steps", "bandwidth bound 628 ms",
		"CPU beyond the 1-step baseline", "run 3: sparse exchange, 20 steps", "model: step"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("no %q in\n%s", want, b)
		}
	}
}

// TestReplot draws the figure from a points file without measuring, and
// refuses points that do not say their γ.
func TestReplot(t *testing.T) {
	dir := t.TempDir()
	params := filepath.Join(dir, "cost.json")
	if err := calibrate.Save(params, calibrate.File{Params: cost.Params{Alpha: 20e-6, Beta: 1e9, Gamma: 2e-9, RankCores: 1}}); err != nil {
		t.Fatal(err)
	}
	write := func(pts []Point) string {
		b, err := json.Marshal(pts)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "in.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	pt := Point{Rate: "1gbit", N: 2, Op: "ring", Bytes: 1 << 20, Measured: 0.01, Alpha: 60e-6, Gamma: 2.4e-9}
	in := write([]Point{pt, {Rate: "1gbit", N: 4, Op: "gather", Bytes: 6000, Touched: 1000, Measured: 5e-4, Alpha: 60e-6, Gamma: 2.4e-9}})
	if err := validate(context.Background(), []string{"-params", params, "-replot", in, "-out", dir}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, "cost-model.png")); err != nil || st.Size() < 1000 {
		t.Errorf("figure: %v", err)
	}
	pt.Gamma = 0
	if err := validate(context.Background(), []string{"-params", params, "-replot", write([]Point{pt}), "-out", dir}); err == nil || !strings.Contains(err.Error(), "no γ") {
		t.Errorf("points without γ: %v, want an error saying so", err)
	}
}

// TestProbeTimes: a probe's time is the median of its runs' medians, the
// warm-up run discarded, so neither a slow first run on a fresh cluster
// nor one run slowed by the machine's other work moves it (the single run
// validate used to take was the warm-up's 900 µs here). The runs of a
// cluster alternate between its algorithms.
func TestProbeTimes(t *testing.T) {
	runs := map[collective.Algo][]float64{ // each run's time in µs, the warm-up first
		collective.Tree: {900, 432, 521, 516, 528, 732},
		collective.Star: {700, 240, 200, 210, 900, 205},
	}
	var order []collective.Algo
	got, err := probeTimes(4, []collective.Algo{collective.Tree, collective.Star}, 500, func(a collective.Algo, reps int) ([]float64, error) {
		i := 0
		for _, o := range order {
			if o == a {
				i++
			}
		}
		want := 500
		if i == 0 {
			want = tinyReps
		}
		if reps != want {
			t.Errorf("%v run %d: %d reps, want %d", a, i, reps, want)
		}
		order = append(order, a)
		return []float64{runs[a][i] * 1e-6, runs[a][i] * 0.9e-6, runs[a][i] * 1.1e-6}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{521e-6, 210e-6} {
		if math.Abs(got[i].Seconds-want) > 1e-9 || got[i].N != 4 || got[i].Bytes != 4096 {
			t.Errorf("probe %d: %+v, want %g s on 4 hosts", i, got[i], want)
		}
	}
	if len(order) != 2*(probeRuns+1) || order[0] == order[1] || order[2] == order[3] {
		t.Errorf("runs in the order %v: want %d, alternating", order, 2*(probeRuns+1))
	}
}

// TestLatencyProbesSpan: the probes fitLatency times vary rounds and
// messages on the busiest core apart and over the range the sweep's
// latency-bound operations have (a 4 KiB ring on 4 hosts: 6 rounds, 12
// messages on the 2 shared cores), so that neither term rests on one
// probe or on the difference of two.
func TestLatencyProbesSpan(t *testing.T) {
	q := cost.Params{Beta: 1e9, Message: 1, RankCores: 1, SharedCores: 2}
	rounds, msgs := map[float64]bool{}, map[float64]bool{}
	var maxRounds, maxMsgs float64
	for _, c := range latencyProbes {
		for _, a := range c.algos {
			tr := cost.Sample{Algo: a, N: c.n, Bytes: 4096}.Traffic()
			m := q.Estimate(tr).Latency
			rounds[tr.Rounds], msgs[m] = true, true
			maxRounds, maxMsgs = max(maxRounds, tr.Rounds), max(maxMsgs, m)
		}
	}
	if len(rounds) < 4 || len(msgs) < 4 || maxRounds < 6 || maxMsgs < 12 {
		t.Errorf("probes span rounds %v and messages %v: want at least 4 values of each, up to 6 rounds and 12 messages", rounds, msgs)
	}
}

// TestInRuns: the tiny points are timed in probeRuns runs of an equal
// share of their repetitions, pooled; the others in one run.
func TestInRuns(t *testing.T) {
	v := validation{reps: 5}
	gs := v.groups([]int64{4 << 10, 64 << 10, 256 << 10, 4 << 20})
	if len(gs) != 3 || gs[0].runs != probeRuns || gs[0].reps != 500 || gs[1].runs != 1 || gs[2].runs != 1 {
		t.Fatalf("groups %+v: want 4 and 64 KiB in %d runs of 500 in all, the rest in one", gs, probeRuns)
	}
	var calls []int
	got, err := inRuns(500, probeRuns, func(reps int) ([]netns.OpResult, error) {
		calls = append(calls, reps)
		secs := make([]float64, reps)
		for i := range secs {
			secs[i] = float64(len(calls)) // each run's own time
		}
		return []netns.OpResult{{Op: "gossip", Seconds: secs, CPUSeconds: float64(len(calls)), Averaged: 0.5}}, nil
	}, poolOp)
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) != probeRuns || calls[0] != 500/probeRuns {
		t.Errorf("runs of %v reps, want %d of %d", calls, probeRuns, 500/probeRuns)
	}
	if r := got[0]; len(r.Seconds) != 500 || r.Seconds[499] != probeRuns || r.CPUSeconds != 3 || r.Averaged != 0.5 {
		t.Errorf("pooled %d reps, last %g, CPU %g, averaged %g: want 500, %d, 3 (the mean), 0.5", len(r.Seconds), r.Seconds[499], r.CPUSeconds, r.Averaged, probeRuns)
	}
	_, err = inRuns(10, 2, func(reps int) ([]netns.OpResult, error) {
		calls = append(calls, reps)
		return make([]netns.OpResult, len(calls)%2+1), nil
	}, poolOp)
	if err == nil {
		t.Error("runs that measured different sizes pooled without an error")
	}
}
