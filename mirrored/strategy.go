package mirrored

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
)

// Strategy names, as flags, settings and summaries give them.
const (
	// StrategyRing is synchronous data parallelism (Ring).
	StrategyRing = "ring"
	// StrategyGossip is decentralised asynchronous training (Gossip).
	StrategyGossip = "gossip"
)

// Strategies lists the valid strategy names.
var Strategies = []string{StrategyRing, StrategyGossip}

// Strategy is how the replicas keep in step: a value handed to Run in
// Job.Strategy (nil is Ring), whose methods hold everything that differs
// between strategies, so that a new one is one type in one file of this
// package rather than a branch in every loop: Ring, Gossip, and *Elastic
// (the ring, surviving lost peers and taking restarted ones back).
type Strategy interface {
	// Name is the strategy's name (StrategyRing, StrategyGossip).
	Name() string
	// Validate reports the first bad setting of the strategy itself.
	Validate() error
	// Lockstep says whether every replica holds the same parameters
	// after every step: then the gradient is exchanged (Job.Combiner,
	// gradient buckets), each replica evaluates its share of the test set
	// and the chief writes checkpoints.
	Lockstep() bool
	// check reports what j asks that the strategy cannot do.
	check(j *Job) error
	// filled is the strategy with its zero knobs set to their defaults.
	filled() Strategy
	// settings are the strategy's settings every replica must share.
	settings() []setting
	// run trains job as replica g.Rank() of g.Size() (see Run).
	run(ctx context.Context, job *Job, g Group) (*Summary, error)
}

var (
	_ Strategy = Ring{}
	_ Strategy = Gossip{}
	_ Strategy = (*Elastic)(nil)
)

// NewStrategy returns the strategy called name ("" is the ring), with
// knobs as its settings if it is gossip.
func NewStrategy(name string, knobs Gossip) (Strategy, error) {
	switch name {
	case "", StrategyRing:
		return Ring{}, nil
	case StrategyGossip:
		return knobs, nil
	}
	return nil, fmt.Errorf("strategy %q: want ring or gossip", name)
}

// IsGossip says whether s is the gossip strategy (for callers whose
// drivers differ: a gossip cluster goes on without a lost peer).
func IsGossip(s Strategy) bool {
	_, ok := s.(Gossip)
	return ok
}

// ElasticOf is s as an elastic ring, or nil.
func ElasticOf(s Strategy) *Elastic {
	e, _ := s.(*Elastic)
	return e
}

// strategy is the Job's Strategy with its defaults filled in.
func (j *Job) strategy() Strategy {
	if j.Strategy == nil {
		return Ring{}
	}
	return j.Strategy.filled()
}

// Ring is synchronous data parallelism (the sync loop): every step's
// gradients are combined across the replicas (Job.Combiner, an
// all-reduce by default) and every replica applies the same update.
type Ring struct{}

func (Ring) Name() string        { return StrategyRing }
func (Ring) Validate() error     { return nil }
func (Ring) Lockstep() bool      { return true }
func (Ring) check(*Job) error    { return nil }
func (r Ring) filled() Strategy  { return r }
func (Ring) settings() []setting { return nil } // its checkpoints predate the strategy setting
func (Ring) run(ctx context.Context, job *Job, g Group) (*Summary, error) {
	// The chief, which alone writes checkpoints, holds the directory for
	// the run: a second run on it is refused before it loads anything.
	if g.Rank() == 0 && job.CheckpointDir != "" {
		lock, warning, err := checkpoint.LockDir(job.CheckpointDir)
		if err != nil {
			return nil, failStartup(ctx, g, err)
		}
		defer lock.Unlock()
		if warning != "" {
			job.logger().Warn(warning)
		}
	}
	p, err := job.startup(ctx, g)
	if err != nil {
		return nil, err
	}
	return runSync(ctx, job, g, p)
}

