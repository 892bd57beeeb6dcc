package compare

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/nn"
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
	// Gossip holds the gossip settings (schedule, every, staleness); its
	// Name is set by each run.
	Gossip mirrored.Strategy
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
	// Progress receives one line per run; Logger the replicas' logs.
	Progress io.Writer
	Logger   *zap.Logger
}

// Run is one strategy in one scenario.
type Run struct {
	Strategy string    `json:"strategy"`
	Scenario string    `json:"scenario"` // "baseline" or "straggler"
	Slow     string    `json:"slow_peer"`
	Peers    []PeerRun `json:"peers"`
	// WallSeconds is the whole cluster's run, start-up included.
	WallSeconds float64 `json:"wall_seconds"`
}

// PeerRun is one replica's outcome.
type PeerRun struct {
	Rank    int                    `json:"rank"`
	Summary *mirrored.Summary      `json:"summary,omitempty"`
	Gossip  *mirrored.GossipReport `json:"gossip,omitempty"`
	Err     string                 `json:"error,omitempty"`
}

// Report is a finished comparison.
type Report struct {
	N        int     `json:"n"`
	Model    string  `json:"model"`
	Target   float64 `json:"target_accuracy"`
	Runs     []*Run  `json:"runs"`
	Markdown string  `json:"-"` // path of report.md
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
		if s != mirrored.StrategyRing && s != mirrored.StrategyGossip {
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
	if c.Target == 0 {
		c.Target = c.Job.TargetAccuracy
	}
	if c.Target == 0 {
		c.Target = DefaultTarget(c.Job.Model)
	}
	if !(c.Target > 0 && c.Target <= 1) {
		return fmt.Errorf("compare: target accuracy %v: want a fraction in (0, 1]", c.Target)
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
	for _, s := range c.Strategies {
		if !slices.Contains(mirrored.Strategies, s) {
			return fmt.Errorf("compare: strategy %q: want some of %v", s, mirrored.Strategies)
		}
	}
	c.Gossip.Name = mirrored.StrategyGossip
	if err := c.Gossip.Validate(); err != nil {
		return err
	}
	f := mirrored.Faults{SlowRank: c.SlowRank, SlowFactor: c.SlowFactor}
	return f.Validate(c.N)
}

// DefaultTarget is the comparison's target accuracy for a model: one the
// default recipe reaches within an epoch or two of MNIST, below where the
// model levels off (BENCHMARKS.md, "Figures behind the code": compare's
// targets), so that time to target is measured rather than "not reached".
func DefaultTarget(model string) float64 {
	if model == nn.Softmax {
		return 0.90
	}
	return 0.97
}

// Compare runs every strategy of cfg without and (if configured) with the
// straggler, one after the other, each as N in-process replicas linked by
// libp2p over 127.0.0.1, then writes report.md, results.json and the PNG
// plots into cfg.Out. A run that fails is reported, not fatal.
func Compare(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("compare: creating the report directory: %w", err)
	}
	job := cfg.Job
	if job.MNIST == nil {
		mn, err := data.LoadMNIST(ctx, job.MNISTOptions(cfg.Logger.Named("data")))
		if err != nil {
			return nil, err
		}
		job.MNIST = mn
	}
	job.Progress, job.OnEvent = nil, nil
	cfg.Job = job
	rep := &Report{N: cfg.N, Model: job.Model, Target: cfg.Target}
	scenarios := []struct {
		name   string
		factor float64
	}{{"baseline", 0}}
	if cfg.SlowFactor > 1 {
		scenarios = append(scenarios, struct {
			name   string
			factor float64
		}{"straggler", cfg.SlowFactor})
	}
	for _, sc := range scenarios {
		for _, strat := range cfg.Strategies {
			rjob := job
			rjob.Strategy = cfg.Gossip
			rjob.Strategy.Name = strat
			rjob.Faults = mirrored.Faults{SlowRank: cfg.SlowRank, SlowFactor: sc.factor}
			run := &Run{Strategy: strat, Scenario: sc.name, Slow: "none"}
			if sc.factor > 1 {
				run.Slow = fmt.Sprintf("rank %d ×%g", cfg.SlowRank, sc.factor)
			}
			start := time.Now()
			if job.LogDir != "" { // TensorBoard: one run directory per strategy and scenario
				rjob.LogDir = filepath.Join(job.LogDir, strat+"-"+sc.name)
			}
			run.Peers = runCluster(ctx, cfg, rjob)
			run.WallSeconds = time.Since(start).Seconds()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			rep.Runs = append(rep.Runs, run)
			m := measure(run, cfg.Target)
			fmt.Fprintf(cfg.Progress, "%-6s %-9s  time to %.1f%%: %s  final accuracy %s  steps/s per peer %s  %s\n",
				strat, sc.name, 100*cfg.Target, fmtSeconds(m.TimeToTarget), fmtPct(m.FinalAccuracy), fmtList(m.StepsPerSec, "%.0f"), m.Errors)
		}
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(cfg.Out, "results.json"), append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("compare: writing results.json: %w", err)
	}
	path, err := writeReport(cfg, rep)
	if err != nil {
		return nil, err
	}
	rep.Markdown = path
	return rep, nil
}

// runCluster runs one strategy as cfg.N replicas in this process, each
// with its own libp2p host on 127.0.0.1.
func runCluster(ctx context.Context, cfg Config, job mirrored.Job) []PeerRun {
	n := cfg.N
	peers := make([]PeerRun, n)
	addrs, err := p2p.LocalAddrs(n, cfg.Security == p2p.SecurityQUIC)
	secret := make([]byte, 32)
	if err == nil {
		_, err = rand.Read(secret)
	}
	if err != nil {
		for r := range peers {
			peers[r] = PeerRun{Rank: r, Err: fmt.Sprintf("rank %d: %v", r, err)}
		}
		return peers
	}
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			peers[r] = runPeer(ctx, cfg, job, r, addrs, secret)
		}()
	}
	wg.Wait()
	return peers
}

