package mirrored

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
)

// Strategies a run may use.
const (
	// StrategyRing is synchronous data parallelism (RunJob): every step's
	// gradients are all-reduced, every replica applies the same update.
	StrategyRing = "ring"
	// StrategyGossip is decentralised asynchronous training (RunGossip).
	StrategyGossip = "gossip"
)

// Strategies lists the valid strategy names.
var Strategies = []string{StrategyRing, StrategyGossip}

// GossipConfig is the gossip strategy's settings and the fault injection
// both strategies accept. The zero value (after Fill) is the ring with no
// faults; under gossip, gossip.DefaultOptions' settings.
type GossipConfig struct {
	// Strategy is StrategyRing or StrategyGossip (RunStrategy's choice).
	Strategy string
	// Schedule picks the peer of each exchange: random, rotate or
	// exponential (gossip.ParseSchedule).
	Schedule string
	// Every is the number of local steps between exchanges (≥ 1).
	Every int
	// WaitForAverage makes each exchange complete before the next local
	// step; by default the next step overlaps it (its answer lands as a
	// merge during that step, counted in its staleness), as AD-PSGD's
	// communication thread does.
	WaitForAverage bool
	// MaxSkip is how many rounds in a row a replica may skip, when its
	// previous average is still in flight, before it waits for it: it
	// bounds the local steps between two averages to MaxSkip+1, while
	// steps shorter than an exchange's round trip still do not wait for
	// every one. 0 means gossip.DefaultOptions' MaxSkip; negative, never
	// skip.
	MaxSkip int
	// MaxStaleness bounds the merges a local step may absorb while its
	// gradient is being computed (≥ 1).
	MaxStaleness int
	// Faults are injected into either strategy.
	Faults Faults
}

// Fill sets the zero settings to their defaults: strategy ring, and the
// gossip knobs from gossip.DefaultOptions (schedule random, Every 1,
// MaxSkip 3, MaxStaleness 2; it says why), so the two cannot disagree.
func (g *GossipConfig) Fill() {
	d := gossip.DefaultOptions()
	if g.Strategy == "" {
		g.Strategy = StrategyRing
	}
	if g.Schedule == "" {
		g.Schedule = d.Schedule.String()
	}
	if g.Every == 0 {
		g.Every = d.Every
	}
	if g.MaxStaleness == 0 {
		g.MaxStaleness = d.MaxStaleness
	}
	if g.MaxSkip == 0 {
		g.MaxSkip = d.MaxSkip
	}
}

// Validate reports the first bad setting, for world replicas.
func (g *GossipConfig) Validate(world int) error {
	switch g.Strategy {
	case StrategyRing, StrategyGossip:
	default:
		return fmt.Errorf("strategy %q: want ring or gossip", g.Strategy)
	}
	if _, err := gossip.ParseSchedule(g.Schedule); err != nil {
		return err
	}
	if g.Every < 1 {
		return fmt.Errorf("gossip every %d steps: want ≥ 1", g.Every)
	}
	if g.MaxStaleness < 1 {
		return fmt.Errorf("gossip max staleness %d: want ≥ 1", g.MaxStaleness)
	}
	return g.Faults.Validate(world)
}

// GossipSummary is a gossip replica's Summary plus its gossip figures. Its
// JSON is a Summary's with a "gossip" object added.
type GossipSummary struct {
	Summary
	Gossip GossipReport `json:"gossip"`
}

// GossipEval is one evaluation of a gossip replica's own parameters. A
// replica evaluates each time the cluster's work, as it knows it, crosses
// an epoch (the work of one synchronous epoch: N replicas × steps per
// epoch), so that its curve has the ring's resolution; and at the end.
type GossipEval struct {
	Epoch int `json:"epoch"` // epochs of cluster work completed
	// ClusterEpochs is the cluster's work so far as this replica knew it,
	// in epochs: the x axis comparable with a ring run's epochs.
	ClusterEpochs float64 `json:"cluster_epochs"`
	// LocalPasses is this replica's own work: passes over its shard.
	LocalPasses  float64 `json:"local_passes"`
	Loss         float64 `json:"loss"` // mean training loss since the previous evaluation
	TestLoss     float64 `json:"test_loss"`
	TestAccuracy float64 `json:"test_accuracy"`
	TrainSeconds float64 `json:"elapsed_seconds"` // cumulative, evaluation excluded
	Steps        int     `json:"steps"`           // local steps done
}

