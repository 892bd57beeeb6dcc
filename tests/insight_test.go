package tests

import (
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// checkTrace reads a timeline and checks it is a trace of n peers: the
// Trace Event Format's object form, complete events with their
// microsecond timestamps and durations, a named process per peer, and
// a last-arrival mark at the combines when n > 1.
func checkTrace(t *testing.T, path string, n int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string   `json:"name"`
			Ph   string   `json:"ph"`
			Ts   *float64 `json:"ts"`
			Dur  *float64 `json:"dur"`
			Pid  *int     `json:"pid"`
			Tid  *int     `json:"tid"`
			Cat  string   `json:"cat"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("timeline %s is not JSON: %v", path, err)
	}
	procs, cats, marks := map[int]bool{}, map[string]bool{}, 0
	for _, e := range tr.TraceEvents {
		if e.Name == "" || e.Pid == nil || e.Tid == nil {
			t.Fatalf("event without name, pid or tid: %+v", e)
		}
		switch e.Ph {
		case "M":
			if e.Name == "process_name" {
				procs[*e.Pid] = true
			}
		case "X":
			if e.Ts == nil || e.Dur == nil || *e.Dur < 0 || *e.Ts < 0 {
				t.Fatalf("complete event %q without a timestamp or duration", e.Name)
			}
			cats[e.Cat] = true
		case "i":
			marks++
		default:
			t.Fatalf("phase %q", e.Ph)
		}
	}
	if len(procs) != n {
		t.Fatalf("%d processes in the timeline, want %d", len(procs), n)
	}
	for _, c := range []string{"input", "compute", "combine", "update", "evaluate"} {
		if !cats[c] {
			t.Errorf("no %s spans in the timeline (have %v)", c, cats)
		}
	}
	if n > 1 && marks == 0 {
		t.Error("no last-arrival marks")
	}
}

// TestLaunchNamesStragglerWithTimelineAndResources: a 3-peer launch with
// rank 2 slowed 4× ends with a verdict naming rank 2 (in the table and the
// summary JSON), a timeline of the 3 peers and a figure of their
// resources.
func TestLaunchNamesStragglerWithTimelineAndResources(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sum, tl := filepath.Join(dir, "summary.json"), filepath.Join(dir, "timeline.json")
	r := meshtrain(ctx, nil, "launch", "-n", "3", "--model", "softmax", "--epochs", "1", "--train-examples", "9600", "--test-examples", "1000",
		"--slow-peer", "2:4", "--summary", sum, "--timeline", tl)
	if r.err != nil {
		t.Fatalf("launch: %v\n%s", r.err, r)
	}
	if !strings.Contains(r.stdout, "bottleneck: straggler — rank 2") {
		t.Errorf("launch's output names no straggler:\n%s", r.stdout)
	}
	s := readSummary(t, sum)
	if s.Verdict == nil || s.Verdict.Resource != report.Straggler || s.Verdict.Rank != 2 {
		t.Errorf("summary verdict %+v, want a straggler at rank 2", s.Verdict)
	}
	for _, p := range s.Peers {
		if len(p.Resources) == 0 || p.Cores != runtime.NumCPU() || p.Host == "" {
			t.Errorf("rank %d: %d resource samples, cores %d, host %q", p.Rank, len(p.Resources), p.Cores, p.Host)
		}
	}
	checkTrace(t, tl, 3)
	f, err := os.Open(report.ResourcesPath(sum))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dy() < 3*200 {
		t.Fatalf("resources figure: %v, %v", err, img)
	}
}

// TestTrainVerdictTimeline: one worker computes, says so, and writes its
// timeline and summary with the verdict and resources.
func TestTrainVerdictTimeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	sum, tl, cal := filepath.Join(dir, "s.json"), filepath.Join(dir, "t.json"), filepath.Join(dir, "cost.json")
	if err := calibrate.Save(cal, calibrate.File{Params: cost.Params{Alpha: 50e-6, Beta: 1e9, Gamma: 1e-9, Message: 1e-6, RankCores: 1}}); err != nil {
		t.Fatal(err)
	}
	r := meshtrain(ctx, nil, "train", "--model", "lenet", "--epochs", "1", "--train-examples", "1600", "--test-examples", "200",
		"--summary", sum, "--timeline", tl, "--timeline-steps", "10", "--cost-params", cal)
	if r.err != nil {
		t.Fatalf("train: %v\n%s", r.err, r)
	}
	// Beside other tests' processes (go test runs packages at once) the
	// machine's load may be named instead: the rule's own test is
	// mirrored/report's TestVerdictKnowsTheHost.
	computed := strings.Contains(r.stdout, "bottleneck: compute") || strings.Contains(r.stdout, "bottleneck: "+report.Others)
	if !computed || !strings.Contains(r.stdout, "the cost model predicted") {
		t.Errorf("train's output has no compute verdict with the cost model's step:\n%s", r.stdout)
	}
	// A calibration named but missing is an error before any training.
	if r := meshtrain(ctx, nil, "train", "--cost-params", filepath.Join(dir, "none.json")); r.err == nil || !strings.Contains(r.stderr, "--cost-params") {
		t.Errorf("a missing --cost-params: %v\n%s", r.err, r)
	}
	var out struct {
		Steps     int             `json:"steps"`
		Verdict   *report.Verdict `json:"verdict"`
		Resources []any           `json:"resources"`
	}
	b, err := os.ReadFile(sum)
	if err != nil || json.Unmarshal(b, &out) != nil || out.Verdict == nil || (out.Verdict.Resource != report.Compute && out.Verdict.Resource != report.Others) || len(out.Resources) == 0 {
		t.Fatalf("summary: %v: %s", err, b)
	}
	checkTrace(t, tl, 1)
	// Bounded: 10 steps kept of 25.
	b, _ = os.ReadFile(tl)
	if n := strings.Count(string(b), `"name":"gradient"`); n == 0 || n > 10 {
		t.Errorf("%d gradient spans kept with --timeline-steps 10 (of %s steps)", n, strconv.Itoa(out.Steps))
	}
}

// TestLaunchMorePeersThanCores: more LeNet-5 peers on this machine than
// it has cores keep them all busy, and the verdict says they share them.
func TestLaunchMorePeersThanCores(t *testing.T) {
	n := runtime.NumCPU() + 2
	if n > 10 {
		t.Skipf("%d cores: too many peers to start here", n-2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sum := filepath.Join(t.TempDir(), "summary.json")
	// Batches of 256: computing, not the exchange, fills the step.
	r := meshtrain(ctx, nil, "launch", "-n", strconv.Itoa(n), "--model", "lenet", "--epochs", "1", "--batch", "256", "--train-examples", strconv.Itoa(256*n*16),
		"--test-examples", "500", "--summary", sum)
	if r.err != nil {
		t.Fatalf("launch: %v\n%s", r.err, r)
	}
	s := readSummary(t, sum)
	if s.Verdict == nil || s.Verdict.Resource != report.Shared {
		t.Fatalf("%d peers on %d cores: verdict %+v, want %q\n%s", n, runtime.NumCPU(), s.Verdict, report.Shared, r.stdout)
	}
}

// TestLaunchTimelineFourPeers: the timeline of a 4-peer run is one trace
// of the 4 peers, on one clock, with the last arrival at each combine.
func TestLaunchTimelineFourPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tl := filepath.Join(t.TempDir(), "timeline.json")
	r := meshtrain(ctx, nil, "launch", "-n", "4", "--model", "softmax", "--epochs", "1", "--train-examples", "6400", "--test-examples", "500",
		"--timeline", tl)
	if r.err != nil {
		t.Fatalf("launch: %v\n%s", r.err, r)
	}
	checkTrace(t, tl, 4)
}

// TestTimelineCombinePhases: a ring run's timeline splits every combine
// into the all-reduce's phases, reduce-scatter then all-gather, each
// nested in its combine span (the same peer and track, within its time).
func TestTimelineCombinePhases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tl := filepath.Join(t.TempDir(), "timeline.json")
	r := meshtrain(ctx, nil, "launch", "-n", "2", "--model", "softmax", "--epochs", "1", "--train-examples", "1280", "--test-examples", "200",
		"--allreduce-algo", "ring", "--gradient-bucket", "off", "--timeline", tl)
	if r.err != nil {
		t.Fatal(r)
	}
	checkTrace(t, tl, 2)
	b, err := os.ReadFile(tl)
	if err != nil {
		t.Fatal(err)
	}
	type event struct {
		Name     string  `json:"name"`
		Cat      string  `json:"cat"`
		Ph       string  `json:"ph"`
		Ts, Dur  float64 // microseconds
		Pid, Tid int
		Args     struct{ Step int }
	}
	var tr struct{ TraceEvents []event }
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	type key struct{ rank, step int }
	combines, phases := map[key]event{}, map[key][]event{}
	for _, e := range tr.TraceEvents {
		if e.Ph != "X" || e.Cat != "combine" {
			continue
		}
		k := key{e.Pid, e.Args.Step}
		if e.Name == "combine" {
			combines[k] = e
		} else {
			phases[k] = append(phases[k], e)
		}
	}
	if len(combines) != 2*10 { // 1280 examples, 2 peers × 64
		t.Fatalf("%d combine spans, want 10 steps on 2 peers", len(combines))
	}
	const slack = 0.002 // µs: the trace's float rounding
	for k, c := range combines {
		ps := phases[k]
		if len(ps) != 2 || ps[0].Name != "ring reduce-scatter" || ps[1].Name != "ring all-gather" {
			t.Errorf("rank %d step %d: phases %+v, want reduce-scatter then all-gather", k.rank, k.step, ps)
			continue
		}
		for _, p := range ps {
			if p.Tid != c.Tid || p.Ts < c.Ts-slack || p.Ts+p.Dur > c.Ts+c.Dur+slack {
				t.Errorf("rank %d step %d: %s at %.3f+%.3f µs is not within its combine at %.3f+%.3f", k.rank, k.step, p.Name, p.Ts, p.Dur, c.Ts, c.Dur)
			}
		}
		if ps[1].Ts < ps[0].Ts+ps[0].Dur-slack {
			t.Errorf("rank %d step %d: the all-gather starts before the reduce-scatter ends: %+v", k.rank, k.step, ps)
		}
	}
}