// join brings a replica up (a variable, so that tests can make its
// transport fail).
var join = p2p.Join

func runPeer(ctx context.Context, cfg Config, job mirrored.Job, rank int, addrs []string, secret []byte) PeerRun {
	out := PeerRun{Rank: rank}
	log := cfg.Logger.With(zap.String("strategy", job.Strategy.Name), zap.Int("rank", rank))
	job.Logger = log
	m, _, err := join(ctx, p2p.Config{Rank: rank, Peers: addrs, Security: cfg.Security, ClusterSecret: secret,
		Timeout: cfg.Timeout, Logger: log.Named("p2p")}, collective.Options{Timeout: cfg.Timeout, Logger: log.Named("collective")})
	if err != nil {
		out.Err = err.Error()
		return out
	}
	sum, err := mirrored.Run(ctx, job, mirrored.NewGroup(m.Comm))
	// Leave together, as the worker does.
	if err = m.Leave(ctx, err, !job.Strategy.Gossip()); err != nil {
		out.Err = err.Error()
	} else {
		sum.Peer.BytesSent, sum.Peer.BytesReceived = m.Traffic()
		sum.Peer.Links = m.Links()
		out.Gossip = sum.Gossip
	}
	out.Summary = sum
	return out
}

// Point is one evaluation of one replica.
type Point struct {
	Seconds, Epochs, Accuracy float64
}

// Measures are the figures of one run that the report compares.
type Measures struct {
	// Curves has one accuracy curve per replica (one for the ring, whose
	// replicas are identical).
	Curves map[int][]Point
	// TimeToTarget and EpochsToTarget: the ring's, or under gossip the
	// first replica's to reach the target (NaN: never). AllTimeToTarget is
	// when every surviving replica had reached it.
	TimeToTarget, EpochsToTarget, AllTimeToTarget float64
	// FinalAccuracy: the ring's model, or under gossip the average model
	// of the survivors.
	FinalAccuracy float64
	// MeanReplicaAccuracy is the mean of the replicas' own final accuracy.
	MeanReplicaAccuracy float64
	StepsPerSec         []float64 // per rank (0 for a failed one)
	BytesSent           []int64   // per rank
	Consensus           float64   // gossip: final relative consensus distance
	Errors              string
}

func measure(run *Run, target float64) Measures {
	m := Measures{Curves: map[int][]Point{}, TimeToTarget: math.NaN(), EpochsToTarget: math.NaN(), AllTimeToTarget: math.NaN(),
		FinalAccuracy: math.NaN(), MeanReplicaAccuracy: math.NaN(), Consensus: math.NaN()}
	m.StepsPerSec = make([]float64, len(run.Peers))
	m.BytesSent = make([]int64, len(run.Peers))
	var accSum float64
	var accN int
	allTime := 0.0
	for r, p := range run.Peers {
		if p.Err != "" { // it names the rank
			if m.Errors != "" {
				m.Errors += "; "
			}
			m.Errors += p.Err
		}
		if p.Summary == nil {
			continue
		}
		s := p.Summary
		m.BytesSent[r] = s.Peer.BytesSent
		if s.Run.TrainSeconds > 0 {
			m.StepsPerSec[r] = float64(s.Peer.Steps) / s.Run.TrainSeconds
		}
		var pts []Point
		if p.Gossip != nil {
			for _, e := range p.Gossip.Evals {
				// At the epoch boundary it crossed, like the ring's
				// per-epoch evaluations (the final one may fall between).
				x := float64(e.Epoch)
				if e.ClusterEpochs-x > 0.05 {
					x = e.ClusterEpochs
				}
				pts = append(pts, Point{e.TrainSeconds, x, e.TestAccuracy})
			}
			m.StepsPerSec[r] = p.Gossip.StepsPerSec
			m.FinalAccuracy, m.Consensus = p.Gossip.AverageAccuracy, p.Gossip.RelConsensus
		} else {
			for _, e := range s.Run.EpochResults {
				pts = append(pts, Point{e.TrainSeconds, float64(e.Epoch), e.TestAccuracy})
			}
			m.FinalAccuracy = s.Run.FinalAccuracy
		}
		accSum += s.Run.FinalAccuracy
		accN++
		if p.Gossip == nil && len(m.Curves) > 0 {
			continue // ring replicas are identical: one curve
		}
		m.Curves[r] = pts
		reached := false
		for _, pt := range pts {
			if pt.Accuracy >= target {
				if math.IsNaN(m.TimeToTarget) || pt.Seconds < m.TimeToTarget {
					m.TimeToTarget, m.EpochsToTarget = pt.Seconds, pt.Epochs
				}
				allTime = max(allTime, pt.Seconds)
				reached = true
				break
			}
		}
		if !reached {
			allTime = math.Inf(1)
		}
	}
	if accN > 0 {
		m.MeanReplicaAccuracy = accSum / float64(accN)
	}
	if allTime > 0 && !math.IsInf(allTime, 1) {
		m.AllTimeToTarget = allTime
	}
	return m
}
