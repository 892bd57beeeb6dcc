package mirrored

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/mirrored/callbacks"
	"github.com/meshtrain/meshtrain/mirrored/membership"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/mirrored/timeline"
	"github.com/meshtrain/meshtrain/nn"
)

// Job is one replica's part of a run: the model and its training Config
// (identical on every replica), the Strategy that keeps the replicas in
// step, the faults to inject, checkpointing and consistency checks. Run it
// with Run on every replica of a Group, or with Train alone.
//
// The model is Config.Model: an nn model by name (lenet, softmax), one
// built by NewModel (a model written anywhere that implements nn.Model),
// or SparseModel with its settings in Sparse.
//
// The ring strategy, on every replica (gossip: see Strategy):
//
//   - start-up: all-gather each replica's settings (Job.settings) and stop
//     with a MismatchError naming every setting that differs and the ranks;
//     the chief (rank 0) resumes from a checkpoint if there is one, then
//     broadcasts the parameters and the optimizer state;
//   - each step: forward/backward on this replica's batch of its shard
//     (data.ShardAuto: example i goes to rank i mod N; a full shuffle of the
//     shard per epoch; every rank runs the same data.Steps per epoch),
//     [a barrier every WaitSampleEvery steps], all-reduce the flat
//     gradient, scale by 1/N, optimizer step. The global batch is
//     BatchSize×N; the learning rate is not rescaled (meshtrain's
//     --scale-lr multiplies it by N);
//   - every HashEvery steps and at the end: all-gather the SHA-256 of the
//     parameters; a difference is an error naming the ranks;
//   - each epoch: evaluation on the full test set, sharded: rank r
//     evaluates the r-th contiguous N-th of it and the loss sums and
//     correct counts are all-reduced, so every replica reports the same
//     accuracy;
//   - checkpoints (chief only): at the end of every epoch, or every
//     CheckpointEvery steps, and at the end. A run resumed from one ends
//     with the same parameters, bit for bit, as the uninterrupted run; only
//     the mean training loss of the epoch it resumed in covers just the
//     steps after the resume.
type Job struct {
	Config
	// NewModel, if set, builds the dense model instead of Config.Model's
	// nn model: for spec (the data set's image size and classes), seeded
	// (every replica builds the same initial parameters from the seed, and
	// the chief's are broadcast at start anyway), using up to shards
	// parallel parts of a batch. Config.Model then names it in the
	// settings, summaries and checkpoints (its Name() when empty). A
	// model that is an nn.Sequential (any model nn.NewSequential or
	// package nn/keras builds) also states its architecture: its digest
	// (nn.Architecture.Digest) is one of the settings the replicas compare
	// and checkpoints must match, and checkpoints record the architecture
	// itself (metadata "architecture"), so that evaluate.Checkpoint and
	// meshtrain eval rebuild the model from the checkpoint alone.
	NewModel func(spec nn.Spec, seed int64, shards int) (nn.Model, error)
	// Sparse holds sparse logistic regression's settings: set it (Model
	// SparseModel or empty) to train that model instead of a dense one.
	Sparse *SparseConfig
	// Strategy is how the replicas keep in step: Ring (nil), Gossip, or
	// *Elastic, the ring surviving lost peers and admitting restarted ones,
	// whose Membership forms the Groups (Run's g is then unused: pass nil).
	Strategy Strategy
	// Combiner combines a dense model's gradients across the replicas
	// under the ring (nil: Mean, the all-reduced average in float32). The
	// replicas compare its Name at start-up.
	Combiner Combiner
	// Faults are injected at named points of every step, under either
	// strategy (experiments and tests). Under Elastic, their ranks are
	// cluster indices and their steps count every generation's.
	Faults Faults
	// Callbacks are Keras's EarlyStopping, ReduceLROnPlateau and
	// ModelCheckpoint(save_best_only) on the test loss or accuracy (see
	// package callbacks), under the ring, elastic or not (not gossip).
	Callbacks callbacks.Config
	cbRun     *callbacks.Run // the last generation's (startCallbacks)

	// CheckpointDir, if set, is where the chief writes checkpoints and
	// where a run looks for one to resume from (the newest). Only the chief
	// reads or writes it; the state reaches the others by broadcast.
	CheckpointDir string
	// CheckpointEvery is the number of steps between checkpoints; 0 means
	// at the end of every epoch.
	CheckpointEvery int
	// KeepCheckpoints is how many checkpoints to keep (0: all).
	KeepCheckpoints int
	// Restore names a checkpoint file to resume from instead of the newest
	// in CheckpointDir.
	Restore string
	// HashEvery is the number of steps between parameter-hash comparisons;
	// 0 compares only at the end.
	HashEvery int
	// MeasureWait puts a barrier before the gradient all-reduce of every
	// WaitSampleEvery-th step, so that the time spent waiting for slower
	// replicas can be told apart from communicating: the share of waiting
	// in those steps' all-reduce phase is applied to every step's. (A
	// barrier every step would cost a sizeable share of a short LeNet
	// step: BENCHMARKS.md, "Figures behind the code": sampling the wait.)
	MeasureWait bool
	// NoShuffle keeps each shard in data-set order (for tests that compare
	// against one replica on the whole batch).
	NoShuffle bool
	// Stop, if set, is closed to stop the run early and gracefully (the
	// worker closes it on SIGTERM). The replicas vote every StopVoteEvery
	// steps; all stop after the same step, the chief writes a checkpoint
	// there (with CheckpointDir), and the run ends as usual (final hash
	// comparison, Summary) with Result.Stopped saying who asked. Gossip
	// runs do not vote: the replica sets the gossip stop flag, which
	// spreads with the averages, and every replica ends at its next step
	// with the final swap.
	Stop <-chan struct{}
	// Timeline, if set, records this replica's spans (input, compute,
	// wait, combine, update, evaluation, checkpoints, gossip averages) for
	// a trace (package timeline); the caller gathers and writes them.
	Timeline *timeline.Recorder
	// Observers receive every event of the run, every step's included
	// (see Observer; the log, the progress lines, TensorBoard and a
	// sampled hook are in package mirrored/observe); a slow one slows the
	// steps. They are called on the replica's goroutine: give each replica
	// run in one process its own, or make a shared one safe for
	// concurrent use.
	Observers []Observer
	// Resources, if set, starts a ResourceSampler at the start of the run
	// (observe.Resources samples the OS), given the group's byte counter
	// per link (nil if the group does not count): its samples reach the
	// observers and its history PeerStats.Resources.
	Resources func(links func() []collective.LinkTraffic) ResourceSampler
	// Cluster and AllReduceAlgo are the driver's settings that every
	// replica must share too, compared at start-up like the others: the
	// cluster list (a digest such as cluster.Cluster.Digest) and the
	// all-reduce algorithm. Checkpoints do not record them.
	Cluster, AllReduceAlgo string
}

