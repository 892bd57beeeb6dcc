package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/inputfile"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
)

// Format is the format of results.json.
const Format = "meshtrain-sweep/1"

// ResultsFile is the name of the results in the output directory.
const ResultsFile = "results.json"

// Config is one sweep.
type Config struct {
	// Grid is what varies; every point runs Job with the point's workers,
	// batch size, strategy and straggler, and nothing else changed.
	Grid Grid
	// Job is the training run every point shares (model, data, seed,
	// epochs, learning rate, ...); its Strategy, BatchSize and Faults are
	// the point's.
	// Its TargetAccuracy, if set, stops each run early. Checkpoints are
	// not used.
	Job mirrored.Job
	// Gossip holds the gossip settings of the points that gossip.
	Gossip mirrored.Gossip
	// ScaleLR multiplies Job.LR by the point's workers (the linear
	// scaling rule) for runners that take the Job as it is (InProcess;
	// Processes' workers apply --scale-lr themselves).
	ScaleLR bool
	// Target is the test accuracy whose time-to is reported (default:
	// Job.TargetAccuracy, else DefaultTarget of the model).
	Target float64
	// Security of the links (for the report, the verdict and InProcess).
	Security p2p.Security
	// Timeout is the collective timeout (InProcess).
	Timeout time.Duration
	// Runner runs each point (InProcess or Processes).
	Runner Runner
	// Out is the report directory (created).
	Out string
	// Resume keeps the points already in Out's results.json with the
	// same grid and settings, and refuses (a *SettingsError) one with
	// others; without it a sweep starts afresh.
	Resume bool
	// Title heads the report (default: "Sweep: MODEL").
	Title string
	// Settings are the caller's other settings that a resumed sweep must
	// share (flag name → value), beside those of Job and Grid.
	Settings map[string]string
	// Progress receives a line as each point starts and ends; Logger the
	// runs' logs.
	Progress io.Writer
	Logger   *zap.Logger
	// LogDir, if set, receives every point's TensorBoard event files, in
	// a run directory per point (the runners' logdir).
	LogDir string
}

// Runner runs the points of a sweep.
type Runner interface {
	// Kind says how: "in-process" or "processes".
	Kind() string
	// Run runs job as point p (job carries the point's batch size,
	// strategy and straggler) and returns every peer's outcome; a run
	// that fails is reported in the Outcome, not returned. Its replicas
	// write TensorBoard event files under logdir, if set (a worker
	// directory each).
	Run(ctx context.Context, p Point, job mirrored.Job, logdir string) Outcome
}

// Outcome is one run of a point.
type Outcome struct {
	Peers []PeerRun
	// Err is the run's own error, beside its peers' (a launch's).
	Err string
}

// PeerRun is one replica's outcome.
type PeerRun struct {
	Rank    int                    `json:"rank"`
	Summary *mirrored.Summary      `json:"summary,omitempty"`
	Gossip  *mirrored.GossipReport `json:"gossip,omitempty"`
	Err     string                 `json:"error,omitempty"`
}

// Result is one finished point.
type Result struct {
	Point
	// Started is when it started (RFC 3339), Load the machine's load
	// average then, WallSeconds the whole run, start-up included.
	Started     string  `json:"started"`
	Load        string  `json:"load_average"`
	WallSeconds float64 `json:"wall_seconds"`
	// Error is the run's own error, beside its peers'.
	Error string `json:"error,omitempty"`
	// Row is the report table's row (recomputed from Peers whenever the
	// results are written).
	Row   Row       `json:"row"`
	Peers []PeerRun `json:"peers"`
}

// failed says whether any part of the run failed.
func (r *Result) failed() bool {
	if r.Error != "" {
		return true
	}
	for _, p := range r.Peers {
		if p.Err != "" || p.Summary == nil {
			return true
		}
	}
	return len(r.Peers) == 0
}

