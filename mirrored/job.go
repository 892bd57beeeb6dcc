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

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/tensorboard"
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
	// OnEvent, if set, is called (on the calling goroutine) at start-up,
	// after each epoch and after each checkpoint.
	OnEvent func(Event)
}

// WaitSampleEvery is how often (in steps) Job.MeasureWait samples the time
// spent waiting for the slowest replica.
const WaitSampleEvery = 16

// Event reports progress to whoever runs the job (the launcher).
type Event struct {
	Kind  string `json:"kind"` // "start", "resumed", "epoch", "checkpoint"
	Rank  int    `json:"rank"`
	Step  int    `json:"step"`  // global steps done
	Steps int    `json:"steps"` // global steps the run will take at most
	Epoch *Epoch `json:"epoch,omitempty"`
	Path  string `json:"path,omitempty"` // checkpoint file
	Info  string `json:"info,omitempty"` // "start": the run in one line
}

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
	ExamplesPerSec float64 `json:"examples_per_sec"`
	TestAccuracy   float64 `json:"test_accuracy"`
	// BytesSent and BytesReceived count collective frames (headers and
	// payloads) as the transport saw them, 0 if it does not count.
	BytesSent     int64 `json:"bytes_sent"`
	BytesReceived int64 `json:"bytes_received"`
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

// hello is what each replica sends in the start-up all-gather.
type hello struct {
	Settings []Setting `json:"settings"`
	// Chief only: where to resume, or why it could not.
	Resume *resumeInfo `json:"resume,omitempty"`
	Error  string      `json:"error,omitempty"`
}

type resumeInfo struct {
	Path        string  `json:"path"`
	Step        int     `json:"step"`
	Epoch       int     `json:"epoch"`
	StepInEpoch int     `json:"step_in_epoch"`
	History     []Epoch `json:"history"`
}

// Validate reports the first problem with the job's settings (the Config's
// and the Job's own), naming the setting and what would be accepted.
func (j *Job) Validate() error { return j.validate() }

