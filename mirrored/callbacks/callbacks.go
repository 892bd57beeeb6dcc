package callbacks

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The metrics a run may monitor: the test set's, evaluated at every
// epoch's end (Keras's val_loss and val_accuracy). Loss is minimised,
// accuracy maximised, as Keras's mode "auto" infers from the name.
const (
	MonitorLoss     = "loss"
	MonitorAccuracy = "accuracy"
)

// Keras's defaults (keras.callbacks.EarlyStopping and ReduceLROnPlateau):
// early stopping stops at the first epoch without improvement and counts
// any improvement; a plateau cuts the rate tenfold after 10 epochs
// without an improvement of at least 1e-4, with no cooldown and no floor.
const (
	DefaultPatience   = 0
	DefaultMinDelta   = 0
	DefaultFactor     = 0.1
	DefaultLRPatience = 10
	DefaultLRMinDelta = 1e-4
	DefaultCooldown   = 0
	DefaultMinLR      = 0
)

// Config is which callbacks a run has and their settings; the zero value
// has none. Start from Defaults and turn on what is wanted.
type Config struct {
	// Monitor is MonitorLoss ("" means it) or MonitorAccuracy: the test
	// metric all three callbacks watch.
	Monitor string

	// EarlyStop stops the run at the end of the first epoch (not the
	// first) whose metric has not improved by more than MinDelta on the
	// best for Patience epochs (EarlyStopping's patience, min_delta).
	EarlyStop bool
	Patience  int
	MinDelta  float64
	// RestoreBest (EarlyStopping's restore_best_weights, off by default
	// as in Keras) ends the run with the parameters of the best epoch,
	// whether early stopping stopped it or the epochs ran out.
	RestoreBest bool

	// ReduceLR multiplies the learning rate by Factor (in (0, 1)) once
	// the metric has not improved by more than LRMinDelta for LRPatience
	// epochs, then waits Cooldown epochs before counting again; the rate
	// never falls below MinLR (ReduceLROnPlateau's factor, patience,
	// min_delta, cooldown, min_lr).
	ReduceLR   bool
	Factor     float64
	LRPatience int
	LRMinDelta float64
	Cooldown   int
	MinLR      float64

	// SaveBest, if set, is the file the chief writes a checkpoint to at
	// the end of every epoch whose metric is better than every earlier
	// epoch's (ModelCheckpoint with save_best_only).
	SaveBest string
}

// Defaults is Keras's settings, with every callback off.
func Defaults() Config {
	return Config{Monitor: MonitorLoss, Patience: DefaultPatience, MinDelta: DefaultMinDelta,
		Factor: DefaultFactor, LRPatience: DefaultLRPatience, LRMinDelta: DefaultLRMinDelta, Cooldown: DefaultCooldown, MinLR: DefaultMinLR}
}

// Enabled says whether any callback is on.
func (c *Config) Enabled() bool { return c.EarlyStop || c.ReduceLR || c.SaveBest != "" }

// monitor is the metric's name, "" being MonitorLoss.
func (c *Config) monitor() string {
	if c.Monitor == "" {
		return MonitorLoss
	}
	return c.Monitor
}

// Validate reports the first bad setting, naming the meshtrain flag that
// sets it and what it accepts.
func (c *Config) Validate() error {
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	switch {
	case c.Monitor != "" && c.Monitor != MonitorLoss && c.Monitor != MonitorAccuracy:
		return fmt.Errorf("--monitor %q: want %s or %s (the test set's, as Keras's val_loss and val_accuracy)", c.Monitor, MonitorLoss, MonitorAccuracy)
	case c.Patience < 0:
		return fmt.Errorf("--early-stop-patience %d: want ≥ 0 epochs (0 stops at the first epoch that does not improve)", c.Patience)
	case !(c.MinDelta >= 0) || !finite(c.MinDelta):
		return fmt.Errorf("--early-stop-min-delta %v: want a finite value ≥ 0", c.MinDelta)
	case c.RestoreBest && !c.EarlyStop:
		return fmt.Errorf("--restore-best restores early stopping's best epoch: give --early-stop-patience too")
	case !c.ReduceLR:
	case !(c.Factor > 0 && c.Factor < 1):
		return fmt.Errorf("--reduce-lr-factor %v: want a value in (0, 1): the rate is multiplied by it", c.Factor)
	case c.LRPatience < 0:
		return fmt.Errorf("--reduce-lr-patience %d: want ≥ 0 epochs", c.LRPatience)
	case !(c.LRMinDelta >= 0) || !finite(c.LRMinDelta):
		return fmt.Errorf("--reduce-lr-min-delta %v: want a finite value ≥ 0", c.LRMinDelta)
	case c.Cooldown < 0:
		return fmt.Errorf("--reduce-lr-cooldown %d: want ≥ 0 epochs", c.Cooldown)
	case !(c.MinLR >= 0) || !finite(c.MinLR):
		return fmt.Errorf("--reduce-lr-min-lr %v: want a finite value ≥ 0", c.MinLR)
	}
	return nil
}

// String states the settings the replicas must share, "" when no
// callback is on. The save-best path is not one of them: only the chief
// writes it.
func (c *Config) String() string {
	if !c.Enabled() {
		return ""
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	parts := []string{"monitor=" + c.monitor()}
	if c.EarlyStop {
		parts = append(parts, fmt.Sprintf("early_stop=patience:%d,min_delta:%s,restore_best:%t", c.Patience, f(c.MinDelta), c.RestoreBest))
	}
	if c.ReduceLR {
		parts = append(parts, fmt.Sprintf("reduce_lr=factor:%s,patience:%d,min_delta:%s,cooldown:%d,min_lr:%s",
			f(c.Factor), c.LRPatience, f(c.LRMinDelta), c.Cooldown, f(c.MinLR)))
	}
	if c.SaveBest != "" {
		parts = append(parts, "save_best")
	}
	return strings.Join(parts, " ")
}

// Rate is the learning rate with a plateau's Scale applied to the
// schedule's rate: scheduled × scale, floored at minLR but never above
// the schedule (a schedule already below the floor is kept). Scale 1 is
// the schedule, exactly.
func Rate(scheduled, scale, minLR float64) float64 {
	if scale >= 1 {
		return scheduled
	}
	return min(scheduled, max(scheduled*scale, minLR))
}