// gossipEval is the evaluation of a replica after its local steps (steps
// of them a pass over its shard), when the cluster had done total local
// steps (epochWork of them an epoch); the caller sets Loss.
func gossipEval(total uint64, epochWork, local, steps int, trainTime time.Duration, testLoss, acc float64) GossipEval {
	return GossipEval{Epoch: int(total / uint64(epochWork)), ClusterEpochs: float64(total) / float64(epochWork),
		LocalPasses: float64(local) / float64(steps), TestLoss: testLoss, TestAccuracy: acc, TrainSeconds: trainTime.Seconds(), Steps: local}
}

// GossipReport are one replica's gossip figures.
type GossipReport struct {
	Schedule     string `json:"schedule"`
	Every        int    `json:"every"`
	MaxStaleness int    `json:"max_staleness"`
	gossip.Stats
	Evals []GossipEval `json:"evals"`
	// Skipped counts rounds without an exchange because the previous one
	// was still in flight (overlapped mode never waits for the network).
	Skipped int `json:"skipped"`
	// StepsPerSec is this replica's local steps over its training time.
	StepsPerSec float64 `json:"steps_per_sec"`
	// StoppedBy says why training ended: "budget" (the cluster did as
	// many steps as the synchronous run would), "target" (this replica
	// reached the target), "peer" (another one did) or "sigterm" (a
	// replica was asked to stop, Job.Stop: Result.Stopped names it).
	StoppedBy string `json:"stopped_by"`
	// Survivors are the ranks whose final parameters this replica
	// received (itself included); FinalConsensus is the exact consensus
	// distance among them, sqrt(mean ‖x_i − x̄‖²), and RelConsensus that
	// over ‖x̄‖.
	Survivors      []int   `json:"survivors"`
	FinalConsensus float64 `json:"final_consensus"`
	RelConsensus   float64 `json:"rel_consensus"`
	// AverageAccuracy and AverageLoss are the test figures of x̄, the
	// survivors' average model (dense models only: 0 for sparse-lr, whose
	// replicas never swap whole weight vectors).
	AverageAccuracy float64 `json:"average_accuracy"`
	AverageLoss     float64 `json:"average_loss"`
	// TimeToTarget is the training seconds at which this replica first
	// reached the target accuracy (0: never).
	TimeToTarget float64 `json:"time_to_target_seconds,omitempty"`
}

// ErrGossipCheckpoint says checkpoints are not available under gossip.
var ErrGossipCheckpoint = errors.New("checkpoints and --restore work with the ring strategy only: gossip replicas hold different parameters, and a gossip run is not resumable")

// RunGossip runs job as replica c.Rank() of c.Size() with decentralised
// asynchronous training in the manner of AD-PSGD (Lian et al., 2018):
//
//   - start-up: the replicas compare their settings (as RunJob does) and
//     rank 0 broadcasts the initial parameters; no collective is used
//     after that, so a dead peer cannot stop the others;
//   - each local step: copy the shared parameters, forward/backward on the
//     replica's own batch (data.ShardAuto over its shard, reshuffled each
//     pass), optimizer step on the shared parameters (which peers may have
//     averaged meanwhile: that is the step's staleness, bounded by
//     MaxStaleness); every Every steps, average with one peer chosen by
//     the schedule (gossip.Node), overlapped with the next step
//     unless WaitForAverage (a round whose predecessor is still in flight
//     is skipped, up to MaxSkip in a row, so computing rarely waits for
//     the network). No barrier: a slow replica only
//     answers late, never makes the others wait for its computation;
//   - the learning-rate schedule follows the cluster's progress (the sum
//     of the replicas' steps over N), so it matches the ring's per epoch;
//   - the run ends when the cluster has done the synchronous run's work
//     (Epochs × steps per epoch × N local steps; faster replicas do more
//     of them), or when a replica reaches the target accuracy;
//   - each time the cluster's work crosses an epoch, the replica evaluates
//     its own parameters on the whole test set; at the end the survivors swap their final
//     parameters and each reports the consensus distance and the accuracy
//     of their average;
//   - a peer that dies is detected (its link fails, or it does not answer
//     within the collective timeout), logged and dropped; the rest finish.
func RunGossip(ctx context.Context, job Job, gc GossipConfig, c *collective.Comm) (*GossipSummary, error) {
	gc.Strategy = StrategyGossip
	gc.Fill()
	run, err := job.gossipRun(ctx, &gc, c.Rank(), c.Size())
	if err != nil {
		return nil, failStartup(ctx, NewGroup(c), err)
	}
	return runGossip(ctx, &job, &gc, c, run)
}

