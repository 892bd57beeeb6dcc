package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/internal/synth"
	"github.com/meshtrain/meshtrain/nn"
)

func TestGridPoints(t *testing.T) {
	none, slow := Straggler{}, Straggler{Rank: 1, Factor: 3}
	for _, tc := range []struct {
		name    string
		grid    Grid
		run     []string // Point.String of the points, in order
		skipped []string // "point: reason"
	}{
		{
			name: "the course grid, workers outer and batch inner",
			grid: Grid{Workers: []int{1, 2, 3}, Batches: []int{50, 100, 200}, Strategies: []string{"ring"}, Stragglers: []Straggler{none}},
			run: []string{
				"workers 1, batch 50, ring, no straggler", "workers 1, batch 100, ring, no straggler", "workers 1, batch 200, ring, no straggler",
				"workers 2, batch 50, ring, no straggler", "workers 2, batch 100, ring, no straggler", "workers 2, batch 200, ring, no straggler",
				"workers 3, batch 50, ring, no straggler", "workers 3, batch 100, ring, no straggler", "workers 3, batch 200, ring, no straggler",
			},
		},
		{
			name: "compare's grid: scenarios outer, strategies inner",
			grid: Grid{Workers: []int{3}, Batches: []int{64}, Strategies: []string{"ring", "gossip"}, Stragglers: []Straggler{none, slow}},
			run: []string{"workers 3, batch 64, ring, no straggler", "workers 3, batch 64, gossip, no straggler",
				"workers 3, batch 64, ring, straggler rank 1 ×3", "workers 3, batch 64, gossip, straggler rank 1 ×3"},
		},
		{
			name: "one worker under gossip or with a straggler makes no sense",
			grid: Grid{Workers: []int{1, 2}, Batches: []int{32}, Strategies: []string{"ring", "gossip"}, Stragglers: []Straggler{none, slow}},
			run: []string{"workers 1, batch 32, ring, no straggler", "workers 2, batch 32, ring, no straggler", "workers 2, batch 32, gossip, no straggler",
				"workers 2, batch 32, ring, straggler rank 1 ×3", "workers 2, batch 32, gossip, straggler rank 1 ×3"},
			skipped: []string{
				"workers 1, batch 32, gossip, no straggler: one worker has nobody to average with under gossip",
				"workers 1, batch 32, ring, straggler rank 1 ×3: one worker has nobody waiting for it: a straggler needs at least 2",
				"workers 1, batch 32, gossip, straggler rank 1 ×3: one worker has nobody to average with under gossip",
			},
		},
		{
			name:    "a straggler rank a point does not have",
			grid:    Grid{Workers: []int{2, 3}, Batches: []int{32}, Strategies: []string{"ring"}, Stragglers: []Straggler{{Rank: 2, Factor: 4}}},
			run:     []string{"workers 3, batch 32, ring, straggler rank 2 ×4"},
			skipped: []string{"workers 2, batch 32, ring, straggler rank 2 ×4: there is no rank 2 among 2 workers"},
		},
		{
			name: "factor 1 is no straggler",
			grid: Grid{Workers: []int{2}, Batches: []int{32}, Strategies: []string{"ring"}, Stragglers: []Straggler{{Rank: 1, Factor: 1}}},
			run:  []string{"workers 2, batch 32, ring, no straggler"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.grid.Check(); err != nil {
				t.Fatal(err)
			}
			run, skipped := tc.grid.Points()
			var got, gotSkipped []string
			for i, p := range run {
				got = append(got, p.String())
				if p.Index != i+1 {
					t.Errorf("point %d has index %d", i+1, p.Index)
				}
			}
			for _, s := range skipped {
				gotSkipped = append(gotSkipped, s.Point.String()+": "+s.Reason)
			}
			if !slices.Equal(got, tc.run) {
				t.Errorf("points\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.run, "\n"))
			}
			if !slices.Equal(gotSkipped, tc.skipped) {
				t.Errorf("skipped\n%s\nwant\n%s", strings.Join(gotSkipped, "\n"), strings.Join(tc.skipped, "\n"))
			}
		})
	}
}

func TestGridRejects(t *testing.T) {
	good := Grid{Workers: []int{1, 2}, Batches: []int{50}, Strategies: []string{"ring"}, Stragglers: []Straggler{{}}}
	for name, mut := range map[string]func(*Grid){
		"no workers":       func(g *Grid) { g.Workers = nil },
		"zero workers":     func(g *Grid) { g.Workers = []int{0, 1} },
		"zero batch":       func(g *Grid) { g.Batches = []int{0} },
		"unknown strategy": func(g *Grid) { g.Strategies = []string{"ps"} },
		"workers twice":    func(g *Grid) { g.Workers = []int{2, 2} },
		"strategy twice":   func(g *Grid) { g.Strategies = []string{"ring", "ring"} },
		"none twice":       func(g *Grid) { g.Stragglers = []Straggler{{}, {Rank: 1, Factor: 1}} },
	} {
		g := good
		mut(&g)
		if err := g.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := good.Check(); err != nil {
		t.Errorf("good grid: %v", err)
	}
}

func TestParseLists(t *testing.T) {
	if v, err := ParseInts("workers", "1, 2,3"); err != nil || !slices.Equal(v, []int{1, 2, 3}) {
		t.Errorf("ParseInts: %v, %v", v, err)
	}
	for _, bad := range []string{"", "1,x", "1.5"} {
		if _, err := ParseInts("batch", bad); err == nil || !strings.Contains(err.Error(), "--batch") {
			t.Errorf("ParseInts(%q): %v, want an error naming --batch", bad, err)
		}
	}
	if s, err := ParseStragglers("none,1:3"); err != nil || len(s) != 2 || !s[0].None() || s[1] != (Straggler{1, 3}) {
		t.Errorf("ParseStragglers: %v, %v", s, err)
	}
	for _, bad := range []string{"", "1", "1:x", "-1:3"} {
		if _, err := ParseStragglers(bad); err == nil {
			t.Errorf("ParseStragglers(%q): accepted", bad)
		}
	}
	if s, err := ParseStrategies("ring, gossip"); err != nil || !slices.Equal(s, []string{"ring", "gossip"}) {
		t.Errorf("ParseStrategies: %v, %v", s, err)
	}
	if _, err := ParseStrategies("ring,ps"); err == nil || !strings.Contains(err.Error(), `"ps"`) {
		t.Errorf("ParseStrategies(ring,ps): %v", err)
	}
}

// fakeRunner records the points it runs and makes up their figures; on
// the point numbered cancelAt it cancels the sweep's context and fails,
// as a Ctrl-C during that point does; the points in fail fail.
type fakeRunner struct {
	mu       sync.Mutex
	ran      []int
	cancelAt int
	cancel   context.CancelFunc
	fail     map[int]bool
}

func (*fakeRunner) Kind() string { return KindProcesses }

func (f *fakeRunner) Run(ctx context.Context, p Point, job mirrored.Job, logdir string) Outcome {
	f.mu.Lock()
	f.ran = append(f.ran, p.Index)
	f.mu.Unlock()
	if p.Index == f.cancelAt {
		f.cancel()
		return Outcome{Err: "interrupted"}
	}
	var o Outcome
	for r := range p.Workers {
		acc := 0.9 + 0.01*float64(p.Workers) - float64(p.Batch)/10000
		sum := &mirrored.Summary{
			Run: &mirrored.Result{Model: job.Model, BatchSize: job.BatchSize, TrainSeconds: float64(p.Batch) / 100 * float64(p.Workers), FinalAccuracy: acc,
				EpochResults: []mirrored.Epoch{{Epoch: 1, TestAccuracy: acc, TestLoss: 0.3, TrainSeconds: float64(p.Batch) / 100 * float64(p.Workers)}}},
			Peer: mirrored.PeerStats{Rank: r, Steps: 100, Examples: 100 * p.Batch, BytesSent: int64(1 << 20 * (p.Workers - 1)), BytesReceived: int64(1 << 20 * (p.Workers - 1)),
				CPUSeconds: 1, PeakRSSBytes: 100 << 20, ComputeSeconds: 0.5, CommSeconds: 0.1, Host: "h", Cores: 2, PID: 1000 + r,
				Resources: []mirrored.ResourceSample{{Seconds: 1, Interval: 1, CPUUser: 0.8, CPUSystem: 0.2, RSSBytes: 90 << 20}}},
		}
		pr := PeerRun{Rank: r, Summary: sum}
		if f.fail[p.Index] && r == 0 {
			pr.Err = fmt.Sprintf("rank %d: it broke", r)
		}
		o.Peers = append(o.Peers, pr)
	}
	return o
}

// TestResume: a sweep writes each finished point as it goes; run again
// with the same settings it skips the points already there (and says
// so), runs again those that failed, and continues an interrupted sweep
// at the point it was interrupted in; other settings or another grid in
// the same directory are refused, naming each difference, unless it
// starts afresh.
func TestResume(t *testing.T) {
	base := func(out string) Config {
		cfg := mirrored.DefaultConfigFor(nn.Softmax)
		cfg.Epochs, cfg.TrainExamples = 1, 500
		return Config{
			Grid: Grid{Workers: []int{1, 2}, Batches: []int{50, 100}, Strategies: []string{"ring"}, Stragglers: []Straggler{{}}},
			Job:  mirrored.Job{Config: cfg}, Security: p2p.SecurityTLS, Out: out, Resume: true,
		}
	}
	for _, tc := range []struct {
		name string
		// first runs a sweep into out before the one tested; nil: none.
		first func(t *testing.T, cfg Config)
		// change modifies the tested sweep's config.
		change func(*Config)
		// cancelAt interrupts the tested sweep in that point.
		cancelAt int
		ran      []int    // points the tested sweep runs
		in       []int    // points in results.json after it
		say      []string // in its progress
		err      string   // in its error ("": none)
	}{
		{name: "fresh directory", ran: []int{1, 2, 3, 4}, in: []int{1, 2, 3, 4}},
		{
			name: "the same sweep again skips every point", first: complete,
			ran: nil, in: []int{1, 2, 3, 4}, say: []string{"point 1/4: workers 1, batch 50, ring, no straggler: already in", "point 4/4: workers 2, batch 100, ring, no straggler: already in"},
		},
		{
			name: "interrupted, then resumed at the next point", first: interruptedAt(3),
			ran: []int{3, 4}, in: []int{1, 2, 3, 4}, say: []string{"point 2/4: workers 1, batch 100, ring, no straggler: already in", "point 3/4: workers 2, batch 50, ring, no straggler …"},
		},
		{
			name: "interrupted again", first: interruptedAt(2), cancelAt: 3,
			ran: []int{2, 3}, in: []int{1, 2}, err: context.Canceled.Error(), say: []string{"point 3/4: interrupted; 2 of 4 points are in"},
		},
		{
			name: "a failed point runs again", first: failing(2),
			ran: []int{2}, in: []int{1, 2, 3, 4}, say: []string{"point 2/4: workers 1, batch 100, ring, no straggler: failed before, running it again"},
		},
		{
			name: "other settings are refused", first: complete, change: func(c *Config) { c.Job.Epochs, c.Job.LR = 2, 0.5 },
			in: []int{1, 2, 3, 4}, err: "holds a sweep with other settings: epochs: 1 there, 2 here; lr: 0.02 there, 0.5 here",
		},
		{
			name: "another grid is refused", first: complete, change: func(c *Config) { c.Grid.Batches = []int{50, 100, 200} },
			in: []int{1, 2, 3, 4}, err: "batch: 50,100 there, 50,100,200 here",
		},
		{
			name: "the caller's settings too", first: complete, change: func(c *Config) { c.Settings = map[string]string{"allreduce-algo": "tree"} },
			in: []int{1, 2, 3, 4}, err: "allreduce-algo: unset there, tree here",
		},
		{
			name: "afresh, another grid replaces it", first: complete,
			change: func(c *Config) { c.Resume, c.Grid.Workers = false, []int{2} },
			ran:    []int{1, 2}, in: []int{1, 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			if tc.first != nil {
				tc.first(t, base(out))
			}
			cfg := base(out)
			if tc.change != nil {
				tc.change(&cfg)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			fr := &fakeRunner{cancelAt: tc.cancelAt, cancel: cancel}
			var progress strings.Builder
			cfg.Runner, cfg.Progress = fr, &progress
			_, err := Run(ctx, cfg)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one saying %q", err, tc.err)
			}
			if !slices.Equal(fr.ran, tc.ran) {
				t.Errorf("ran points %v, want %v\n%s", fr.ran, tc.ran, progress.String())
			}
			for _, s := range tc.say {
				if !strings.Contains(progress.String(), s) {
					t.Errorf("progress does not say %q:\n%s", s, progress.String())
				}
			}
			res, err := Load(filepath.Join(out, ResultsFile))
			if err != nil {
				t.Fatal(err)
			}
			var in []int
			for _, r := range res.Points {
				in = append(in, r.Index)
				if r.failed() {
					t.Errorf("point %d in results.json failed: %s", r.Index, r.Row.Errors)
				}
			}
			if !slices.Equal(in, tc.in) {
				t.Errorf("results.json holds points %v, want %v", in, tc.in)
			}
			if _, err := os.Stat(filepath.Join(out, ReportFile)); err != nil {
				t.Errorf("no report: %v", err)
			}
		})
	}
}

// complete runs the whole sweep.
func complete(t *testing.T, cfg Config) {
	t.Helper()
	cfg.Runner = &fakeRunner{}
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
}

// interruptedAt runs the sweep until Ctrl-C in point i.
func interruptedAt(i int) func(*testing.T, Config) {
	return func(t *testing.T, cfg Config) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cfg.Runner = &fakeRunner{cancelAt: i, cancel: cancel}
		if _, err := Run(ctx, cfg); !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted sweep: %v, want context.Canceled", err)
		}
	}
}

