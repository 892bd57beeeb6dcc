package mirrored

import (
	"context"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
)

// builder builds one replica's plan for a model: the dense models
// (denseBuilder) or sparse logistic regression (sparseBuilder), under
// either strategy.
type builder interface {
	// validate checks the model's settings before anything is loaded.
	validate() error
	// build loads the data (or counts this replica's shard of it) and
	// builds the replica.
	build(ctx context.Context, rank, world int) (*plan, error)
}

// plan is what the loops (runSync, runAsync) need from a builder: a built
// replica, its settings and input, and the description of the run for the
// Result.
type plan struct {
	rep      replica.Replica
	settings []setting
	shard    int // this replica's training examples
	// pipeline opens this replica's training input from epoch startEpoch
	// (1-based) for epochs epochs (data.Forever under gossip: faster
	// replicas do more than their share) of steps steps.
	pipeline func(ctx context.Context, startEpoch, epochs, steps int) (*data.Pipeline, error)
	// schedule is the learning rate per global step, given the steps per
	// epoch.
	schedule func(steps int) (nn.Schedule, error)
	result   Result // the run's description; the loop fills the figures
	// header describes the run in one line, given the steps per epoch and
	// the training examples of all replicas.
	header func(steps, examples int) string
	// broadcastStart sends the chief's initial state to all on a fresh
	// start (dense models, initialised from the seed); without it every
	// replica starts from the same zeros and only a resume is broadcast.
	broadcastStart bool
	// perStepLoss: the epoch's loss is the mean of the steps' losses
	// (each a batch mean), else the mean over examples of loss sums.
	perStepLoss bool
	maxSteps    int    // > 0: stop after that many global steps
	done        func() // called with the final parameters in place
	// hook is the run's part at the sync loop's seams: the elastic run
	// this generation belongs to (nil: a plain ring run).
	hook loopHook

	// Gossip only:
	// sparse runs the engine in sparse mode: each step runs under the
	// engine's lock (its gradient is never stale) and exchanges carry the
	// changed coordinates only; they are always waited for.
	sparse bool
	opts   gossip.Options // Schedule, Seed, Timeout, Logger set by the loop
	// evalView receives a snapshot of the shared parameters and evaluate
	// scores it on the whole test set, on this replica alone (a peer may
	// be gone).
	evalView []float32
	evaluate func(ctx context.Context) (replica.Metrics, error)
	// averageModel: at the end the survivors swap their parameters and
	// score their average (dense models; sparse replicas never swap D
	// floats).
	averageModel bool
}
