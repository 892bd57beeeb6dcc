package mirrored

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
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

// PeerStats are one replica's own figures: what users of TensorFlow's
// MultiWorkerMirroredStrategy gathered with dstat, top and iftop.
type PeerStats struct {
	Rank     int `json:"rank"`
	Steps    int `json:"steps"`    // steps this process ran (after any resume)
	Examples int `json:"examples"` // training examples this process computed on
	// ExamplesPerSec is Examples over this process's training time.
	ExamplesPerSec float64 `json:"peer_examples_per_sec"`
	TestAccuracy   float64 `json:"test_accuracy"`
	// BytesSent and BytesReceived count collective frames (headers and
	// payloads) as the transport saw them, 0 if it does not count.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
	// Links splits them per link (peer rank), where known.
	Links []collective.LinkTraffic `json:"links,omitempty"`
	// CPUSeconds (user + system) and PeakRSSBytes are the process's, from
	// getrusage: with several replicas in one process they are shared.
	CPUSeconds   float64 `json:"cpu_seconds"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
	// The training steps' time, split: computing (input excluded:
	// forward, backward, update), communicating (the gradient all-reduce
	// and the hash checks) and waiting (for the input pipeline and, with
	// MeasureWait, for the slowest replica: estimated from sampled steps,
	// see Job.MeasureWait).
	ComputeSeconds float64 `json:"compute_seconds"`
	CommSeconds    float64 `json:"comm_seconds"`
	WaitSeconds    float64 `json:"wait_seconds"`
	ComputeShare   float64 `json:"compute_share"`
	CommShare      float64 `json:"comm_share"`
	WaitShare      float64 `json:"wait_share"`
	// EvalSeconds and CheckpointSeconds are spent outside the steps.
	EvalSeconds       float64 `json:"eval_seconds"`
	CheckpointSeconds float64 `json:"checkpoint_seconds"`
	ParamsSHA256      string  `json:"params_sha256"`
	// ResumedFrom is the checkpoint the run continued from (on the chief;
	// "rank 0's checkpoint" elsewhere) and ResumedStep its step.
	ResumedFrom string `json:"resumed_from,omitempty"`
	ResumedStep int    `json:"resumed_step,omitempty"`
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

// denseRun checks the settings, loads the data set (fetching MNIST if
// need be) and builds the replica: everything the synchronous loop needs.
// A bad flag is reported before anything is loaded.
func (j *Job) denseRun(ctx context.Context, rank, world int) (*syncRun, error) {
	if err := j.validate(); err != nil {
		return nil, err
	}
	cfg := &j.Config
	train, test, classes, err := cfg.images(ctx, rank)
	if err != nil {
		return nil, err
	}
	rep, err := newDenseReplica(cfg, test, classes, rank, world)
	if err != nil {
		return nil, err
	}
	digest := "unchecked" // one replica with no checkpoint: nothing to compare with
	if world > 1 || j.CheckpointDir != "" || j.Restore != "" {
		digest = dataDigest(train, test)
	}
	res := Result{
		Model: cfg.Model, Params: len(rep.params), BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Schedule: cfg.Schedule, WarmupEpochs: cfg.WarmupEpochs, Seed: cfg.Seed, TestExamples: test.N,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss,
	}
	if cfg.Schedule == nn.ScheduleStep {
		res.LRGamma, res.LRDecayEpochs = cfg.LRGamma, cfg.LRDecayEpochs
	}
	return &syncRun{
		rep: rep, settings: j.settings(len(rep.params), world, digest), shard: data.ShardSize(train.N, world, rank),
		pipeline: func(ctx context.Context, startEpoch, epochs, _ int) (*data.Pipeline, error) {
			pcfg := data.TrainConfig(rank, world, cfg.BatchSize, uint64(cfg.Seed), epochs)
			pcfg.Policy = data.ShardAuto
			pcfg.StartEpoch = startEpoch - 1 // the pipeline counts epochs from 0
			if j.NoShuffle {
				pcfg.ShuffleBuffer = 0
			}
			return data.NewPipeline(ctx, train.Dataset(), pcfg)
		},
		schedule: cfg.schedule,
		result:   res,
		header: func(steps, examples int) string {
			return fmt.Sprintf("%s: %d parameters, %d replica(s) × batch %d (global batch %d), %d steps per epoch, %d training and %d test examples",
				cfg.Model, len(rep.params), world, cfg.BatchSize, world*cfg.BatchSize, steps, examples, test.N)
		},
		broadcastStart: true,
		perStepLoss:    true,
	}, nil
}

// images returns the training and test images the run uses: Config.MNIST,
// or MNIST loaded (or fetched) from DataDir, cut to the example limits;
// and the data set's number of classes (counted before the cut).
func (c *Config) images(ctx context.Context, rank int) (train, test *data.Images, classes int, err error) {
	mn := c.MNIST
	if mn == nil {
		opts := c.MNISTOptions(c.logger().With(zap.Int("rank", rank)).Named("data"))
		// A fetch shows its bytes where the run shows its progress.
		opts.Progress = c.Progress
		if mn, err = data.LoadMNIST(ctx, opts); err != nil {
			return nil, nil, 0, err
		}
	}
	return firstN(mn.Train, c.TrainExamples), firstN(mn.Test, c.TestExamples), mn.NumClasses(), nil
}

// MNISTOptions are the options that load the run's data set (DataDir,
// AllowUnverified), logging to log.
func (c *Config) MNISTOptions(log *zap.Logger) data.MNISTOptions {
	return data.MNISTOptions{Dir: c.DataDir, AllowUnverified: c.AllowUnverified, Logger: log}
}

// schedule is the learning rate per global step at steps per epoch.
func (c *Config) schedule(steps int) (nn.Schedule, error) {
	return nn.NewSchedule(nn.ScheduleConfig{
		Kind: c.Schedule, Base: c.LR, Gamma: c.LRGamma,
		DecayEvery:  max(1, int(math.Round(c.LRDecayEpochs*float64(steps)))),
		TotalSteps:  c.Epochs * steps,
		MinLR:       c.MinLR,
		WarmupSteps: int(math.Round(c.WarmupEpochs * float64(steps))),
	})
}

// logger is the run's logger: Logger, or a no-op one when unset.
func (c *Config) logger() *zap.Logger {
	if c.Logger == nil {
		return zap.NewNop()
	}
	return c.Logger
}

// skipTo reads the first skip batches of a resumed epoch: the checkpoint
// was taken after them.
func skipTo(ctx context.Context, pipe *data.Pipeline, skip, epoch int) error {
	for range skip {
		if _, err := pipe.Next(ctx); err != nil {
			return fmt.Errorf("skipping to the checkpoint's position in epoch %d: %w", epoch, err)
		}
	}
	return nil
}

// syncTimes adds up where a synchronous run's time went.
type syncTimes struct {
	compute, comm, wait time.Duration
	// phase is the time from the end of a step's gradient to the end of
	// its exchange; sampledWait/sampledPhase the barrier's part of it in
	// the steps sampled by MeasureWait.
	phase, sampledWait, sampledPhase time.Duration
}

// step adds one step's times (see stepClock).
func (s *syncTimes) step(c stepClock, sample bool) {
	s.wait += c[1].Sub(c[0])
	s.compute += c[2].Sub(c[1]) + c[5].Sub(c[4])
	s.phase += c[4].Sub(c[2])
	if sample {
		s.sampledWait += c[3].Sub(c[2])
		s.sampledPhase += c[4].Sub(c[2])
	}
}

// finish fills p's end-of-run figures, splitting the exchanges' time into
// communicating and waiting (splitExchange).
func (s *syncTimes) finish(p *PeerStats, counted any) {
	comm, wait := splitExchange(s.phase, s.sampledWait, s.sampledPhase)
	p.finish(counted, s.compute, s.comm+comm, s.wait+wait)
}

// splitExchange divides the time a run spent in its gradient exchanges
// (phase: from the end of each step's compute to the end of its exchange)
// into communicating and waiting for slower peers, in the proportion a
// barrier measured on the sampled steps (sampledWait of sampledPhase).
// Without samples all of it counts as communication.
func splitExchange(phase, sampledWait, sampledPhase time.Duration) (comm, wait time.Duration) {
	if sampledPhase <= 0 {
		return phase, 0
	}
	wait = time.Duration(float64(phase) * float64(sampledWait) / float64(sampledPhase))
	return phase - wait, wait
}

// finish fills the end-of-run figures every strategy reports: the bytes
// moved (when counted implements Traffic), the process's CPU time and peak
// memory, the split of step time and the throughput over it (Examples
// must be set).
func (p *PeerStats) finish(counted any, compute, comm, wait time.Duration) {
	if tr, ok := counted.(Traffic); ok {
		p.BytesSent, p.BytesReceived = tr.Traffic()
	}
	p.CPUSeconds, p.PeakRSSBytes = rusage.CPUTime().Seconds(), rusage.PeakRSS()
	p.ComputeSeconds, p.CommSeconds, p.WaitSeconds = compute.Seconds(), comm.Seconds(), wait.Seconds()
	if total := compute + comm + wait; total > 0 {
		p.ComputeShare, p.CommShare, p.WaitShare = float64(compute)/float64(total), float64(comm)/float64(total), float64(wait)/float64(total)
		p.ExamplesPerSec = float64(p.Examples) / total.Seconds()
	}
}

// targetMet says whether the last epoch reached a target of cfg.
func targetMet(cfg *Config, eps []Epoch) bool {
	if len(eps) == 0 {
		return false
	}
	ep := eps[len(eps)-1]
	return (cfg.TargetAccuracy > 0 && ep.TestAccuracy >= cfg.TargetAccuracy) || (cfg.TargetLoss > 0 && ep.Loss <= cfg.TargetLoss)
}

func markAccuracy(res *Result, ep Epoch) {
	for _, mark := range accuracyMarks {
		key := fmt.Sprint(mark)
		if _, done := res.TimeToAccuracy[key]; !done && ep.TestAccuracy >= mark {
			res.TimeToAccuracy[key] = ep.TrainSeconds
		}
	}
}

// resumePoint (chief only) is its part of the start-up handshake: the
// checkpoint to resume from (findCheckpoint; nil if none), where it
// resumes with what to warn of, and any problem as text for every replica
// to report.
func (j *Job) resumePoint(settings []Setting, fp string, nparams, nstate int) (*checkpoint.Checkpoint, *resumePos, string) {
	ck, path, warnings, err := j.findCheckpoint(settings, fp, nparams, nstate)
	if err != nil {
		return nil, nil, err.Error()
	}
	if ck == nil {
		return nil, nil, ""
	}
	var hist []Epoch
	problem := ""
	if ck.History != "" {
		if err := json.Unmarshal([]byte(ck.History), &hist); err != nil {
			problem = fmt.Sprintf("checkpoint %s: metadata history: %v", path, err)
		}
	}
	return ck, &resumePos{Path: path, Step: ck.Step, Epoch: ck.Epoch, StepInEpoch: ck.StepInEpoch, History: hist, Warnings: warnings}, problem
}

// findCheckpoint (chief only) loads the checkpoint to resume from
// (loadCheckpoint) and checks that it belongs to this configuration.
func (j *Job) findCheckpoint(settings []Setting, fp string, nparams, nstate int) (*checkpoint.Checkpoint, string, []string, error) {
	ck, path, warnings, err := j.loadCheckpoint()
	if err != nil || ck == nil {
		return nil, "", nil, err
	}
	if ck.Fingerprint != fp {
		return nil, "", nil, otherConfig(ck, path, settings, fp)
	}
	if len(ck.Params) != nparams || len(ck.OptState) != nstate {
		return nil, "", nil, fmt.Errorf("checkpoint %s holds %d parameters and %d optimizer values, this model has %d and %d", path, len(ck.Params), len(ck.OptState), nparams, nstate)
	}
	return ck, path, warnings, nil
}

// loadCheckpoint (chief only) removes the half-written checkpoints a
// killed run left in CheckpointDir, then reads Restore if set, else the
// newest intact checkpoint there, falling back past damaged ones (each a
// warning); nil if there is none. A damaged Restore is an error: the user
// named that one. So is a directory of damaged checkpoints only.
func (j *Job) loadCheckpoint() (*checkpoint.Checkpoint, string, []string, error) {
	if j.CheckpointDir != "" {
		removed, err := checkpoint.RemoveTemps(j.CheckpointDir)
		for _, p := range removed {
			j.logger().Warn("removed a half-written checkpoint left by a killed run", zap.String("path", p))
		}
		if err != nil {
			return nil, "", nil, err
		}
	}
	if j.Restore != "" {
		ck, err := checkpoint.Read(j.Restore)
		if errors.Is(err, checkpoint.ErrDamaged) {
			err = fmt.Errorf("%w: it was named by --restore, so no other is used instead: name an intact checkpoint, or leave out --restore to resume from the newest intact one in --checkpoint-dir", err)
		}
		if err != nil {
			return nil, "", nil, err
		}
		return ck, j.Restore, unverified(ck, j.Restore), nil
	}
	if j.CheckpointDir == "" {
		return nil, "", nil, nil
	}
	all, err := checkpoint.List(j.CheckpointDir)
	if err != nil {
		return nil, "", nil, err
	}
	var skipped []string
	for i := len(all) - 1; i >= 0; i-- {
		ck, err := checkpoint.Read(all[i])
		if err == nil {
			for k := range skipped {
				skipped[k] += "; falling back to " + all[i]
			}
			return ck, all[i], append(skipped, unverified(ck, all[i])...), nil
		}
		if !errors.Is(err, checkpoint.ErrDamaged) {
			return nil, "", nil, fmt.Errorf("%w (move it away, or pass --restore with an older checkpoint)", err)
		}
		skipped = append(skipped, err.Error())
	}
	if len(skipped) > 0 {
		return nil, "", nil, fmt.Errorf("no intact checkpoint in %s: %s: move them away to start afresh", j.CheckpointDir, strings.Join(skipped, "; "))
	}
	return nil, "", nil, nil
}

// unverified is the warning for a checkpoint from before digests, if ck
// is one.
func unverified(ck *checkpoint.Checkpoint, path string) []string {
	if !ck.Unverified {
		return nil
	}
	return []string{fmt.Sprintf("checkpoint %s: no digest: unverified (format %s, written before meshtrain verified checkpoints)", path, checkpoint.FormatV1)}
}

// otherConfig is the error for a checkpoint written under another
// configuration fingerprint: the settings that differ when its saved
// configuration says.
func otherConfig(ck *checkpoint.Checkpoint, path string, settings []Setting, fp string) error {
	var saved map[string]string
	if err := json.Unmarshal([]byte(ck.Config), &saved); err == nil {
		var theirs, mine []Setting
		for _, s := range settings {
			if s.Resume {
				mine = append(mine, s)
				if v, ok := saved[s.Name]; ok {
					theirs = append(theirs, Setting{Name: s.Name, Value: v})
				}
			}
		}
		if err := compareSettings([]string{"the checkpoint", "this run"}, [][]Setting{theirs, mine}); err != nil {
			return fmt.Errorf("checkpoint %s was written by another configuration: %w: resume with the same flags, or use another --checkpoint-dir", path, err)
		}
	}
	return fmt.Errorf("checkpoint %s was written by another configuration (fingerprint %.12s…, this run %.12s…)", path, ck.Fingerprint, fp)
}

// compareParamHashes all-gathers the SHA-256 of every replica's parameters
// (sum: this replica's, paramsSum) and fails, naming the ranks, if they
// differ.
func compareParamHashes(ctx context.Context, g Group, sum [32]byte, what string) error {
	all, err := g.AllGather(ctx, sum[:])
	if err != nil {
		return fmt.Errorf("comparing parameter hashes at %s: %w", what, err)
	}
	var order []string
	ranks := map[string][]string{}
	for r, h := range all {
		k := hex.EncodeToString(h)
		if _, ok := ranks[k]; !ok {
			order = append(order, k)
		}
		ranks[k] = append(ranks[k], fmt.Sprintf("rank %d", r))
	}
	if len(order) == 1 {
		return nil
	}
	parts := make([]string, len(order))
	for i, k := range order {
		parts[i] = fmt.Sprintf("%s %s sha256 %.16s…", joinParties(ranks[k]), haveHas(len(ranks[k])), k)
	}
	return fmt.Errorf("replicas diverged at %s: %s: their parameters should be bitwise identical (a bug, or memory corruption on a peer)", what, strings.Join(parts, ", "))
}

func haveHas(n int) string {
	if n == 1 {
		return "has"
	}
	return "have"
}

// firstN returns the first n images of im (all if n is 0 or too large).
func firstN(im *data.Images, n int) *data.Images {
	if n <= 0 || n >= im.N {
		return im
	}
	d := im.Rows * im.Cols
	return &data.Images{N: n, Rows: im.Rows, Cols: im.Cols, Pixels: im.Pixels[:n*d], Labels: im.Labels[:n]}
}

// denseRange returns the normalised images [lo, hi) of im and their labels,
// through the data package's Dataset so the normalisation is the
// pipeline's.
func denseRange(im *data.Images, lo, hi int) ([]float32, []int32) {
	ds := im.Dataset()
	var b data.Batch
	b.X = make([]float32, 0, (hi-lo)*ds.Dim())
	b.Labels = make([]float32, 0, hi-lo)
	for i := lo; i < hi; i++ {
		ds.Append(&b, i)
	}
	return b.X, b.IntLabels(nil)
}
