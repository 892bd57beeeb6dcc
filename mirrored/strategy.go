package mirrored

import (
	"fmt"
	"strconv"

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