func (j *Job) validate() error {
	if err := j.Config.Validate(); err != nil {
		return err
	}
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
	wallStart := time.Now()
	cfg := &job.Config
	rank, world := g.Rank(), g.Size()
	log := cfg.logger().With(zap.Int("rank", rank))
	emit := rankEvents(job.OnEvent, rank)

	var (
		trainSet, testSet *data.Images
		model             nn.Model
		params, grads     []float32
		opt               nn.Optimizer
		steps             int
		sched             nn.Schedule
	)
	setup := func() error {
		mn := cfg.MNIST
		if mn == nil {
			var err error
			if mn, err = data.LoadMNIST(ctx, data.MNISTOptions{Dir: cfg.DataDir, Logger: log.Named("data")}); err != nil {
				return err
			}
		}
		trainSet, testSet = firstN(mn.Train, cfg.TrainExamples), firstN(mn.Test, cfg.TestExamples)
		shards := cfg.Shards
		if shards == 0 {
			shards = nn.DefaultShards
		}
		var err error
		if model, err = nn.NewModelShards(cfg.Model, cfg.Seed, shards); err != nil {
			return err
		}
		if d := trainSet.Rows * trainSet.Cols; d != model.InputDim() {
			return fmt.Errorf("model %s takes %d inputs, the images have %d pixels", cfg.Model, model.InputDim(), d)
		}
		params, grads = model.Params(), model.Grads()
		if opt, err = nn.NewOptimizer(cfg.Optimizer, nn.OptimizerConfig{
			Params: len(params), LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay}); err != nil {
			return err
		}
		if steps = data.Steps(trainSet.N, world, cfg.BatchSize, true); steps == 0 {
			return fmt.Errorf("%d training examples over %d replicas give no full batch of %d: use a smaller batch or more examples",
				trainSet.N, world, cfg.BatchSize)
		}
		sched, err = nn.NewSchedule(nn.ScheduleConfig{
			Kind: cfg.Schedule, Base: cfg.LR, Gamma: cfg.LRGamma,
			DecayEvery:  max(1, int(math.Round(cfg.LRDecayEpochs*float64(steps)))),
			TotalSteps:  cfg.Epochs * steps,
			MinLR:       cfg.MinLR,
			WarmupSteps: int(math.Round(cfg.WarmupEpochs * float64(steps))),
		})
		return err
	}
	// Settings first: a bad flag is reported before MNIST is loaded (or
	// fetched) and the model built.
	err := job.validate()
	if err == nil {
		err = setup()
	}
	if err != nil {
		// Say why in the handshake the others are waiting in, so that they
		// report this rank's problem instead of waiting for it.
		b, _ := json.Marshal(hello{Error: err.Error()}) // a string: cannot fail
		_, _ = g.AllGather(ctx, b)
		return nil, err
	}

	// Start-up handshake: settings from everyone, the resume point from the
	// chief, in one all-gather.
	digest := "unchecked" // one replica with no checkpoint: nothing to compare with
	if world > 1 || job.CheckpointDir != "" || job.Restore != "" {
		digest = dataDigest(trainSet, testSet)
	}
	settings := job.settings(len(params), world, digest)
	fp := Fingerprint(settings)
	me := hello{Settings: settings}
	var ck *Checkpoint
	if rank == 0 {
		ck, me.Resume, me.Error = job.resumePoint(settings, fp, len(params), len(opt.State()))
	}
	hb, err := json.Marshal(me)
	if err != nil {
		return nil, err
	}
	all, err := g.AllGather(ctx, hb)
	if err != nil {
		return nil, fmt.Errorf("start-up handshake (comparing the peers' settings): %w", err)
	}
	hellos := make([]hello, world)
	who := make([]string, world)
	sets := make([][]Setting, world)
	var failed []error
	for r, b := range all {
		if err := json.Unmarshal(b, &hellos[r]); err != nil {
			return nil, fmt.Errorf("start-up handshake: rank %d sent an unreadable hello (a different meshtrain version?): %w", r, err)
		}
		who[r], sets[r] = fmt.Sprintf("rank %d", r), hellos[r].Settings
		switch e := hellos[r].Error; {
		case e == "":
		case r == rank:
			failed = append(failed, errors.New(e))
		case r == 0:
			failed = append(failed, fmt.Errorf("rank 0 (the chief) could not start: %s", e))
		default:
			failed = append(failed, fmt.Errorf("rank %d could not start: %s", r, e))
		}
	}
	if len(failed) > 0 {
		return nil, errors.Join(failed...)
	}
	if err := compareSettings(who, sets); err != nil {
		return nil, fmt.Errorf("the peers were started with different settings: %w: start every peer with the same training flags", err)
	}
	resume := hellos[0].Resume

	if ck != nil {
		copy(params, ck.Params)
		copy(opt.State(), ck.OptState)
	}
	// Start equal: the chief's parameters and optimizer state everywhere.
	if err := g.Broadcast(ctx, params, 0); err != nil {
		return nil, fmt.Errorf("broadcasting the initial parameters from rank 0: %w", err)
	}
	if st := opt.State(); len(st) > 0 {
		if err := g.Broadcast(ctx, st, 0); err != nil {
			return nil, fmt.Errorf("broadcasting the optimizer state from rank 0: %w", err)
		}
	}

	res := &Result{
		Model: cfg.Model, Params: len(params), Replicas: world, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: cfg.Optimizer, LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay,
		Schedule: cfg.Schedule, WarmupEpochs: cfg.WarmupEpochs, Seed: cfg.Seed,
		TrainExamples: trainSet.N, TestExamples: testSet.N, StepsPerEpoch: steps,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss,
		TimeToAccuracy: map[string]float64{},
	}
	if cfg.Schedule == nn.ScheduleStep {
		res.LRGamma, res.LRDecayEpochs = cfg.LRGamma, cfg.LRDecayEpochs
	}
	peer := PeerStats{Rank: rank}
	startEpoch, skip, global := 1, 0, 0
	var trainTime time.Duration
	if resume != nil {
		startEpoch, skip, global = resume.Epoch, resume.StepInEpoch, resume.Step
		res.EpochResults = resume.History
		if n := len(resume.History); n > 0 {
			trainTime = time.Duration(resume.History[n-1].TrainSeconds * float64(time.Second))
			for _, ep := range resume.History {
				markAccuracy(res, ep)
			}
		}
		peer.ResumedFrom, peer.ResumedStep = resume.Path, resume.Step
		if rank != 0 {
			peer.ResumedFrom = "rank 0's " + resume.Path
		}
		if startEpoch < 1 || global != (startEpoch-1)*steps+skip {
			return nil, fmt.Errorf("checkpoint %s: step %d is not epoch %d step %d at %d steps per epoch: it belongs to another configuration", resume.Path, global, startEpoch, skip, steps)
		}
		log.Info("resumed", zap.String("checkpoint", resume.Path), zap.Int("step", global), zap.Int("epoch", startEpoch))
		if cfg.Progress != nil && rank == 0 {
			fmt.Fprintf(cfg.Progress, "resumed from %s: step %d, epoch %d step %d\n", resume.Path, global, startEpoch, skip)
		}
		emit(Event{Kind: "resumed", Step: global, Steps: cfg.Epochs * steps, Path: resume.Path})
	}
	done := startEpoch > cfg.Epochs || targetMet(cfg, res.EpochResults)

	// Evaluation shard: a contiguous part of the test set.
	lo, hi := rank*testSet.N/world, (rank+1)*testSet.N/world
	testX, testY := denseRange(testSet, lo, hi)

	var tb *tensorboard.Writer
	if cfg.LogDir != "" {
		if tb, err = tensorboard.Create(tensorboard.WorkerDir(cfg.LogDir, rank), time.Now()); err != nil {
			return nil, err
		}
		defer tb.Close()
	}
	header := fmt.Sprintf("%s: %d parameters, %d replica(s) × batch %d (global batch %d), %d steps per epoch, %d training and %d test examples",
		cfg.Model, len(params), world, cfg.BatchSize, world*cfg.BatchSize, steps, trainSet.N, testSet.N)
	if cfg.Progress != nil && rank == 0 {
		fmt.Fprintln(cfg.Progress, header)
	}
	emit(Event{Kind: "start", Step: global, Steps: cfg.Epochs * steps, Info: header})

	var times syncTimes
	var evalTime, ckTime time.Duration
	saveCheckpoint := func(epoch, stepInEpoch int) error {
		if rank != 0 || job.CheckpointDir == "" {
			return nil
		}
		t := time.Now()
		hist, _ := json.Marshal(res.EpochResults) // plain numbers: cannot fail
		path, err := WriteCheckpoint(job.CheckpointDir, &Checkpoint{
			Model: cfg.Model, Params: params, OptState: opt.State(),
			Step: global, Epoch: epoch, StepInEpoch: stepInEpoch, StepsPerEpoch: steps, Seed: cfg.Seed,
			Fingerprint: fp, Config: settingsJSON(settings), History: string(hist), SavedAt: time.Now(),
		}, job.KeepCheckpoints)
		ckTime += time.Since(t)
		if err != nil {
			return fmt.Errorf("writing the checkpoint at step %d: %w", global, err)
		}
		log.Debug("checkpoint", zap.String("path", path), zap.Int("step", global))
		emit(Event{Kind: "checkpoint", Step: global, Steps: cfg.Epochs * steps, Path: path})
		return nil
	}
	checkHashes := func(what string) error {
		t := time.Now()
		err := compareParamHashes(ctx, g, params, what)
		times.comm += time.Since(t)
		return err
	}

	if !done {
		pcfg := data.TrainConfig(rank, world, cfg.BatchSize, uint64(cfg.Seed), cfg.Epochs-startEpoch+1)
		pcfg.Policy = data.ShardAuto
		pcfg.StartEpoch = startEpoch - 1 // the pipeline counts epochs from 0
		if job.NoShuffle {
			pcfg.ShuffleBuffer = 0
		}
		pipe, err := data.NewPipeline(ctx, trainSet.Dataset(), pcfg)
		if err != nil {
			return nil, err
		}
		defer pipe.Close()
		if pipe.StepsPerEpoch() != steps {
			return nil, fmt.Errorf("input pipeline yields %d steps per epoch, expected %d", pipe.StepsPerEpoch(), steps)
		}
		if err := skipTo(ctx, pipe, skip, startEpoch); err != nil {
			return nil, err
		}

		var labels []int32
		scale := 1 / float32(world)
		for epoch := startEpoch; epoch <= cfg.Epochs; epoch++ {
			epochStart := time.Now()
			var lossSum float64
			examples, first := 0, 0
			if epoch == startEpoch {
				first = skip
			}
			for step := first; step < steps; step++ {
				t0 := time.Now()
				b, err := pipe.Next(ctx)
				if err != nil {
					return nil, fmt.Errorf("epoch %d step %d: reading the next batch: %w", epoch, step, err)
				}
				t1 := time.Now()
				opt.SetLR(sched.At(global))
				if b.Size > 0 {
					labels = b.IntLabels(labels)
					loss, err := model.ForwardBackward(b.X, labels, b.Size)
					if err != nil {
						return nil, fmt.Errorf("epoch %d step %d: %w", epoch, step, err)
					}
					if math.IsNaN(loss) || math.IsInf(loss, 0) {
						return nil, &NonFiniteError{Epoch: epoch, Step: step, GlobalStep: global, Loss: loss}
					}
					lossSum += loss
					examples += b.Size
				} else {
					clear(grads) // an empty batch still takes part in the all-reduce
				}
				t2 := time.Now()
				sample := job.MeasureWait && global%WaitSampleEvery == 0
				if sample {
					if err := g.Barrier(ctx); err != nil {
						return nil, fmt.Errorf("epoch %d step %d: waiting for the other replicas: %w", epoch, step, err)
					}
				}
				t3 := time.Now()
				if err := g.AllReduceSum(ctx, grads); err != nil {
					return nil, fmt.Errorf("epoch %d step %d: all-reducing the gradients: %w", epoch, step, err)
				}
				t4 := time.Now()
				if world > 1 {
					for i := range grads {
						grads[i] *= scale
					}
				}
				opt.Step(params, grads)
				global++
				times.step(t0, t1, t2, t3, t4, time.Now(), sample)

				if job.HashEvery > 0 && global%job.HashEvery == 0 {
					if err := checkHashes(fmt.Sprintf("step %d", global)); err != nil {
						return nil, err
					}
				}
				if job.CheckpointEvery > 0 && global%job.CheckpointEvery == 0 && step+1 < steps {
					if err := saveCheckpoint(epoch, step+1); err != nil {
						return nil, err
					}
				}
			}
			elapsed := time.Since(epochStart)
			trainTime += elapsed
			peer.Steps += steps - first
			peer.Examples += examples

			agg := []float32{float32(lossSum), float32(steps - first), float32(examples)}
			if err := g.AllReduceSum(ctx, agg); err != nil {
				return nil, fmt.Errorf("epoch %d: all-reducing the epoch loss: %w", epoch, err)
			}
			ep := Epoch{Epoch: epoch, Loss: float64(agg[0]) / float64(agg[1]), LR: opt.LR(),
				ExamplesPerSec: float64(agg[2]) / elapsed.Seconds(), TrainSeconds: trainTime.Seconds()}

			te := time.Now()
			testLoss, correct := 0.0, 0
			if hi > lo {
				if testLoss, correct, err = model.Evaluate(testX, testY, hi-lo); err != nil {
					return nil, fmt.Errorf("epoch %d: evaluating on the test set: %w", epoch, err)
				}
			}
			ev := []float32{float32(testLoss), float32(correct)}
			if err := g.AllReduceSum(ctx, ev); err != nil {
				return nil, fmt.Errorf("epoch %d: all-reducing the test counts: %w", epoch, err)
			}
			evalTime += time.Since(te)
			ep.TestLoss, ep.TestAccuracy = float64(ev[0])/float64(testSet.N), float64(ev[1])/float64(testSet.N)
			if world == 1 { // exact, not rounded through float32
				ep.Loss = lossSum / float64(steps-first)
				ep.TestLoss = testLoss / float64(testSet.N)
			}
			res.EpochResults = append(res.EpochResults, ep)
			markAccuracy(res, ep)

			log.Info("epoch", zap.Int("epoch", epoch), zap.Float64("loss", ep.Loss), zap.Float64("test_accuracy", ep.TestAccuracy),
				zap.Float64("test_loss", ep.TestLoss), zap.Float64("examples_per_sec", ep.ExamplesPerSec), zap.Float64("lr", ep.LR))
			if cfg.Progress != nil && rank == 0 {
				fmt.Fprintf(cfg.Progress, "epoch %2d  loss %.4f  test loss %.4f  test accuracy %6.2f%%  %8.0f examples/s  lr %.4g  train %.1fs\n",
					epoch, ep.Loss, ep.TestLoss, 100*ep.TestAccuracy, ep.ExamplesPerSec, ep.LR, ep.TrainSeconds)
			}
			if tb != nil {
				now := time.Now()
				err := errors.Join(
					tb.Scalar("loss", int64(global), float32(ep.Loss), now),
					tb.Scalar("test_loss", int64(global), float32(ep.TestLoss), now),
					tb.Scalar("test_accuracy", int64(global), float32(ep.TestAccuracy), now),
					tb.Scalar("examples_per_sec", int64(global), float32(ep.ExamplesPerSec), now),
					tb.Scalar("lr", int64(global), float32(ep.LR), now),
					tb.Flush())
				if err != nil {
					return nil, err
				}
			}
			epCopy := ep
			emit(Event{Kind: "epoch", Step: global, Steps: cfg.Epochs * steps, Epoch: &epCopy})
			if job.CheckpointEvery == 0 || global%job.CheckpointEvery == 0 || epoch == cfg.Epochs || targetMet(cfg, res.EpochResults) {
				if err := saveCheckpoint(epoch+1, 0); err != nil {
					return nil, err
				}
			}
			if targetMet(cfg, res.EpochResults) {
				if cfg.Progress != nil && rank == 0 {
					fmt.Fprintf(cfg.Progress, "target reached after %d epochs, %.1fs of training\n", epoch, ep.TrainSeconds)
				}
				break
			}
		}
	}
	if err := checkHashes("the end"); err != nil {
		return nil, err
	}
	if targetMet(cfg, res.EpochResults) {
		res.TargetReached, res.TimeToTarget = true, res.EpochResults[len(res.EpochResults)-1].TrainSeconds
	}
	res.Steps = global
	res.TrainSeconds = trainTime.Seconds()
	if n := len(res.EpochResults); n > 0 {
		res.FinalAccuracy = res.EpochResults[n-1].TestAccuracy
	}
	res.ParamsSHA256 = ParamsHash(params)
	res.WallSeconds = time.Since(wallStart).Seconds()
	if tb != nil {
		if err := tb.Close(); err != nil {
			return nil, err
		}
	}

	peer.TestAccuracy = res.FinalAccuracy
	peer.ParamsSHA256 = res.ParamsSHA256
	times.finish(&peer, g)
	peer.EvalSeconds, peer.CheckpointSeconds = evalTime.Seconds(), ckTime.Seconds()
	return &Summary{Run: res, Peer: peer}, nil
}