// gossipRun checks the settings, loads the data and builds the replica
// for a gossip run of an nn model.
func (j *Job) gossipRun(ctx context.Context, gc *GossipConfig, rank, world int) (*gossipRun, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	if err := gc.Validate(world); err != nil {
		return nil, err
	}
	if j.CheckpointDir != "" || j.Restore != "" {
		return nil, ErrGossipCheckpoint
	}
	cfg := &j.Config
	train, test, classes, err := cfg.images(ctx, rank)
	if err != nil {
		return nil, err
	}
	// Each replica evaluates its own parameters on the whole test set.
	rep, err := newDenseReplica(cfg, test, classes, 0, 1)
	if err != nil {
		return nil, err
	}
	res := Result{
		Model: cfg.Model, Params: len(rep.params), BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Schedule: cfg.Schedule, WarmupEpochs: cfg.WarmupEpochs, Seed: cfg.Seed, TestExamples: test.N,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss,
	}
	return &gossipRun{
		rep:      rep,
		settings: append(j.settings(len(rep.params), world, dataDigest(train, test)), gc.settings()...),
		shard:    data.ShardSize(train.N, world, rank),
		pipeline: func(ctx context.Context, _ int) (*data.Pipeline, error) {
			pcfg := data.TrainConfig(rank, world, cfg.BatchSize, uint64(cfg.Seed), data.Forever)
			pcfg.Policy = data.ShardAuto
			if j.NoShuffle {
				pcfg.ShuffleBuffer = 0
			}
			return data.NewPipeline(ctx, train.Dataset(), pcfg)
		},
		schedule: cfg.schedule,
		result:   res,
		header: func(steps int) string {
			return fmt.Sprintf("%s: %d parameters, %d gossip replica(s) × batch %d, %s peer each %d step(s), %d steps per pass over a shard, %d training and %d test examples",
				cfg.Model, len(rep.params), world, cfg.BatchSize, gc.Schedule, gc.Every, steps, train.N, test.N)
		},
		broadcastStart: true,
		evalView:       rep.params,
		evaluate:       func(ctx context.Context) (Metrics, error) { return rep.Evaluate(ctx, LocalGroup{}) },
		averageModel:   true,
	}, nil
}

// settings are the gossip settings every replica must share.
func (g *GossipConfig) settings() []Setting {
	return []Setting{
		{Name: "strategy", Value: g.Strategy, Resume: true},
		{Name: "gossip_schedule", Value: g.Schedule, Resume: true},
		{Name: "gossip_every", Value: strconv.Itoa(g.Every), Resume: true},
		{Name: "gossip_max_staleness", Value: strconv.Itoa(g.MaxStaleness), Resume: true},
		{Name: "gossip_wait_for_average", Value: strconv.FormatBool(g.WaitForAverage), Resume: true},
		{Name: "gossip_max_skip", Value: strconv.Itoa(g.MaxSkip), Resume: true},
		{Name: "slow_peer", Value: g.Faults.slowString()},
		{Name: "kill", Value: g.Faults.killString()},
	}
}

// stopped records why a gossip run's loop ends (the step budget, or a
// stop request: a peer's at its target, or a replica's asked from
// outside), unless reaching the target already did.
func (r *GossipReport) stopped(byPeer, asked bool) {
	switch {
	case r.StoppedBy != "":
	case asked:
		r.StoppedBy = "sigterm"
	case byPeer:
		r.StoppedBy = "peer"
	default:
		r.StoppedBy = "budget"
	}
}