// Results is a sweep's results.json: its settings, its grid and the
// points finished so far, in the grid's order.
type Results struct {
	Format string `json:"format"`
	Title  string `json:"title"`
	Model  string `json:"model"`
	// Target is the accuracy whose time-to is reported.
	Target float64 `json:"target_accuracy"`
	// Runner says how the points ran ("in-process", "processes");
	// Security the links'; Cores this machine's logical CPUs.
	Runner   string `json:"runner"`
	Security string `json:"security"`
	Cores    int    `json:"cores"`
	// Settings must match for a sweep to resume (flag name → value).
	Settings map[string]string `json:"settings"`
	Grid     Grid              `json:"grid"`
	// Skipped are the grid's combinations that make no sense.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Total is how many points the grid runs; Points those finished.
	Total  int       `json:"points_total"`
	Points []*Result `json:"points"`
	// Job is the shared run's settings, for the report (not saved: the
	// settings say it).
	job    mirrored.Job
	gossip mirrored.Gossip
}

// SettingsError says an output directory holds the results of a sweep
// with other settings or another grid.
type SettingsError struct {
	Path string
	// Diffs name each difference: "epochs: 2 there, 1 here".
	Diffs []string
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("%s holds a sweep with other settings: %s", e.Path, strings.Join(e.Diffs, "; "))
}

// DefaultTarget is the target accuracy for a model: one the default
// recipe reaches within an epoch or two of MNIST, below where the model
// levels off (BENCHMARKS.md, "Figures behind the code": compare's
// targets), so that time to target is measured rather than "not reached".
func DefaultTarget(model string) float64 {
	if model == nn.Softmax {
		return 0.90
	}
	return 0.97
}

