package mirrored

import (
	"fmt"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
	"github.com/meshtrain/meshtrain/mirrored/replica"
)

// metrics are an epoch's figures as the callbacks read them: the test set's,
// all-reduced (replica.Evaluate), so every replica decides alike.
func metrics(ep Epoch, evaluated bool, next float64) callbacks.Metrics {
	return callbacks.Metrics{Epoch: ep.Epoch, Evaluated: evaluated, Loss: ep.TestLoss, Accuracy: ep.TestAccuracy, LR: ep.LR, Next: next}
}

// startCallbacks starts Job.Callbacks, replaying a resumed run's history.
func (l *syncLoop) startCallbacks() {
	if c := l.job.Callbacks; c.Enabled() {
		hist := make([]callbacks.Metrics, len(l.res.EpochResults))
		for i, ep := range l.res.EpochResults {
			hist[i] = metrics(ep, ep.TestLoss != 0 || ep.TestAccuracy != 0, 0)
		}
		l.cb = callbacks.Replay(c, hist, l.job.cbRun)
		l.job.cbRun = l.cb // an elastic run's next generation takes the kept epoch over
	}
}

// rate is global step step's learning rate: the schedule's, times a
// plateau's scale (callbacks.Rate).
func (l *syncLoop) rate(step int) float64 {
	if l.cb == nil {
		return l.sched.At(step)
	}
	return callbacks.Rate(l.sched.At(step), l.cb.Scale(), l.job.Callbacks.MinLR)
}

// callbacks acts at the end of epoch ep (last: the run's last): the
// callbacks keep or restore parameters, the chief writes the save-best
// file, the lines are told; true stops the run.
func (l *syncLoop) callbacks(ep Epoch, evaluated, last bool) (bool, error) {
	if l.cb == nil {
		return false, nil
	}
	rep := l.run.rep
	var bufs []float32
	if b, ok := rep.(replica.Buffered); ok {
		bufs = b.Buffers()
	}
	d := l.cb.Act(metrics(ep, evaluated, l.sched.At(l.global)), last, rep.Params(), bufs)
	if d.Save && l.rank == 0 {
		b, err := l.state(ep.Epoch+1, 0).Encode()
		if err == nil {
			err = atomicfile.WriteFile(l.job.Callbacks.SaveBest, b, 0o600)
		}
		if err != nil {
			return false, fmt.Errorf("epoch %d: writing --save-best: %w", ep.Epoch, err)
		}
	}
	for _, line := range d.Lines {
		if err := l.obs.emit(Event{Kind: EventCallback, Step: l.global, Steps: l.total, Info: line}); err != nil {
			return false, err
		}
	}
	return d.Stop, nil
}
