package callbacks

import (
	"fmt"
	"math"
	"strconv"
)

// Metrics are one epoch's figures, as every replica has them after the
// epoch's evaluation.
type Metrics struct {
	Epoch int // 1-based
	// Evaluated is false when the run has no test set: there is then
	// nothing to monitor (Keras warns and does nothing).
	Evaluated      bool
	Loss, Accuracy float64 // the test set's
	// LR is the rate the epoch's last step used (Keras's "current rate",
	// which a plateau compares with min_lr); Next is the schedule's rate
	// for the next step, before any Scale: the line that says the new
	// rate shows Rate(Next, the new scale, MinLR).
	LR, Next float64
}

// Decision is what the driver does at an epoch's end.
type Decision struct {
	// Snapshot: keep this epoch's parameters, the best so far, to restore
	// at the end (RestoreBest).
	Snapshot bool
	// Save: write the SaveBest checkpoint of this epoch's parameters.
	Save bool
	// Scale is the learning rate's multiplier from the next step on.
	Scale float64
	// Stop ends the run after this epoch; Restore (> 0, with Stop or
	// from End) is the epoch whose snapshot the run ends with.
	Stop    bool
	Restore int
	// Lines say what was decided, one line per event, for a person.
	Lines []string
}

// Reduction is one cut of the learning rate.
type Reduction struct {
	Epoch int     `json:"epoch"`
	Scale float64 `json:"scale"`
	LR    float64 `json:"lr"` // the rate of the next step
}

// Report is what the callbacks did, for the run's Result.
type Report struct {
	Monitor string `json:"monitor"`
	// Best and BestEpoch are the best value of the metric (early
	// stopping's, with its min_delta; else every improvement counts) and
	// its epoch.
	Best      float64 `json:"best"`
	BestEpoch int     `json:"best_epoch"`
	// StoppedEpoch is the epoch after which early stopping ended the run
	// (0: it did not).
	StoppedEpoch int `json:"stopped_epoch,omitempty"`
	// RestoredEpoch is the epoch whose parameters the run ended with
	// (RestoreBest; 0: the last epoch's).
	RestoredEpoch int         `json:"restored_epoch,omitempty"`
	Reductions    []Reduction `json:"lr_reductions,omitempty"`
	// SavedEpoch is the epoch the SaveBest file holds (0: none written).
	SavedEpoch int `json:"saved_epoch,omitempty"`
	// Events are the lines printed, in order.
	Events []string `json:"events,omitempty"`
}

// Machine is the callbacks' state across epochs. Feed it every epoch's
// Metrics in order with Epoch; it reads nothing else.
type Machine struct {
	c        Config
	maximize bool
	seen     int  // epochs fed
	warned   bool // said once that there is no test set
	stopped  bool
	es       tracker // early stopping's best and wait
	snapshot int     // the epoch whose parameters the driver keeps (RestoreBest)
	lr       tracker // the plateau's best and wait
	cooldown int
	scale    float64
	save     tracker // the save-best file's best
	rep      Report
}

// tracker is a callback's best value, its epoch and the epochs waited.
type tracker struct {
	best  float64
	epoch int
	wait  int
}

// New is a machine for c (valid: Config.Validate).
func New(c Config) *Machine {
	m := &Machine{c: c, maximize: c.monitor() == MonitorAccuracy, scale: 1}
	worst := math.Inf(1)
	if m.maximize {
		worst = math.Inf(-1)
	}
	m.es.best, m.lr.best, m.save.best = worst, worst, worst
	m.rep.Monitor = c.monitor() // Best stays 0 until an epoch improves: JSON has no infinity
	return m
}

// Scale is the learning rate's multiplier now (1: none).
func (m *Machine) Scale() float64 { return m.scale }

// Stopped says early stopping has ended the run.
func (m *Machine) Stopped() bool { return m.stopped }

// Report is what the machine did so far.
func (m *Machine) Report() Report { return m.rep }

// improves says whether v beats best by more than delta (Keras: v <
// best − delta for a loss, v > best + delta for an accuracy; NaN never).
func (m *Machine) improves(v, best, delta float64) bool {
	if m.maximize {
		return v-delta > best
	}
	return v+delta < best
}

// Epoch decides what to do at the end of epoch x.Epoch.
func (m *Machine) Epoch(x Metrics) Decision {
	d := Decision{Scale: m.scale}
	if m.stopped {
		return d
	}
	if !x.Evaluated {
		if !m.warned {
			m.warned = true
			d.Lines = append(d.Lines, fmt.Sprintf("epoch %d: no test set was evaluated: the callbacks have no test %s to monitor", x.Epoch, m.c.monitor()))
		}
		m.rep.Events = append(m.rep.Events, d.Lines...)
		return d
	}
	m.seen++
	v := x.Loss
	if m.maximize {
		v = x.Accuracy
	}
	if m.improves(v, m.save.best, 0) {
		m.save.best, m.save.epoch = v, x.Epoch
		if m.c.SaveBest != "" {
			d.Save = true
			m.rep.SavedEpoch = x.Epoch
			d.Lines = append(d.Lines, fmt.Sprintf("epoch %d: test %s improved to %s: saving the parameters to %s", x.Epoch, m.c.monitor(), m.show(v), m.c.SaveBest))
		}
	}
	if m.c.ReduceLR {
		m.plateau(x, v, &d)
	}
	if m.c.EarlyStop {
		m.early(x, v, &d)
	} else if m.save.epoch == x.Epoch {
		m.rep.Best, m.rep.BestEpoch = v, x.Epoch
	}
	m.rep.Events = append(m.rep.Events, d.Lines...)
	return d
}