// logger is the run's logger: Logger, or a no-op one when unset.
func (c *Config) logger() *zap.Logger {
	if c.Logger == nil {
		return zap.NewNop()
	}
	return c.Logger
}

// rankEvents returns a hook that stamps each event with rank and hands it
// to on (when set).
func rankEvents(on func(Event), rank int) func(Event) {
	return func(e Event) {
		if on != nil {
			e.Rank = rank
			on(e)
		}
	}
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

// step adds one step: t0 asking for the batch, t1 having it, t2 the
// gradient computed, t3 past the sampled barrier (if sample), t4 the
// exchange done, t5 the update done.
func (s *syncTimes) step(t0, t1, t2, t3, t4, t5 time.Time, sample bool) {
	s.wait += t1.Sub(t0)
	s.compute += t2.Sub(t1) + t5.Sub(t4)
	s.phase += t4.Sub(t2)
	if sample {
		s.sampledWait += t3.Sub(t2)
		s.sampledPhase += t4.Sub(t2)
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
	p.CPUSeconds, p.PeakRSSBytes = processUsage()
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
// resumes, and any problem as text for every replica to report.
func (j *Job) resumePoint(settings []Setting, fp string, nparams, nstate int) (*Checkpoint, *resumeInfo, string) {
	ck, path, err := j.findCheckpoint(settings, fp, nparams, nstate)
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
	return ck, &resumeInfo{Path: path, Step: ck.Step, Epoch: ck.Epoch, StepInEpoch: ck.StepInEpoch, History: hist}, problem
}

// findCheckpoint (chief only) loads the checkpoint to resume from: Restore
// if set, else the newest in CheckpointDir; nil if there is none. It checks
// that the checkpoint belongs to this configuration.
func (j *Job) findCheckpoint(settings []Setting, fp string, nparams, nstate int) (*Checkpoint, string, error) {
	path := j.Restore
	if path == "" {
		if j.CheckpointDir == "" {
			return nil, "", nil
		}
		var err error
		if path, err = LatestCheckpoint(j.CheckpointDir); err != nil || path == "" {
			return nil, "", err
		}
	}
	ck, err := ReadCheckpoint(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w (delete it, or pass --restore with an older checkpoint)", err)
	}
	if ck.Fingerprint != fp {
		var saved map[string]string
		if err := json.Unmarshal([]byte(ck.Config), &saved); err != nil {
			return nil, "", fmt.Errorf("checkpoint %s was written by another configuration (fingerprint %.12s…, this run %.12s…)", path, ck.Fingerprint, fp)
		}
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
			return nil, "", fmt.Errorf("checkpoint %s was written by another configuration: %w: resume with the same flags, or use another --checkpoint-dir", path, err)
		}
		return nil, "", fmt.Errorf("checkpoint %s was written by another configuration (fingerprint %.12s…, this run %.12s…)", path, ck.Fingerprint, fp)
	}
	if len(ck.Params) != nparams || len(ck.OptState) != nstate {
		return nil, "", fmt.Errorf("checkpoint %s holds %d parameters and %d optimizer values, this model has %d and %d", path, len(ck.Params), len(ck.OptState), nparams, nstate)
	}
	return ck, path, nil
}

// compareParamHashes all-gathers the SHA-256 of every replica's parameters
// and fails, naming the ranks, if they differ.
func compareParamHashes(ctx context.Context, g Group, params []float32, what string) error {
	sum := paramsSum(params)
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