func (c *Config) check() error {
	if err := c.Grid.Check(); err != nil {
		return err
	}
	if c.Runner == nil {
		return errors.New("sweep: no runner")
	}
	if c.Job.CheckpointDir != "" || c.Job.Restore != "" {
		return errors.New("sweep: checkpoints are not used in sweeps: drop --checkpoint-dir and --restore")
	}
	if c.Out == "" {
		return errors.New("sweep: --out DIR is required (the report directory)")
	}
	if c.Target == 0 {
		c.Target = c.Job.TargetAccuracy
	}
	if c.Target == 0 {
		c.Target = DefaultTarget(c.Job.Model)
	}
	if !(c.Target > 0 && c.Target <= 1) {
		return fmt.Errorf("sweep: target accuracy %v: want a fraction in (0, 1]", c.Target)
	}
	if c.Timeout <= 0 {
		c.Timeout = collective.DefaultTimeout
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Title == "" {
		c.Title = "Sweep: " + c.Job.Model
	}
	// The gossip knobs left at zero are gossip's defaults: the report and
	// the settings show the values that ran.
	c.Gossip = c.Gossip.WithDefaults()
	points, _ := c.Grid.Points()
	for _, p := range points {
		job := c.pointJob(p)
		if err := job.Validate(); err != nil {
			return fmt.Errorf("sweep: %s: %w", p, err)
		}
		if err := job.Faults.Validate(p.Workers); err != nil {
			return fmt.Errorf("sweep: %s: %w", p, err)
		}
	}
	return nil
}

// pointJob is the job of point p.
func (c *Config) pointJob(p Point) mirrored.Job {
	job := c.Job
	job.BatchSize = p.Batch
	job.Strategy = mirrored.Ring{}
	if p.Strategy == mirrored.StrategyGossip {
		job.Strategy = c.Gossip
	}
	job.Faults = mirrored.Faults{}
	if !p.Straggler.None() {
		job.Faults = mirrored.Faults{SlowRank: p.Straggler.Rank, SlowFactor: p.Straggler.Factor}
	}
	if c.ScaleLR {
		job.LR *= float64(p.Workers)
	}
	job.Progress = nil
	return job
}

// pointLogDir is point p's TensorBoard directory: a run directory per
// point under LogDir ("" without one).
func (c *Config) pointLogDir(p Point) string {
	if c.LogDir == "" {
		return ""
	}
	return filepath.Join(c.LogDir, c.Grid.logName(p))
}

// settings are what a resumed sweep must share: the grid, the job's
// settings, the target, the links and how the points run, and the
// caller's Settings.
func (c *Config) settings() map[string]string {
	j := c.Job
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	s := map[string]string{
		"workers": join(c.Grid.Workers), "batch": join(c.Grid.Batches), "strategies": join(c.Grid.Strategies),
		"slow-peer": join(c.Grid.Stragglers),
		"model":     j.Model, "epochs": strconv.Itoa(j.Epochs), "lr": f(j.LR), "scale-lr": strconv.FormatBool(c.ScaleLR),
		"optimizer": j.Optimizer, "momentum": f(j.Momentum), "weight-decay": f(j.WeightDecay),
		"lr-schedule": j.Schedule, "lr-gamma": f(j.LRGamma), "lr-decay-epochs": f(j.LRDecayEpochs),
		"warmup-epochs": f(j.WarmupEpochs), "min-lr": f(j.MinLR), "seed": strconv.FormatInt(j.Seed, 10),
		"train-examples": strconv.Itoa(j.TrainExamples), "test-examples": strconv.Itoa(j.TestExamples),
		"target-accuracy": f(j.TargetAccuracy), "target-loss": f(j.TargetLoss), "target": f(c.Target),
		"hash-every": strconv.Itoa(j.HashEvery), "measure-wait": strconv.FormatBool(j.MeasureWait),
		"gradient-bucket": strconv.Itoa(j.GradientBucket),
		"security":        string(c.Security), "runner": c.Runner.Kind(),
	}
	if slices.Contains(c.Grid.Strategies, mirrored.StrategyGossip) {
		g := c.Gossip
		s["gossip-schedule"], s["gossip-every"], s["gossip-max-staleness"] = g.Schedule, strconv.Itoa(g.Every), strconv.Itoa(g.MaxStaleness)
		s["gossip-wait"], s["gossip-max-skip"] = strconv.FormatBool(g.WaitForAverage), strconv.Itoa(g.MaxSkip)
	}
	for k, v := range c.Settings {
		s[k] = v
	}
	return s
}

// diffSettings names the settings that differ between there (a results
// file's) and here, in name order.
func diffSettings(there, here map[string]string) []string {
	var names []string
	for k := range there {
		names = append(names, k)
	}
	for k := range here {
		if _, ok := there[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	show := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return v
		}
		return "unset"
	}
	var diffs []string
	for _, k := range names {
		if a, b := show(there, k), show(here, k); a != b {
			diffs = append(diffs, fmt.Sprintf("%s: %s there, %s here", k, a, b))
		}
	}
	return diffs
}

// ErrNotSweep says a results file is not a sweep's.
var ErrNotSweep = errors.New("not a sweep's results")

// MaxResultsBytes caps a results file: a sweep's thousand points with
// every peer's figures take a few megabytes.
const MaxResultsBytes = 64 << 20

// Load reads a sweep's results file.
func Load(path string) (*Results, error) {
	b, err := inputfile.ReadFileMax(path, MaxResultsBytes)
	if err != nil {
		return nil, err
	}
	r, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// Parse reads a sweep's results from their JSON.
func Parse(b []byte) (*Results, error) {
	var r Results
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotSweep, err)
	}
	if r.Format != Format {
		return nil, fmt.Errorf("%w (format %q, want %q)", ErrNotSweep, r.Format, Format)
	}
	for i, p := range r.Points {
		if p == nil {
			return nil, fmt.Errorf("%w (point %d is null)", ErrNotSweep, i+1)
		}
	}
	return &r, nil
}

