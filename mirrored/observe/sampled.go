package observe

import (
	"time"

	"github.com/meshtrain/meshtrain/mirrored"
)

// SampleInterval is the longest a Sampled hook goes without a step event
// while steps are being taken (a launcher's progress bar moves at least
// this often).
const SampleInterval = 500 * time.Millisecond

// stepSampler passes every event but steps on to a hook; the
// steps it passes at a bounded rate, each summing up the steps since the
// last (Train.Steps of them): every `every` steps (so a launcher can write
// its plain progress lines at the same steps as a single worker), after
// SampleInterval, and at the last step.
type stepSampler struct {
	onEvent func(mirrored.Event)
	every   int
	sum     mirrored.StepStats
	last    time.Time
}

// Sampled passes a run's events on to onEvent, the steps at a bounded
// rate: every `every` steps (0: DefaultLogEvery), after SampleInterval
// and at the last step, each summing up the steps since the last
// (Train.Steps of them); the resource samples not at all (their history
// reaches the caller in the Summary). It is the launcher's view of its
// workers: the relayed steps draw the same progress as a worker's own.
func Sampled(every int, onEvent func(mirrored.Event)) mirrored.Observer {
	return &stepSampler{onEvent: onEvent, every: logEvery(every), last: time.Now()}
}

// Observe implements mirrored.Observer.
func (s *stepSampler) Observe(e mirrored.Event) error {
	if e.Kind == mirrored.EventResources {
		return nil // the history reaches the caller in the Summary
	}
	if e.Kind != mirrored.EventStep {
		if e.Kind == mirrored.EventStart { // an elastic generation's steps are its own
			s.sum, s.last = mirrored.StepStats{}, time.Now()
		}
		s.onEvent(e)
		return nil
	}
	st := e.Train
	n := float64(s.sum.Steps)
	s.sum.Loss = (s.sum.Loss*n + st.Loss) / (n + 1)
	s.sum.LR, s.sum.Examples, s.sum.Steps = st.LR, s.sum.Examples+st.Examples, s.sum.Steps+1
	s.sum.Seconds += st.Seconds
	if now := time.Now(); e.Step%s.every == 0 || e.Step >= e.Steps || now.Sub(s.last) >= SampleInterval {
		sum := s.sum
		e.Train = &sum
		s.onEvent(e)
		s.sum, s.last = mirrored.StepStats{}, now
	}
	return nil
}