// WaitSampleEvery is how often (in steps) Job.MeasureWait samples the time
// spent waiting for the slowest replica.
const WaitSampleEvery = 16

// Validate reports the first problem with the job's settings (the
// model's, the strategy's and the Job's own), naming the setting and what
// would be accepted. Run checks them too, with the faults' ranks against
// the group's size.
func (j *Job) Validate() error {
	_, err := j.builder()
	return err
}

// builder checks the settings and returns the model's builder: one for
// the dense models, one for sparse logistic regression.
func (j *Job) builder() (builder, error) {
	var b builder = (*denseBuilder)(j)
	if j.Sparse != nil || j.Model == SparseModel {
		b = (*sparseBuilder)(j)
	}
	if err := b.validate(); err != nil {
		return nil, err
	}
	if err := j.validateJob(); err != nil {
		return nil, err
	}
	st := j.strategy()
	if err := st.Validate(); err != nil {
		return nil, err
	}
	if err := st.check(j); err != nil {
		return nil, err
	}
	return b, j.Faults.Validate(-1)
}

// validateJob checks the Job's own settings, which every model shares.
func (j *Job) validateJob() error {
	switch {
	case j.CheckpointEvery < 0:
		return fmt.Errorf("checkpoint every %d steps: want ≥ 0 (0: every epoch)", j.CheckpointEvery)
	case j.KeepCheckpoints < 0:
		return fmt.Errorf("keep %d checkpoints: want ≥ 0 (0: all)", j.KeepCheckpoints)
	case j.HashEvery < 0:
		return fmt.Errorf("hash comparison every %d steps: want ≥ 0 (0: only at the end)", j.HashEvery)
	case j.Callbacks.Enabled() && !j.strategy().Lockstep():
		return errors.New("--early-stop-patience, --reduce-lr-on-plateau and --save-best act at the epochs every replica of the ring ends together: gossip's replicas end theirs apart (--strategy gossip is not supported); train with the ring")
	case j.Combiner != nil && j.Sparse != nil:
		return fmt.Errorf("combiner %s: it combines a dense model's gradients; sparse logistic regression exchanges its own (--exchange): leave it unset", j.Combiner.Name())
	case j.SyncBatchNorm && (j.Sparse != nil || !j.strategy().Lockstep()):
		return errors.New("--sync-batchnorm sums the statistics of a dense model's batch normalizations inside the ring's steps, taken together: sparse-lr has none, gossip's replicas step apart; drop it or train with the ring")
	}
	return j.Callbacks.Validate()
}