// plateau is ReduceLROnPlateau's step: cooldown, then the wait, then the
// cut (only while the rate is above the floor).
func (m *Machine) plateau(x Metrics, v float64, d *Decision) {
	if m.cooldown > 0 {
		m.cooldown--
		m.lr.wait = 0
	}
	if m.improves(v, m.lr.best, m.c.LRMinDelta) {
		m.lr.best, m.lr.epoch, m.lr.wait = v, x.Epoch, 0
		return
	}
	if m.cooldown > 0 {
		return
	}
	m.lr.wait++
	// Keras compares in float32, so that a rate at the floor up to
	// rounding is at the floor.
	if m.lr.wait < m.c.LRPatience || !(float32(x.LR) > float32(m.c.MinLR)) {
		return
	}
	m.scale *= m.c.Factor
	m.cooldown, m.lr.wait = m.c.Cooldown, 0
	d.Scale = m.scale
	next := Rate(x.Next, m.scale, m.c.MinLR)
	m.rep.Reductions = append(m.rep.Reductions, Reduction{Epoch: x.Epoch, Scale: m.scale, LR: next})
	d.Lines = append(d.Lines, fmt.Sprintf("epoch %d: %s: reducing the learning rate to %s (×%s of the schedule's)",
		x.Epoch, m.notImproved(x.Epoch, m.lr), strconv.FormatFloat(next, 'g', 4, 64), strconv.FormatFloat(m.scale, 'g', 4, 64)))
}

// early is EarlyStopping's step: the best epoch (kept for restoring), the
// wait, the stop.
func (m *Machine) early(x Metrics, v float64, d *Decision) {
	if m.c.RestoreBest && m.snapshot == 0 {
		// Keras keeps the first epoch's weights even when they improve on
		// nothing (a NaN loss), so that there is always one to restore.
		d.Snapshot, m.snapshot = true, x.Epoch
	}
	m.es.wait++
	if m.improves(v, m.es.best, m.c.MinDelta) {
		m.es.best, m.es.epoch, m.es.wait = v, x.Epoch, 0
		m.rep.Best, m.rep.BestEpoch = v, x.Epoch
		if m.c.RestoreBest {
			d.Snapshot, m.snapshot = true, x.Epoch
		}
		return
	}
	if m.es.wait < m.c.Patience || m.seen == 1 {
		return
	}
	m.stopped, d.Stop = true, true
	m.rep.StoppedEpoch = x.Epoch
	line := fmt.Sprintf("epoch %d: %s: stopping", x.Epoch, m.notImproved(x.Epoch, m.es))
	if m.c.RestoreBest && m.snapshot != x.Epoch {
		d.Restore, m.rep.RestoredEpoch = m.snapshot, m.snapshot
		line += fmt.Sprintf("; restoring epoch %d's parameters", m.snapshot)
	}
	d.Lines = append(d.Lines, line)
}

// End is called once after the last epoch of a run that early stopping
// did not stop: with RestoreBest, the epoch whose parameters the run ends
// with (0: the last epoch's own) and the line that says so. Keras 3
// restores the best weights at the end of training either way.
func (m *Machine) End(last int) (restore int, line string) {
	if m.stopped || !m.c.RestoreBest || m.snapshot == 0 || m.snapshot == last {
		return 0, ""
	}
	m.rep.RestoredEpoch = m.snapshot
	line = fmt.Sprintf("end of training: restoring epoch %d's parameters, the best test %s (%s)", m.snapshot, m.c.monitor(), m.show(m.es.best))
	m.rep.Events = append(m.rep.Events, line)
	return m.snapshot, line
}

// notImproved says for how long and since what the metric has not
// improved.
func (m *Machine) notImproved(epoch int, t tracker) string {
	if t.epoch == 0 {
		return fmt.Sprintf("test %s did not improve for %d epochs (no epoch had a finite best)", m.c.monitor(), epoch)
	}
	n := epoch - t.epoch
	epochs := "epochs"
	if n == 1 {
		epochs = "epoch"
	}
	return fmt.Sprintf("test %s did not improve for %d %s (best %s at epoch %d)", m.c.monitor(), n, epochs, m.show(t.best), t.epoch)
}

// show formats a value of the metric: a loss to 4 significant digits, an
// accuracy as a percentage.
func (m *Machine) show(v float64) string {
	if m.maximize {
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