// Run runs every point of cfg's grid, one after the other, each a full
// run through cfg.Runner, and after each writes results.json (atomically)
// and the report (report.md and its plots) into cfg.Out. With
// cfg.Resume, points already finished in cfg.Out's results.json are kept
// and not run again (a point that failed runs again). A point that fails
// is reported, not fatal. When ctx ends, the point under way is
// dropped and Run returns ctx's error with the results so far saved.
func Run(ctx context.Context, cfg Config) (*Results, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := cfg.Grid.Runnable(); err != nil {
		return nil, err
	}
	points, skipped := cfg.Grid.Points()
	res := &Results{Format: Format, Title: cfg.Title, Model: cfg.Job.Model, Target: cfg.Target, Runner: cfg.Runner.Kind(),
		Security: string(cfg.Security), Cores: runtime.NumCPU(), Settings: cfg.settings(), Grid: cfg.Grid, Skipped: skipped,
		Total: len(points), job: cfg.Job, gossip: cfg.Gossip}
	path := filepath.Join(cfg.Out, ResultsFile)
	slots := make([]*Result, len(points)) // by point, nil until finished
	if cfg.Resume {
		old, err := Load(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			if diffs := diffSettings(old.Settings, res.Settings); len(diffs) > 0 {
				return nil, &SettingsError{Path: path, Diffs: diffs}
			}
			for _, r := range old.Points {
				if i := slices.IndexFunc(points, func(p Point) bool { return p.key() == r.key() }); i >= 0 {
					r.Point = points[i]
					slots[i] = r
				}
			}
		}
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("sweep: creating the report directory: %w", err)
	}
	for _, s := range skipped {
		fmt.Fprintf(cfg.Progress, "skipping %s: %s\n", s.Point, s.Reason)
	}
	save := func() error {
		res.Points = res.Points[:0]
		for _, r := range slots {
			if r != nil {
				r.Row = rowOf(r, res)
				res.Points = append(res.Points, r)
			}
		}
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return fmt.Errorf("sweep: encoding the results: %w", err)
		}
		if err := atomicfile.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("sweep: %w", err)
		}
		return writeReport(cfg.Out, res)
	}
	n := len(points)
	for i, p := range points {
		if r := slots[i]; r != nil && !r.failed() {
			fmt.Fprintf(cfg.Progress, "point %d/%d: %s: already in %s (%s), skipped\n", p.Index, n, p, path, brief(r, res))
			continue
		} else if r != nil {
			fmt.Fprintf(cfg.Progress, "point %d/%d: %s: failed before, running it again\n", p.Index, n, p)
		} else {
			fmt.Fprintf(cfg.Progress, "point %d/%d: %s …\n", p.Index, n, p)
		}
		start := time.Now()
		r := &Result{Point: p, Started: start.UTC().Format(time.RFC3339), Load: rusage.LoadAverage()}
		out := cfg.Runner.Run(ctx, p, cfg.pointJob(p), cfg.pointLogDir(p))
		r.WallSeconds = time.Since(start).Seconds()
		r.Peers, r.Error = out.Peers, out.Err
		if ctx.Err() != nil && r.failed() { // interrupted: the point did not finish
			fmt.Fprintf(cfg.Progress, "point %d/%d: interrupted; %d of %d points are in %s\n", p.Index, n, finished(slots), n, path)
			return res, ctx.Err()
		}
		slots[i] = r
		if err := save(); err != nil {
			return res, err
		}
		fmt.Fprintf(cfg.Progress, "point %d/%d: done in %.1fs: %s\n", p.Index, n, r.WallSeconds, brief(r, res))
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	if err := save(); err != nil { // the report, also when every point was there already
		return res, err
	}
	return res, nil
}

func finished(slots []*Result) int {
	n := 0
	for _, r := range slots {
		if r != nil && !r.failed() {
			n++
		}
	}
	return n
}

// brief is a point's outcome in a few words, for the progress lines.
func brief(r *Result, res *Results) string {
	row := rowOf(r, res)
	if row.Errors != "" {
		return "failed: " + row.Errors
	}
	tt := "not reached"
	if !math.IsNaN(float64(row.TimeToTarget)) {
		tt = fmt.Sprintf("%.1fs", float64(row.TimeToTarget))
	}
	return fmt.Sprintf("accuracy %s, test loss %s, training %.1fs, time to %.1f%% %s, bottleneck %s",
		fmtPct(float64(row.TestAccuracy)), fmtFloat(float64(row.TestLoss), "%.4f"), float64(row.TrainSeconds), 100*res.Target, tt, row.bottleneck())
}