// failing runs the whole sweep with point i failing.
func failing(i int) func(*testing.T, Config) {
	return func(t *testing.T, cfg Config) {
		t.Helper()
		cfg.Runner = &fakeRunner{fail: map[int]bool{i: true}}
		res, err := Run(context.Background(), cfg)
		if err != nil || !res.Points[i-1].failed() {
			t.Fatalf("sweep with point %d failing: %v", i, err)
		}
	}
}

// TestNotASweep: a results.json that is not a sweep's is not resumed
// over.
func TestNotASweep(t *testing.T) {
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, ResultsFile), []byte(`{"n": 3, "runs": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := mirrored.DefaultConfigFor(nn.Softmax)
	_, err := Run(context.Background(), Config{Grid: Grid{Workers: []int{1}, Batches: []int{50}, Strategies: []string{"ring"}, Stragglers: []Straggler{{}}},
		Job: mirrored.Job{Config: cfg}, Out: out, Resume: true, Runner: &fakeRunner{}})
	if err == nil || !strings.Contains(err.Error(), "not a sweep's results") {
		t.Errorf("error %v, want one saying results.json is not a sweep's", err)
	}
}

// TestSweepInProcess runs a small real sweep (2 × 2 points, in-process
// replicas on generated data) and checks the report: a row per point
// with every column, results.json with every row's figures, and plots
// that decode, with room for their legends beside the axes.
func TestSweepInProcess(t *testing.T) {
	cfg := mirrored.DefaultConfigFor(nn.Softmax)
	cfg.Epochs, cfg.MNIST, cfg.Shards = 2, synth.MNIST(960, 200, rand.New(rand.NewPCG(1, 2))), 1
	out := t.TempDir()
	if dir := os.Getenv("MESHTRAIN_SWEEP_OUT"); dir != "" {
		out = dir // keep the report to look at
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var progress strings.Builder
	res, err := Run(ctx, Config{
		Grid: Grid{Workers: []int{1, 2}, Batches: []int{16, 32}, Strategies: []string{"ring", "gossip"}, Stragglers: []Straggler{{}}},
		Job:  mirrored.Job{Config: cfg}, Target: 0.9, Security: p2p.SecurityPlaintext, Timeout: 20 * time.Second,
		Runner: &InProcess{Security: p2p.SecurityPlaintext, Timeout: 20 * time.Second, Logger: zaptest.NewLogger(t)},
		Out:    out, Progress: &progress, Logger: zaptest.NewLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + progress.String())
	if len(res.Points) != 6 || len(res.Skipped) != 2 {
		t.Fatalf("%d points and %d skipped, want 6 (1 worker × ring, 2 × both) and 2 (1 worker × gossip)", len(res.Points), len(res.Skipped))
	}
	md, err := os.ReadFile(filepath.Join(out, ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	header := "| " + strings.Join(Columns(0.9), " | ") + " |"
	if !strings.Contains(string(md), header) {
		t.Errorf("report.md has no table headed\n%s\n%s", header, md)
	}
	rows := regexp.MustCompile(`(?m)^\| \d+ \|.*\|$`).FindAllString(string(md), -1)
	if len(rows) != 6 {
		t.Errorf("%d rows, want 6:\n%s", len(rows), md)
	}
	for _, row := range rows {
		cells := strings.Split(strings.Trim(row, "|"), "|")
		if len(cells) != len(Columns(0.9)) {
			t.Errorf("row %q has %d cells, want %d", row, len(cells), len(Columns(0.9)))
		}
		for i, c := range cells {
			// "—" only for the CPU of a run under 0.2 s (these
			// are), the memory of one too short for a sample (in-process
			// replicas have no getrusage peak of their own) and the time
			// to a target not reached.
			if c = strings.TrimSpace(c); c == "" || (c == "—" && i != 5 && i != 6 && i != 12) {
				t.Errorf("row %q: column %q is empty", row, Columns(0.9)[i])
			}
		}
	}
	for _, want := range []string{"one worker has nobody to average with under gossip", "## Ring and gossip", "| 2 workers, batch 16, gossip, baseline |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Points []struct {
			Row map[string]any `json:"row"`
		} `json:"points"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || len(raw.Points) != 6 {
		t.Fatalf("results.json: %v, %d points", err, len(raw.Points))
	}
	for i, p := range raw.Points {
		for _, k := range []string{"cpu_cores", "peak_rss_bytes", "bytes_received_per_peer", "bytes_sent_per_peer", "test_loss", "test_accuracy", "train_seconds", "time_to_target_seconds", "verdict"} {
			if _, ok := p.Row[k]; !ok {
				t.Errorf("point %d's row in results.json has no %q", i+1, k)
			}
		}
	}
	for _, r := range res.Points {
		row := r.Row
		if row.Errors != "" || row.CPUCores <= 0 || row.PeakRSSBytes < 0 || math.IsNaN(float64(row.TestAccuracy)) || row.Verdict == "" {
			t.Errorf("point %s: row %+v", r.Point, row)
		}
		if (r.Workers > 1) != (row.SentBytes > 0 && row.ReceivedBytes > 0) {
			t.Errorf("point %s: sent %d, received %d", r.Point, row.SentBytes, row.ReceivedBytes)
		}
	}
	for _, name := range []string{"time_vs_workers.png", "throughput_vs_workers.png", "cpu_vs_workers.png", "network_vs_workers.png",
		"accuracy_vs_time_baseline.png", "accuracy_vs_epochs_baseline.png", "consensus_baseline_w2_b16.png"} {
		f, err := os.Open(filepath.Join(out, name))
		if err != nil {
			t.Error(err)
			continue
		}
		cfg, err := png.DecodeConfig(f)
		f.Close()
		if err != nil || cfg.Width <= int(axesWidth.Dots(96)) {
			t.Errorf("%s: %v, %d pixels wide: want the axes and a legend column beside them", name, err, cfg.Width)
		}
	}
}

