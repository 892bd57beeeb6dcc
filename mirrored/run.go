package mirrored

import (
	"context"
	"fmt"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/nn"
)

// Job is one replica's part of a multi-replica run: the training Config
// (identical on every replica) plus checkpointing, consistency checks and
// time accounting. Run it with RunJob on every replica of a Group.
//
// The strategy, on every replica:
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
	// barrier every step would cost 10-20% of a LeNet step at batch 32
	// on a loaded 2-core machine.)
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
	// OnEvent, if set, is called (on the calling goroutine) at start-up,
	// after each epoch and after each checkpoint, and with the training
	// steps at a bounded rate (see SampleInterval).
	OnEvent func(Event)
	// Cluster and AllReduceAlgo are the driver's settings that every
	// replica must share too, compared at start-up like the others: the
	// cluster list (a digest such as tfconfig.Cluster.Digest) and the
	// all-reduce algorithm. Checkpoints do not record them.
	Cluster, AllReduceAlgo string
}

// WaitSampleEvery is how often (in steps) Job.MeasureWait samples the time
// spent waiting for the slowest replica.
const WaitSampleEvery = 16

// Summary is one replica's view of a finished run: the run's figures
// (identical on every replica) and this peer's own.
type Summary struct {
	Run  *Result   `json:"run"`
	Peer PeerStats `json:"peer"`
}

// Validate reports the first problem with the job's settings (the Config's
// and the Job's own), naming the setting and what would be accepted.
func (j *Job) Validate() error { return j.validate() }

func (j *Job) validate() error {
	if err := j.Config.Validate(); err != nil {
		return err
	}
	return j.validateJob()
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
	}
	return nil
}

// RunJob runs job as replica g.Rank() of g.Size(). Every replica must call
// it with the same settings (checked at start-up).
func RunJob(ctx context.Context, job Job, g Group) (*Summary, error) {
	run, err := job.denseRun(ctx, g.Rank(), g.Size())
	if err != nil {
		// Say why in the handshake the others are waiting in, so that they
		// report this rank's problem instead of waiting for it.
		return nil, failStartup(ctx, g, err)
	}
	return runSync(ctx, &job, g, run)
}

// Train runs cfg as single-worker training: RunJob on a LocalGroup,
// without checkpoints.
func Train(ctx context.Context, cfg Config) (*Result, error) {
	sum, err := RunJob(ctx, Job{Config: cfg}, LocalGroup{})
	if err != nil {
		return nil, err
	}
	return sum.Run, nil
}

// RunGossip runs job as replica c.Rank() of c.Size() with decentralised
// asynchronous training in the manner of AD-PSGD (Lian et al., 2018):
//
//   - start-up: the replicas compare their settings (as RunJob does) and
//     rank 0 broadcasts the initial parameters; no collective is used
//     after that, so a dead peer cannot stop the others;
//   - each local step: copy the shared parameters, forward/backward on the
//     replica's own batch (data.ShardAuto over its shard, reshuffled each
//     pass), optimizer step on the shared parameters (which peers may have
//     averaged meanwhile: that is the step's staleness, bounded by
//     MaxStaleness); every Every steps, average with one peer chosen by
//     the schedule (gossip.Node), overlapped with the next step
//     unless WaitForAverage (a round whose predecessor is still in flight
//     is skipped, up to MaxSkip in a row, so computing rarely waits for
//     the network). No barrier: a slow replica only
//     answers late, never makes the others wait for its computation;
//   - the learning-rate schedule follows the cluster's progress (the sum
//     of the replicas' steps over N), so it matches the ring's per epoch;
//   - the run ends when the cluster has done the synchronous run's work
//     (Epochs × steps per epoch × N local steps; faster replicas do more
//     of them), or when a replica reaches the target accuracy;
//   - each time the cluster's work crosses an epoch, the replica evaluates
//     its own parameters on the whole test set; at the end the survivors swap their final
//     parameters and each reports the consensus distance and the accuracy
//     of their average;
//   - a peer that dies is detected (its link fails, or it does not answer
//     within the collective timeout), logged and dropped; the rest finish.
func RunGossip(ctx context.Context, job Job, gc GossipConfig, c *collective.Comm) (*GossipSummary, error) {
	gc.Strategy = StrategyGossip
	gc.Fill()
	run, err := job.gossipRun(ctx, &gc, c.Rank(), c.Size())
	if err != nil {
		return nil, failStartup(ctx, NewGroup(c), err)
	}
	return runGossip(ctx, &job, &gc, c, run)
}

