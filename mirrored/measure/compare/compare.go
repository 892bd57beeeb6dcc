package compare

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/measure/sweep"
)

// Config is one comparison: every strategy, with and without the
// straggler, on the same data, seed and N.
type Config struct {
	// N is the number of replicas (≥ 2).
	N int
	// Job is the training run (identical for every strategy); its
	// TargetAccuracy, if set, stops each run early. Checkpoints are not
	// used.
	Job mirrored.Job
	// Strategies to compare, e.g. ring and gossip.
	Strategies []string
	// Gossip holds the gossip settings (schedule, every, staleness) of
	// the gossip runs.
	Gossip mirrored.Gossip
	// SlowRank and SlowFactor describe the straggler scenario; a factor
	// ≤ 1 runs only the scenario without one.
	SlowRank   int
	SlowFactor float64
	// Target is the test accuracy whose time-to is reported (default:
	// Job.TargetAccuracy, else DefaultTarget of the model).
	Target float64
	// Security of the libp2p links, and the collective timeout.
	Security p2p.Security
	Timeout  time.Duration
	// Out is the report directory (created).
	Out string
	// Progress receives a line as each run starts and ends; Logger the
	// replicas' logs.
	Progress io.Writer
	Logger   *zap.Logger
	// LogDir, if set, receives TensorBoard event files: a run directory
	// per strategy and scenario, a worker directory per replica; LogEvery
	// is the steps between the per-step scalars (0: the default).
	LogDir   string
	LogEvery int
}

// Report is a finished comparison: the sweep's results (a point per
// strategy and scenario, in the order they ran) and where its report is.
type Report struct {
	*sweep.Results
	Markdown string `json:"-"` // path of report.md
}

func (c *Config) check() error {
	if c.N < 2 {
		return fmt.Errorf("compare: -n %d: want at least 2 replicas", c.N)
	}
	if len(c.Strategies) == 0 {
		return errors.New("compare: no strategies: want e.g. --strategies ring,gossip")
	}
	seen := map[string]bool{}
	for _, s := range c.Strategies {
		if !slices.Contains(mirrored.Strategies, s) {
			return fmt.Errorf("compare: strategy %q: want ring or gossip", s)
		}
		if seen[s] {
			return fmt.Errorf("compare: strategy %q listed twice", s)
		}
		seen[s] = true
	}
	if c.Job.CheckpointDir != "" || c.Job.Restore != "" {
		return errors.New("compare: checkpoints are not used in comparisons: drop --checkpoint-dir and --restore")
	}
	if c.Out == "" {
		return errors.New("compare: --out DIR is required (the report directory)")
	}
	if c.Target != 0 && !(c.Target > 0 && c.Target <= 1) {
		return fmt.Errorf("compare: target accuracy %v: want a fraction in (0, 1]", c.Target)
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Timeout <= 0 {
		c.Timeout = collective.DefaultTimeout
	}
	if err := c.Gossip.Validate(); err != nil {
		return err
	}
	f := mirrored.Faults{SlowRank: c.SlowRank, SlowFactor: c.SlowFactor}
	return f.Validate(c.N)
}

// DefaultTarget is the comparison's target accuracy for a model
// (sweep.DefaultTarget).
func DefaultTarget(model string) float64 { return sweep.DefaultTarget(model) }

// join brings a replica up (a variable, so that tests can make its
// transport fail).
var join = p2p.Join

// Compare is a sweep over the strategies and the two scenarios (without
// and, if configured, with the straggler) at one N and batch size: it
// runs every strategy without and then with the straggler, one after the
// other, each as N in-process replicas linked by libp2p over 127.0.0.1
// (sweep.InProcess), then writes report.md, results.json and the PNG
// plots into cfg.Out through the sweep's report. A run that fails is
// reported, not fatal. A comparison always starts afresh in cfg.Out.
func Compare(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	job := cfg.Job
	if job.MNIST == nil && job.Sparse == nil { // once, for every run (and the report's counts)
		mn, err := data.OpenImages(ctx, job.Data, job.ImageOptions(cfg.Logger.Named("data")))
		if err != nil {
			return nil, err
		}
		job.MNIST = mn
	}
	stragglers := []sweep.Straggler{{}}
	if cfg.SlowFactor > 1 {
		stragglers = append(stragglers, sweep.Straggler{Rank: cfg.SlowRank, Factor: cfg.SlowFactor})
	}
	res, err := sweep.Run(ctx, sweep.Config{
		Grid: sweep.Grid{Workers: []int{cfg.N}, Batches: []int{job.BatchSize}, Strategies: cfg.Strategies, Stragglers: stragglers},
		Job:  job, Gossip: cfg.Gossip, Target: cfg.Target, Security: cfg.Security, Timeout: cfg.Timeout,
		Runner: &sweep.InProcess{Security: cfg.Security, Timeout: cfg.Timeout, Join: join, Logger: cfg.Logger, LogEvery: cfg.LogEvery},
		Out:    cfg.Out, Title: fmt.Sprintf("Ring versus gossip: %s, N = %d", job.Model, cfg.N),
		Progress: cfg.Progress, Logger: cfg.Logger, LogDir: cfg.LogDir,
	})
	if err != nil {
		return nil, err
	}
	return &Report{Results: res, Markdown: filepath.Join(cfg.Out, sweep.ReportFile)}, nil
}