// TestPlotLayout: a figure's legend gets a column as wide as its longest
// entry beside the axes (never over the data), a title too long for the
// axes is set smaller until it fits, and a long legend makes the figure
// taller rather than running off its foot.
func TestPlotLayout(t *testing.T) {
	p := newPlot(strings.Repeat("a long title ", 9), "x", "y")
	l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		p.Legend.Add(fmt.Sprintf("2 workers, batch %d, gossip, straggler rank 1 ×3 rank %d", i, i%3), l)
	}
	lay := layoutOf(p)
	leg := p.Legend
	leg.TextStyle.Font.Size = vg.Points(legendFont)
	r := leg.Rectangle(draw.Canvas{})
	if lay.legendWidth < r.Max.X-r.Min.X || lay.width < axesWidth+lay.legendWidth {
		t.Errorf("legend %v wide in a column of %v, figure %v wide: want the axes (%v) and the whole legend side by side", r.Max.X-r.Min.X, lay.legendWidth, lay.width, axesWidth)
	}
	ts := p.Title.TextStyle
	ts.Font.Size = lay.titleSize
	if lay.titleSize >= p.Title.TextStyle.Font.Size || ts.Width(p.Title.Text) > axesWidth {
		t.Errorf("title at %v is %v wide over axes %v wide: want it set smaller until it fits", lay.titleSize, ts.Width(p.Title.Text), axesWidth)
	}
	if lay.height < r.Max.Y-r.Min.Y {
		t.Errorf("figure %v tall for a legend %v tall", lay.height, r.Max.Y-r.Min.Y)
	}
	path := filepath.Join(t.TempDir(), "p.png")
	if err := save(p, path); err != nil {
		t.Fatal(err)
	}
}
