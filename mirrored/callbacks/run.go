package callbacks

import "fmt"

// Run is a Machine with the best epoch's parameters kept in memory for
// RestoreBest: what a training loop holds. It copies slices the loop
// hands it and reads nothing else, so it stays deterministic.
type Run struct {
	*Machine
	best           []float32 // the kept epoch's state, its slices end to end
	kept, restored int       // the kept epoch; the epoch restored
}

// Replay is a Run for c that has seen the epochs of history (a resumed
// run's, from its checkpoint): its counters, best values and scale are
// the first run's. The best epoch's parameters were in memory only: they
// are prev's (an elastic run's previous generation, in the same process)
// when prev kept the epoch the replay keeps, else lost.
func Replay(c Config, history []Metrics, prev *Run) *Run {
	r := &Run{Machine: New(c)}
	for _, x := range history {
		r.Epoch(x)
	}
	if prev != nil && prev.kept > 0 && prev.kept == r.snapshot {
		r.best, r.kept = prev.best, prev.kept
	}
	return r
}

// Act decides at the end of epoch x.Epoch (last: the run's last epoch,
// where a run that was not stopped restores its best) and carries out
// what is in memory: it copies state (the parameters, then any buffers)
// when the epoch is the best, and copies the kept epoch back into state
// when the run ends with it. Saving the file is the caller's (Save).
func (r *Run) Act(x Metrics, last bool, state ...[]float32) Decision {
	d := r.Epoch(x)
	if d.Snapshot {
		r.best, r.kept = r.best[:0], x.Epoch
		for _, s := range state {
			r.best = append(r.best, s...)
		}
	}
	if last && !d.Stop {
		var line string
		if d.Restore, line = r.End(x.Epoch); line != "" {
			d.Lines = append(d.Lines, line)
		}
	}
	switch {
	case d.Restore == 0:
	case d.Restore != r.kept:
		line := fmt.Sprintf("epoch %d's parameters were not kept (the run resumed after it): the run ends with epoch %d's", d.Restore, x.Epoch)
		d.Lines, d.Restore = append(d.Lines, line), 0
		r.rep.Events = append(r.rep.Events, line)
	default:
		rest := r.best
		for _, s := range state {
			rest = rest[copy(s, rest):]
		}
		r.restored = d.Restore
	}
	return d
}

// Report is what the callbacks did; RestoredEpoch is the epoch whose
// parameters were put back (0: none).
func (r *Run) Report() Report {
	rep := r.Machine.Report()
	rep.RestoredEpoch = r.restored
	return rep
}
