package mirrored

import (
	"fmt"
	"strconv"

	"github.com/meshtrain/meshtrain/mirrored/gossip"
)

// Strategies a run may use.
const (
	// StrategyRing is synchronous data parallelism (the sync loop): every
	// step's gradients are all-reduced, every replica applies the same
	// update.
	StrategyRing = "ring"
	// StrategyGossip is decentralised asynchronous training (the async
	// loop, see Strategy).
	StrategyGossip = "gossip"
)

// Strategies lists the valid strategy names.
var Strategies = []string{StrategyRing, StrategyGossip}

// Strategy is how the replicas keep in step: the ring (the zero value) or
// gossip with its knobs, which the ring ignores. Zero knobs take
// gossip.DefaultOptions' values.
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
type Strategy struct {
	// Name is StrategyRing (or empty) or StrategyGossip.
	Name string
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

// Gossip says whether s is the gossip strategy.
func (s *Strategy) Gossip() bool { return s.Name == StrategyGossip }

// fill sets the zero settings to their defaults: strategy ring, and the
// gossip knobs from gossip.DefaultOptions (schedule random, Every 1,
// MaxSkip 3, MaxStaleness 2; it says why), so the two cannot disagree.
func (g *Strategy) fill() {
	d := gossip.DefaultOptions()
	if g.Name == "" {
		g.Name = StrategyRing
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

// Validate reports the first bad setting (the zero knobs taken as their
// defaults).
func (s Strategy) Validate() error {
	g := &s
	g.fill()
	if g.Name != StrategyRing && g.Name != StrategyGossip {
		return fmt.Errorf("strategy %q: want ring or gossip", g.Name)
	}
	// The knobs are checked under the ring too: a typo there is a typo.
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

// settings are the strategy's settings every replica must share (the
// ring adds none: its checkpoints predate the strategy setting).
func (g *Strategy) settings() []setting {
	if !g.Gossip() {
		return nil
	}
	return []setting{
		{Name: "strategy", Value: g.Name, Resume: true},
		{Name: "gossip_schedule", Value: g.Schedule, Resume: true},
		{Name: "gossip_every", Value: strconv.Itoa(g.Every), Resume: true},
		{Name: "gossip_max_staleness", Value: strconv.Itoa(g.MaxStaleness), Resume: true},
		{Name: "gossip_wait_for_average", Value: strconv.FormatBool(g.WaitForAverage), Resume: true},
		{Name: "gossip_max_skip", Value: strconv.Itoa(g.MaxSkip), Resume: true},
	}
}