// Gossip is decentralised asynchronous training: the async loop, with
// its knobs. Zero knobs take gossip.DefaultOptions' values.
//
// Under gossip (AD-PSGD, Lian et al., 2018), on every replica:
//
//   - start-up: the replicas compare their settings (as the ring does) and
//     rank 0 broadcasts the initial parameters; no collective is used
//     after that, so a dead peer cannot stop the others;
//   - each local step: copy the shared parameters, forward/backward on the
//     replica's own batch (data.ShardAuto over its shard, reshuffled each
//     pass), optimizer step on the shared parameters (which peers may have
//     averaged meanwhile: that is the step's staleness, bounded by
//     MaxStaleness); every Every steps, average with one peer chosen by
//     the schedule (gossip.Node), overlapped with the next step unless
//     WaitForAverage (a round whose predecessor is still in flight is
//     skipped, up to MaxSkip in a row). No barrier: a slow replica only
//     answers late, never makes the others wait for its computation;
//   - the learning-rate schedule follows the cluster's progress (the sum
//     of the replicas' steps over N), so it matches the ring's per epoch;
//   - the run ends when the cluster has done the synchronous run's work
//     (Epochs × steps per epoch × N local steps; faster replicas do more
//     of them), or when a replica reaches the target accuracy;
//   - each time the cluster's work crosses an epoch, the replica evaluates
//     its own parameters on the whole test set; at the end the survivors
//     swap their final parameters and each reports the consensus distance
//     and the accuracy of their average (dense models);
//   - a peer that dies is detected (its link fails, or it does not answer
//     within the collective timeout), logged and dropped; the rest finish.
//
// Sparse logistic regression gossips too, with one difference that matters
// at Criteo's D: each exchange carries only the coordinates either side
// changed since their last exchange, and each local step runs under the
// engine's lock. Its optimizer must keep the weights themselves as its
// state (adagrad, or sgd without L2), and there is no final average model.
type Gossip struct {
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
}

func (Gossip) Name() string   { return StrategyGossip }
func (Gossip) Lockstep() bool { return false }

func (g Gossip) run(ctx context.Context, job *Job, grp Group) (*Summary, error) {
	p, err := job.startup(ctx, grp)
	if err != nil {
		return nil, err
	}
	return runAsync(ctx, job, grp, p, g)
}

// WithDefaults is g with its zero knobs set to their defaults.
func (g Gossip) WithDefaults() Gossip { return g.filled().(Gossip) }

// filled sets the zero settings to their defaults from
// gossip.DefaultOptions (schedule random, Every 1, MaxSkip 3,
// MaxStaleness 2; it says why), so the two cannot disagree.
func (g Gossip) filled() Strategy {
	d := gossip.DefaultOptions()
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
	return g
}

// Validate reports the first bad setting (the zero knobs taken as their
// defaults).
func (g Gossip) Validate() error {
	g = g.filled().(Gossip)
	if _, err := gossip.ParseSchedule(g.Schedule); err != nil {
		return err
	}
	if g.Every < 1 {
		return fmt.Errorf("gossip every %d steps: want ≥ 1", g.Every)
	}
	if g.MaxStaleness < 1 {
		return fmt.Errorf("gossip max staleness %d: want ≥ 1", g.MaxStaleness)
	}
	return nil
}

// check refuses what gossip cannot do: checkpoints (the replicas never
// hold one state), a gradient Combiner (there is no gradient exchange),
// and the sparse optimizers that averaging would undo.
func (g Gossip) check(j *Job) error {
	switch s := j.Sparse; {
	case j.CheckpointDir != "" || j.Restore != "":
		return ErrGossipCheckpoint
	case j.Combiner != nil:
		return fmt.Errorf("combiner %s: it combines gradients under the ring; gossip averages parameters instead: leave it unset", j.Combiner.Name())
	case s != nil && s.Optimizer == "ftrl":
		return errors.New("gossip with --optimizer ftrl: FTRL derives each weight from its own accumulators, which would undo every average: use adagrad or sgd")
	case s != nil && s.Optimizer == "sgd" && s.L2 > 0:
		return fmt.Errorf("gossip with sgd and --l2 %v: the lazy weight decay does not mix with averaging: use --l2 0 or adagrad", s.L2)
	}
	return nil
}

// settings are gossip's settings every replica must share.
func (g Gossip) settings() []setting {
	return []setting{
		{Name: "strategy", Value: StrategyGossip, Resume: true},
		{Name: "gossip_schedule", Value: g.Schedule, Resume: true},
		{Name: "gossip_every", Value: strconv.Itoa(g.Every), Resume: true},
		{Name: "gossip_max_staleness", Value: strconv.Itoa(g.MaxStaleness), Resume: true},
		{Name: "gossip_wait_for_average", Value: strconv.FormatBool(g.WaitForAverage), Resume: true},
		{Name: "gossip_max_skip", Value: strconv.Itoa(g.MaxSkip), Resume: true},
	}
}