// RunSparseGossip runs sparse logistic regression (a SparseJob) as gossip
// replica c.Rank() of c.Size(), as RunGossip does for the dense models,
// with one difference that matters at Criteo's D (135 MB of weights): each
// pairwise exchange carries only the coordinates either side changed since
// their last exchange (collective.GossipOptions.Sparse), never the dense
// vector. Each local step (gradient and update, a few thousand weights) runs
// under the gossip lock, so its staleness is 0.
//
// The optimizer must keep the weights themselves as its state: adagrad, or
// sgd without L2 (lazy decay would be applied to averaged values at the
// next touch, and ftrl recomputes each weight from its own accumulators,
// which would undo every average). Each replica evaluates its own weights
// on the whole test set each time the cluster's work crosses an epoch;
// there is no final average model (swapping D floats is what sparse
// gossip avoids), the consensus figures are the pairwise distances seen at
// each exchange (exact: coordinates not exchanged are equal).
func RunSparseGossip(ctx context.Context, job SparseJob, gc GossipConfig, c *collective.Comm) (*GossipSummary, error) {
	gc.Strategy = StrategyGossip
	gc.Fill()
	run, err := job.gossipRun(ctx, &gc, c.Rank(), c.Size())
	if err != nil {
		return nil, failStartup(ctx, NewGroup(c), err)
	}
	return runGossip(ctx, &job.Job, &gc, c, run)
}

// RunStrategy runs job as replica c.Rank() with the strategy gc names,
// injecting gc.Faults: the ring through RunJob (gossip is nil), gossip
// through RunGossip. Under gossip do not put a barrier after it: the
// replicas have already left together (RunGossip's final swap), and a
// barrier would fail if a peer died.
func RunStrategy(ctx context.Context, job Job, gc GossipConfig, c *collective.Comm) (*Summary, *GossipReport, error) {
	gc.Fill()
	if err := gc.Validate(c.Size()); err != nil {
		return nil, nil, err
	}
	if gc.Strategy == StrategyGossip {
		s, err := RunGossip(ctx, job, gc, c)
		if err != nil {
			return nil, nil, err
		}
		return &s.Summary, &s.Gossip, nil
	}
	nparams, err := modelParams(job.Model)
	if err != nil {
		return nil, nil, err
	}
	s, err := RunJob(ctx, job, WithFaults(NewGroup(c), gc.Faults, nparams))
	return s, nil, err
}

// modelParams is the parameter count of a model (building it once).
func modelParams(name string) (int, error) {
	m, err := nn.NewModelShards(name, 0, 1)
	if err != nil {
		return 0, err
	}
	return len(m.Params()), nil
}

// RunSparseStrategy is RunStrategy for sparse logistic regression: the
// synchronous RunSparseJob (whose sparse all-gather cannot be wrapped, so
// no fault injection) or RunSparseGossip.
func RunSparseStrategy(ctx context.Context, job SparseJob, gc GossipConfig, c *collective.Comm) (*Summary, *GossipReport, error) {
	gc.Fill()
	if err := gc.Validate(c.Size()); err != nil {
		return nil, nil, err
	}
	if gc.Strategy == StrategyGossip {
		s, err := RunSparseGossip(ctx, job, gc, c)
		if err != nil {
			return nil, nil, err
		}
		return &s.Summary, &s.Gossip, nil
	}
	if gc.Faults.SlowFactor > 1 || gc.Faults.KillAfter > 0 {
		return nil, nil, fmt.Errorf("--slow-peer and --kill-after with model %s work under --strategy gossip only", SparseModel)
	}
	s, err := RunSparseJob(ctx, job, NewGroup(c))
	return s, nil, err
}

// RunSparseJob runs job as replica g.Rank() of g.Size() (see SparseJob).
// Every replica must call it with the same settings (checked at start-up).
// The Summary's Run.Params is D; its epochs carry the test accuracy,
// log-loss and AUC.
func RunSparseJob(ctx context.Context, job SparseJob, g Group) (*Summary, error) {
	run, err := job.syncRun(ctx, g)
	if err != nil {
		return nil, failStartup(ctx, g, err)
	}
	return runSync(ctx, &job.Job, g, run)
}
