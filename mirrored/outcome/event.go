package outcome

import (
	"time"

	"github.com/meshtrain/meshtrain/mirrored/membership"
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
	// EventCallback: a callback (Job.Callbacks) acted at an epoch's end:
	// Info is the line that says what it did.
	EventCallback = "callback"
	EventDone     = "done"
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
	Replicas int `json:"replicas,omitempty"`
	// StepsPerEpoch is, in the start event, the steps of one epoch at
	// this run's (generation's) global batch: with it, progress is shown
	// as an epoch and the share of it done, which an elastic run's
	// changes of membership do not renumber.
	StepsPerEpoch int    `json:"steps_per_epoch,omitempty"`
	Epoch         *Epoch `json:"epoch,omitempty"`
	Path          string `json:"path,omitempty"` // checkpoint file
	Info          string `json:"info,omitempty"` // start: the run in one line; epoch: what is particular to the mode; resumed: warnings, one a line
	// Train is a step's figures (kind step only). In the step events a
	// sampled hook receives (observe.Sampled), it sums up the steps since
	// the previous one.
	Train *StepStats `json:"train,omitempty"`
	// Gossip is a gossip replica's evaluation (kind epoch under gossip).
	Gossip *GossipEval `json:"-"`
	// Resources is a resource sample (kind resources).
	Resources *ResourceSample `json:"-"`
	// Change is an elastic run's change of membership (kind membership).
	Change *membership.Change `json:"change,omitempty"`
	// Shift is, with Change, where the new generation starts and its
	// global batch and learning rate before and after.
	Shift *membership.Shift `json:"shift,omitempty"`
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
	// Seconds is the time the replica spent in the steps covered
	// (computing, communicating and waiting), so that a rate over them
	// does not depend on when the event reached whoever shows it (a
	// launcher receives a worker's events in bursts).
	Seconds float64 `json:"seconds,omitempty"`
	// Compute, Comm and Wait split the step's time as PeerStats does.
	Compute, Comm, Wait time.Duration `json:"-"`
	// BytesSent is the bytes this replica has sent so far (-1: the
	// transport does not count).
	BytesSent int64 `json:"-"`
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

// ResourceSample is a peer's resource use over one interval ending
// Seconds after the run started, what dstat, top and iftop showed the
// course reports by hand. CPU is in cores (CPU-seconds per second); the
// rates in bytes per second.
type ResourceSample struct {
	Seconds  float64 `json:"t"`
	Interval float64 `json:"interval"`
	Step     int     `json:"step"` // steps done at the end of the interval
	// CPUUser and CPUSystem are the process's (peers in one process share
	// it).
	CPUUser   float64 `json:"cpu_user"`
	CPUSystem float64 `json:"cpu_system"`
	RSSBytes  int64   `json:"rss_bytes"`
	// DiskRead and DiskWrite are what reached storage (the page cache's
	// hits are not reads).
	DiskRead  float64 `json:"disk_read_per_sec"`
	DiskWrite float64 `json:"disk_write_per_sec"`
	// Sent and Received are over all links, Links per peer rank.
	Sent     float64    `json:"sent_per_sec"`
	Received float64    `json:"received_per_sec"`
	Links    []LinkRate `json:"links,omitempty"`
}

// LinkRate is one link's traffic in a ResourceSample.
type LinkRate struct {
	Peer     int     `json:"peer"`
	Sent     float64 `json:"sent_per_sec"`
	Received float64 `json:"received_per_sec"`
}

// ResourceSampler measures this process's resources while a replica
// trains (observe.Resources samples the OS): a Job's Resources starts one
// per run; the loop tells it the steps done at every step and passes what
// is new to the observers (EventResources), and keeps its history in
// PeerStats.Resources.
type ResourceSampler interface {
	// Pending returns the samples taken since the last call, after noting
	// that step steps are done.
	Pending(step int) []ResourceSample
	// Finish stops sampling and returns the whole history; it may be
	// called again.
	Finish() []ResourceSample
}