// Run trains job as replica g.Rank() of g.Size(), with job's strategy,
// and returns this replica's Summary. Every replica calls it with the same
// settings (compared at start-up: a difference stops every replica with a
// MismatchError naming it). A gossip run needs a Group made by NewGroup:
// its replicas talk pairwise, outside the collectives. Run a gossip group
// without a barrier after it: its replicas have already left together
// (the final swap), and a barrier would fail if a peer died.
func Run(ctx context.Context, job Job, g Group) (*Summary, error) {
	job.Strategy = job.strategy()
	return job.Strategy.run(ctx, &job, g)
}

// startup builds this replica's plan on g; a failure is told to the
// others in the handshake they are waiting in, so that they report this
// rank's problem instead of waiting for it.
func (j *Job) startup(ctx context.Context, g Group) (*plan, error) {
	p, err := j.build(ctx, g)
	if err != nil {
		return nil, failStartup(ctx, g, err)
	}
	return p, nil
}

// build checks the settings against the group and builds this replica's
// plan.
func (j *Job) build(ctx context.Context, g Group) (*plan, error) {
	b, err := j.builder()
	if err != nil {
		return nil, err
	}
	world := g.Size()
	if el, ok := j.Strategy.(*Elastic); ok {
		world = el.Membership.Size() // faults name cluster indices
	}
	if err := j.Faults.Validate(world); err != nil {
		return nil, err
	}
	if _, ok := replica.Comm(g); !ok && !j.strategy().Lockstep() {
		return nil, fmt.Errorf("strategy %s on a %T: its replicas talk pairwise, so they need a Group made by NewGroup over a collective.Comm (one replica has nobody to talk to: use the ring)", j.strategy().Name(), g)
	}
	p, err := b.build(ctx, g.Rank(), g.Size())
	if err != nil {
		return nil, err
	}
	p.settings = append(append(p.settings, j.strategy().settings()...), faultSettings(&j.Faults)...)
	return p, nil
}

// check checks an elastic job's own settings (Job.Validate: before its
// Membership is made).
func (el *Elastic) check(*Job) error {
	if el.MinWorkers < 0 || el.CommitEvery < 0 {
		return fmt.Errorf("elastic: --min-workers %d and --commit-every %d: want ≥ 0", el.MinWorkers, el.CommitEvery)
	}
	if el.LR != "" {
		return membership.CheckLRPolicy(el.LR)
	}
	return nil
}

// checkMembership checks an elastic run against its Membership.
func (el *Elastic) checkMembership() error {
	switch {
	case el.Membership == nil:
		return errors.New("elastic: no Membership to form the generations over (launch's worker makes one)")
	case el.MinWorkers > el.Membership.Size():
		return fmt.Errorf("elastic: --min-workers %d is more than the cluster's %d peers", el.MinWorkers, el.Membership.Size())
	}
	return membership.CheckSchedule(el.Schedule, el.Membership.Size(), el.CommitEvery)
}

// Train runs job as single-worker training: Run on a LocalGroup, with the
// ring strategy.
func Train(ctx context.Context, job Job) (*Summary, error) {
	if st := job.strategy(); !st.Lockstep() {
		return nil, fmt.Errorf("strategy %s with one worker: there is nobody to %s with; train alone with the ring strategy, or launch several workers", st.Name(), st.Name())
	}
	return Run(ctx, job, LocalGroup{})
}
