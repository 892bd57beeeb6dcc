package mirrored

import (
	"errors"
	"io"
	"time"
)

// Event kinds, in the order a run emits them: one start, at most one
// resumed, a step per training step, an epoch per evaluation (and
// checkpoints where they are written), one done.
const (
	EventStart      = "start"
	EventResumed    = "resumed"
	EventStep       = "step"
	EventEpoch      = "epoch"
	EventCheckpoint = "checkpoint"
	// EventMembership: an elastic run's new generation started (Info
	// says who left or joined, from which step, how long it paused).
	EventMembership = "membership"
	EventDone       = "done"
	// EventResources carries a resource sample (with the step events,
	// when the Job has a ResourceSampler).
	EventResources = "resources"
)

// Event is one thing a replica's run reports. Every strategy emits the
// same kinds with the same meaning, so whatever observes a run (the log,
// the progress lines, TensorBoard, the launcher: package mirrored/observe)
// works in every mode.
type Event struct {
	Kind  string `json:"kind"`
	Rank  int    `json:"rank"`
	Step  int    `json:"step"`  // global steps done (gossip: this replica's local steps)
	Steps int    `json:"steps"` // steps the run will take at most
	// Replicas is, in the start event, how many replicas' examples a
	// step's figures stand for: the group's size under the ring, 1 under
	// gossip, where every replica's curve is its own.
	Replicas int    `json:"replicas,omitempty"`
	Epoch    *Epoch `json:"epoch,omitempty"`
	Path     string `json:"path,omitempty"` // checkpoint file
	Info     string `json:"info,omitempty"` // start: the run in one line; epoch: what is particular to the mode; resumed: warnings, one a line
	// Train is a step's figures (kind step only). In the step events a
	// sampled hook receives (observe.Sampled), it sums up the steps since
	// the previous one.
	Train *StepStats `json:"train,omitempty"`
	// Gossip is a gossip replica's evaluation (kind epoch under gossip).
	Gossip *GossipEval `json:"-"`
	// Resources is a resource sample (kind resources).
	Resources *ResourceSample `json:"-"`
	// Change is an elastic run's change of membership (kind membership).
	Change *MembershipChange `json:"change,omitempty"`
}

// StepStats are one training step's figures, on this replica; or, with
// Steps > 1, those of the Steps steps up to the event's.
type StepStats struct {
	Loss     float64 `json:"loss"` // on its batch (the mean over Steps)
	LR       float64 `json:"lr"`
	Examples int     `json:"examples"` // in its batch (in the Steps batches)
	// Correct is how many of the batch's examples the model classified
	// correctly computing the loss, when Counted (an nn.TrainCounter).
	Correct int  `json:"-"`
	Counted bool `json:"-"`
	Steps   int  `json:"steps,omitempty"` // steps covered; 0 means 1
	// Compute, Comm and Wait split the step's time as PeerStats does.
	Compute, Comm, Wait time.Duration `json:"-"`
	// BytesSent is the bytes this replica has sent so far (-1: the
	// transport does not count).
	BytesSent int64 `json:"-"`
}

// bytesSent is what counted has sent so far, -1 if it does not count.
func bytesSent(counted any) int64 {
	if tr, ok := counted.(Traffic); ok {
		sent, _ := tr.Traffic()
		return sent
	}
	return -1
}

// Observer receives a run's events, on the replica's goroutine, in order:
// those the caller installs in Job.Observers (the log, progress,
// TensorBoard and the launcher's relay are in package mirrored/observe).
// An error stops the run (a TensorBoard file that cannot be written is not
// silently skipped); an Observer that is an io.Closer is closed once at
// the end of the run (an elastic run's: of every generation, after which
// the next generation's events follow).
type Observer interface {
	Observe(Event) error
}

// ObserverFunc adapts a function.
type ObserverFunc func(Event) error

func (f ObserverFunc) Observe(e Event) error { return f(e) }

// observers sends each event to every observer in order, stamping the
// rank; it closes those that are io.Closers once (on done, or by close
// when the run fails first).
type observers struct {
	rank   int
	obs    []Observer
	closed bool
}

func (o *observers) emit(e Event) error {
	e.Rank = o.rank
	var errs []error
	for _, ob := range o.obs {
		if err := ob.Observe(e); err != nil {
			errs = append(errs, err)
		}
	}
	if e.Kind == EventDone {
		errs = append(errs, o.close())
	}
	return errors.Join(errs...)
}

func (o *observers) close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	var errs []error
	for _, ob := range o.obs {
		if c, ok := ob.(io.Closer); ok {
			errs = append(errs, c.Close())
		}
	}
	return errors.Join(errs...)
}

// newObservers is a replica's fan-out to job's Observers, stamping rank.
func newObservers(job *Job, rank int) *observers {
	return &observers{rank: rank, obs: job.Observers}
}
