package mirrored

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/sparse"
)

// SparseModel is the --model name of sparse binary logistic regression.
const SparseModel = "sparse-lr"

// Defaults of a sparse run.
const (
	// DefaultSparseShuffle is the shuffle buffer, in examples, of a run
	// reading files (an in-memory data set is shuffled fully).
	DefaultSparseShuffle = 10_000
	// sparseEvalBatch is the batch size of evaluation passes.
	sparseEvalBatch = 4096
)

// SparseConfig is what a sparse-lr run needs beyond the settings it shares
// with the dense models (in Job).
type SparseConfig struct {
	// Features is the number of features D (33,762,578 for Criteo).
	Features int
	// TrainFiles and TestFiles are TFRecord (tf.train.Example with label,
	// index, value) or libsvm files. Training files are split among the
	// replicas with data.ShardAuto: by file when there are at least as
	// many files as replicas, else by example.
	TrainFiles, TestFiles []string
	// Format is "tfrecord", "libsvm", or "" to tell by each file's
	// extension (.libsvm, .svm, .svmlight and .txt are libsvm).
	Format string
	// ZeroBased says libsvm indices start at 0 (default 1).
	ZeroBased bool
	// SkipCorrupt skips (and logs) corrupt records instead of failing.
	SkipCorrupt bool
	// Exchange is sparse, dense or auto (chosen per step, see SparseJob).
	Exchange sparse.Exchange
	// Gather is the sparse all-gather: GatherDirect (default) or GatherRing.
	Gather string
	// Optimizer is sgd, adagrad or ftrl; L1, L2 and Beta as in
	// sparse.OptimizerConfig (the learning rate is Job.LR).
	Optimizer    string
	L1, L2, Beta float64
	// ShuffleBuffer is the file pipeline's shuffle buffer in examples; 0
	// means DefaultSparseShuffle. Job.NoShuffle turns shuffling off.
	ShuffleBuffer int
	// Train and Test, if set, are used instead of the files: in-memory
	// sparse data sets (benchmarks, tests), split by example.
	Train, Test data.Dataset
	// MaxSteps, if > 0, ends training after that many global steps.
	MaxSteps int
	// OnWeights, if set, is called at the end with the final weights (a
	// view, valid during the call), to save or inspect the model.
	OnWeights func(w []float32)
}

// SparseJob is a synchronous data-parallel run of sparse logistic
// regression (sparse.LogReg) over a Group. Of the embedded Job it uses
// Epochs, BatchSize (per replica), LR, Seed, TargetAccuracy, HashEvery,
// MeasureWait (a barrier every WaitSampleEvery-th step, as in RunJob),
// NoShuffle, the checkpoint settings (CheckpointDir, CheckpointEvery,
// KeepCheckpoints, Restore), Progress, Logger and OnEvent; Model must be
// SparseModel or empty.
//
// The strategy, on every replica:
//
//   - start-up: all-gather each replica's settings and stop with a
//     MismatchError naming every difference; every replica starts from
//     zero weights and zero optimizer state, so nothing is broadcast (135
//     MB at Criteo's D);
//   - steps per epoch: each replica counts its shard once and the counts
//     are all-gathered, so every replica runs floor(smallest shard /
//     batch) steps of full batches (data.AgreedSteps with drop remainder);
//   - each step: LogReg.GradientSum over this replica's batch (only the
//     touched features), then the exchange. Sparse: one all-gather of
//     [example count][wire-encoded gradient] per step (GatherDirect: one
//     message to each peer), decoded and merged with
//     Coalescer.MergeGradients in rank order, so every replica gets the
//     same bits. Dense: an all-reduce of the D-float gradient (plus the
//     example and pair counts), the bottleneck the sparse exchange
//     removes. With auto, step 1 is sparse and each later step takes the
//     mode sparse.ChooseExchange picks from the previous step's mean pairs
//     per replica and measured wire bytes per pair: figures every replica
//     holds identically, so they all choose the same without a round trip
//     (a change of mode is logged). Then the same optimizer update
//     everywhere, with the mean gradient of the union batch;
//   - every HashEvery steps: all-gather the SHA-256 of the weights the
//     step touched (cheap, and a divergence shows up there first); at the
//     end, of all D weights;
//   - each epoch: evaluation on the test set, split among the replicas;
//     the (margin, label) pairs are all-gathered so every replica reports
//     the same accuracy, log-loss and exact AUC;
//   - checkpoints (chief only, as in RunJob): the weights and the
//     optimizer state at the end of every epoch, or every CheckpointEvery
//     steps, and at the end (every replica first applies any lazy
//     regularisation at those steps, so a resumed run ends with the same
//     bits as the uninterrupted one). A run resumes from the newest one in
//     CheckpointDir (or Restore): the chief reads it and broadcasts the
//     weights and state. One exception to bitwise resumption: with
//     --exchange auto the first step after a resume is sparse.
type SparseJob struct {
	Job
	Sparse SparseConfig
}

func (j *SparseJob) validate() error {
	c, s := &j.Config, &j.Sparse
	if c.Model != "" && c.Model != SparseModel {
		return fmt.Errorf("sparse job with model %q: want %s", c.Model, SparseModel)
	}
	switch {
	case j.CheckpointEvery < 0:
		return fmt.Errorf("checkpoint every %d steps: want ≥ 0 (0: every epoch)", j.CheckpointEvery)
	case j.KeepCheckpoints < 0:
		return fmt.Errorf("keep %d checkpoints: want ≥ 0 (0: all)", j.KeepCheckpoints)
	case s.Features <= 0 || s.Features > math.MaxInt32:
		return fmt.Errorf("--features %d: want the number of features, 1..%d (33762578 for Criteo)", s.Features, math.MaxInt32)
	case s.Train == nil && len(s.TrainFiles) == 0:
		return errors.New("no training data: give --train-files")
	case c.Epochs <= 0:
		return fmt.Errorf("epochs %d: want at least 1", c.Epochs)
	case c.BatchSize <= 0:
		return fmt.Errorf("batch size %d: want at least 1", c.BatchSize)
	case !(c.TargetAccuracy >= 0 && c.TargetAccuracy <= 1):
		return fmt.Errorf("target accuracy %v: want a fraction in (0, 1], or 0 for none", c.TargetAccuracy)
	case j.HashEvery < 0:
		return fmt.Errorf("hash comparison every %d steps: want ≥ 0 (0: only at the end)", j.HashEvery)
	case s.MaxSteps < 0:
		return fmt.Errorf("max steps %d: want ≥ 0 (0: no limit)", s.MaxSteps)
	case s.ShuffleBuffer < 0:
		return fmt.Errorf("shuffle buffer %d: want ≥ 0 (0: the default)", s.ShuffleBuffer)
	}
	switch s.Format {
	case "", "tfrecord", "libsvm":
	default:
		return fmt.Errorf("input format %q: want tfrecord or libsvm (or empty: by file extension)", s.Format)
	}
	for _, ds := range []data.Dataset{s.Train, s.Test} {
		if ds != nil && ds.Dim() != 0 {
			return fmt.Errorf("in-memory data set of %d dense features: a sparse job needs a sparse data set", ds.Dim())
		}
	}
	// The optimizer checks its own hyper-parameters.
	_, err := sparse.NewOptimizer(s.Optimizer, 1, j.optimizerConfig())
	return err
}

func (j *SparseJob) optimizerConfig() sparse.OptimizerConfig {
	return sparse.OptimizerConfig{LR: j.Config.LR, L1: j.Sparse.L1, L2: j.Sparse.L2, Beta: j.Sparse.Beta}
}

// opener returns the reader for path under the configured format.
func (j *SparseJob) opener(log *zap.Logger) data.Opener {
	opts := data.SparseOptions{Dim: j.Sparse.Features, ZeroBased: j.Sparse.ZeroBased, SkipCorrupt: j.Sparse.SkipCorrupt,
		OnSkip: func(err error) { log.Warn("skipped a corrupt record", zap.Error(err)) }}
	tf, svm := data.OpenTFExample(opts), data.OpenLibSVM(opts)
	format := j.Sparse.Format
	return func(ctx context.Context, path string) (data.Source, error) {
		if sparseFormat(format, path) == "libsvm" {
			return svm(ctx, path)
		}
		return tf(ctx, path)
	}
}

func sparseFormat(format, path string) string {
	if format != "" {
		return format
	}
	switch strings.ToLower(filepath.Ext(path)) {
	case ".libsvm", ".svm", ".svmlight", ".txt":
		return "libsvm"
	}
	return "tfrecord"
}

// settings lists what every replica must agree on.
func (j *SparseJob) settings(replicas int) ([]Setting, error) {
	c, s := &j.Config, &j.Sparse
	digest := func(files []string, ds data.Dataset) (string, error) {
		if ds != nil {
			return fmt.Sprintf("in-memory:%d", ds.Len()), nil
		}
		var parts []string
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				return "", fmt.Errorf("input file: %w", err)
			}
			parts = append(parts, fmt.Sprintf("%s:%d:%s", filepath.Base(f), st.Size(), sparseFormat(s.Format, f)))
		}
		return strings.Join(parts, ","), nil
	}
	train, err := digest(s.TrainFiles, s.Train)
	if err != nil {
		return nil, err
	}
	test, err := digest(s.TestFiles, s.Test)
	if err != nil {
		return nil, err
	}
	gather := s.Gather
	if gather == "" {
		gather = GatherDirect
	}
	// arith: the settings a checkpoint must also match to be resumed.
	arith := func(name, value string) Setting { return Setting{Name: name, Value: value, Resume: true} }
	v := func(name, value string) Setting { return Setting{Name: name, Value: value} }
	return []Setting{
		arith("model", SparseModel),
		arith("features", strconv.Itoa(s.Features)),
		arith("replicas", strconv.Itoa(replicas)),
		arith("batch_size", strconv.Itoa(c.BatchSize)),
		arith("epochs", strconv.Itoa(c.Epochs)),
		arith("optimizer", s.Optimizer),
		arith("lr", f64(c.LR)),
		arith("l1", f64(s.L1)),
		arith("l2", f64(s.L2)),
		arith("beta", f64(s.Beta)),
		arith("seed", strconv.FormatInt(c.Seed, 10)),
		arith("train_data", train),
		arith("zero_based", strconv.FormatBool(s.ZeroBased)),
		arith("skip_corrupt", strconv.FormatBool(s.SkipCorrupt)),
		arith("shuffle", strconv.FormatBool(!j.NoShuffle)),
		arith("shuffle_buffer", strconv.Itoa(s.ShuffleBuffer)),
		arith("exchange", s.Exchange.String()),
		arith("checkpoint_every", strconv.Itoa(j.CheckpointEvery)),
		v("test_data", test),
		v("gather", gather),
		v("max_steps", strconv.Itoa(s.MaxSteps)),
		v("target_accuracy", f64(c.TargetAccuracy)),
		v("hash_every", strconv.Itoa(j.HashEvery)),
		v("measure_wait", strconv.FormatBool(j.MeasureWait)),
	}, nil
}

// handshake all-gathers the settings (and each replica's training shard
// size, for the steps per epoch) and fails naming every difference.
// sparseHello is what each replica sends in the start-up all-gather: its
// settings and training shard size, and (chief only) where to resume or
// why it cannot.
type sparseHello struct {
	Settings []Setting   `json:"settings"`
	Shard    int         `json:"shard"`
	Resume   *resumeInfo `json:"resume,omitempty"`
	Error    string      `json:"error,omitempty"`
}

// handshake all-gathers the settings and shard sizes (no checkpoint) and
// fails naming every setting that differs; it returns the smallest,
// largest and total shard size.
func (j *SparseJob) handshake(ctx context.Context, g Group, settings []Setting, shard int) (minShard, maxShard, total int, err error) {
	minShard, maxShard, total, _, err = j.handshakeResume(ctx, g, sparseHello{Settings: settings, Shard: shard})
	return minShard, maxShard, total, err
}

// handshakeResume is handshake with the chief's resume point: the hellos
// are all-gathered, and the chief's Resume (or Error) is returned to all.
func (j *SparseJob) handshakeResume(ctx context.Context, g Group, me sparseHello) (minShard, maxShard, total int, resume *resumeInfo, err error) {
	hb, err := json.Marshal(me)
	if err != nil {
		return 0, 0, 0, nil, err
	}
	all, err := g.AllGather(ctx, hb)
	if err != nil {
		return 0, 0, 0, nil, fmt.Errorf("start-up handshake (comparing the peers' settings): %w", err)
	}
	who := make([]string, len(all))
	sets := make([][]Setting, len(all))
	hellos := make([]sparseHello, len(all))
	minShard = math.MaxInt
	for r, b := range all {
		h := &hellos[r]
		if err := json.Unmarshal(b, h); err != nil {
			return 0, 0, 0, nil, fmt.Errorf("start-up handshake: rank %d sent an unreadable hello (a different meshtrain version?): %w", r, err)
		}
		who[r], sets[r] = fmt.Sprintf("rank %d", r), h.Settings
		minShard, maxShard, total = min(minShard, h.Shard), max(maxShard, h.Shard), total+h.Shard
	}
	if err := compareSettings(who, sets); err != nil {
		return 0, 0, 0, nil, fmt.Errorf("the peers were started with different settings: %w: start every peer with the same training flags", err)
	}
	if e := hellos[0].Error; e != "" {
		if g.Rank() == 0 {
			return 0, 0, 0, nil, errors.New(e)
		}
		return 0, 0, 0, nil, fmt.Errorf("rank 0 (the chief) could not resume: %s", e)
	}
	return minShard, maxShard, total, hellos[0].Resume, nil
}

// optState returns the optimizer's state arrays and their total length.
func optState(opt sparse.Optimizer) ([][]float32, int) {
	st := opt.State()
	n := 0
	for _, a := range st {
		n += len(a)
	}
	return st, n
}

// trainPipeline returns this replica's training pipeline config and shard
// size.
func (j *SparseJob) trainPipeline(ctx context.Context, rank, world int, open data.Opener) (data.Config, int, error) {
	c, s := &j.Config, &j.Sparse
	pcfg := data.TrainConfig(rank, world, c.BatchSize, uint64(c.Seed), c.Epochs)
	if s.Train != nil {
		pcfg.Policy = data.ShardData
		if j.NoShuffle {
			pcfg.ShuffleBuffer = 0
		}
		return pcfg, data.ShardSize(s.Train.Len(), world, rank), nil
	}
	pcfg.Policy = data.ShardAuto
	pcfg.ShuffleBuffer = s.ShuffleBuffer
	if pcfg.ShuffleBuffer == 0 {
		pcfg.ShuffleBuffer = DefaultSparseShuffle
	}
	if j.NoShuffle {
		pcfg.ShuffleBuffer = 0
	}
	n, err := data.ShardCount(ctx, s.TrainFiles, open, pcfg)
	if err != nil {
		return pcfg, 0, fmt.Errorf("counting this replica's training examples: %w", err)
	}
	return pcfg, n, nil
}

// sparseSteps is the number of steps per epoch every replica takes (see
// data.AgreedSteps), or an error when the smallest shard holds less than
// one batch.
func sparseSteps(minShard, maxShard, batch int) (int, error) {
	steps := data.AgreedSteps(minShard, maxShard, batch, true)
	if steps == 0 {
		return 0, fmt.Errorf("the smallest replica's shard holds %d training examples, less than one batch of %d: use a smaller --batch, more data or fewer replicas",
			minShard, batch)
	}
	return steps, nil
}

// sparsePipeline reads ds when it is set (data held in memory), else files.
func sparsePipeline(ctx context.Context, ds data.Dataset, files []string, open data.Opener, cfg data.Config) (*data.Pipeline, error) {
	if ds != nil {
		return data.NewPipeline(ctx, ds, cfg)
	}
	return data.NewFilePipeline(ctx, files, open, cfg)
}

// RunSparseJob runs job as replica g.Rank() of g.Size() (see SparseJob).
// Every replica must call it with the same settings (checked at start-up).
// The Summary's Run.Params is D; its epochs carry the test accuracy,
// log-loss and AUC.
func RunSparseJob(ctx context.Context, job SparseJob, g Group) (*Summary, error) {
	wallStart := time.Now()
	if err := job.validate(); err != nil {
		return nil, err
	}
	cfg, sc := &job.Config, &job.Sparse
	rank, world := g.Rank(), g.Size()
	log := cfg.logger().With(zap.Int("rank", rank))
	emit := rankEvents(job.OnEvent, rank)
	dim := sc.Features
	open := job.opener(log.Named("data"))

	settings, err := job.settings(world)
	if err != nil {
		return nil, err
	}
	pcfg, shard, err := job.trainPipeline(ctx, rank, world, open)
	if err != nil {
		return nil, err
	}
	model, err := sparse.NewLogReg(dim)
	if err != nil {
		return nil, err
	}
	opt, err := sparse.NewOptimizer(sc.Optimizer, dim, job.optimizerConfig())
	if err != nil {
		return nil, err
	}
	state, stateLen := optState(opt)

	fp := Fingerprint(settings)
	me := sparseHello{Settings: settings, Shard: shard}
	var ck *Checkpoint
	if rank == 0 {
		ck, me.Resume, me.Error = job.Job.resumePoint(settings, fp, dim, stateLen)
	}
	minShard, maxShard, trainExamples, resume, err := job.handshakeResume(ctx, g, me)
	if err != nil {
		return nil, err
	}
	steps, err := sparseSteps(minShard, maxShard, cfg.BatchSize)
	if err != nil {
		return nil, err
	}
	startEpoch, skip, global := 1, 0, 0
	if resume != nil {
		startEpoch, skip, global = resume.Epoch, resume.StepInEpoch, resume.Step
		if startEpoch < 1 || global != (startEpoch-1)*steps+skip {
			return nil, fmt.Errorf("checkpoint %s: step %d is not epoch %d step %d at %d steps per epoch: it belongs to another configuration", resume.Path, global, startEpoch, skip, steps)
		}
		if ck != nil { // the chief
			copy(model.W, ck.Params)
			rest := ck.OptState
			for _, a := range state {
				rest = rest[copy(a, rest):]
			}
		}
		// The chief's weights and state everywhere (nothing to send on a
		// fresh start: every replica starts from zero).
		for _, a := range append([][]float32{model.W}, state...) {
			if err := g.Broadcast(ctx, a, 0); err != nil {
				return nil, fmt.Errorf("broadcasting the checkpoint's weights and optimizer state from rank 0: %w", err)
			}
		}
		log.Info("resumed", zap.String("checkpoint", resume.Path), zap.Int("step", global), zap.Int("epoch", startEpoch))
		if cfg.Progress != nil && rank == 0 {
			fmt.Fprintf(cfg.Progress, "resumed from %s: step %d, epoch %d step %d\n", resume.Path, global, startEpoch, skip)
		}
	}
	ck = nil // the chief's copy of the checkpoint is no longer needed

	pcfg.StepsPerEpoch = steps
	pcfg.Epochs = max(1, cfg.Epochs-startEpoch+1)
	pcfg.StartEpoch = startEpoch - 1 // the pipeline counts epochs from 0
	pipe, err := sparsePipeline(ctx, sc.Train, sc.TrainFiles, open, pcfg)
	if err != nil {
		return nil, err
	}
	defer pipe.Close()
	if err := skipTo(ctx, pipe, skip, startEpoch); err != nil {
		return nil, err
	}

	xch, err := newExchanger(g, sc.Exchange, sc.Gather, dim, log)
	if err != nil {
		return nil, err
	}

	totalSteps := cfg.Epochs * steps
	if sc.MaxSteps > 0 {
		totalSteps = min(totalSteps, sc.MaxSteps)
	}
	res := &Result{
		Model: SparseModel, Params: dim, Replicas: world, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: sc.Optimizer, LR: cfg.LR, WeightDecay: sc.L2, Schedule: "constant", Seed: cfg.Seed,
		TrainExamples: trainExamples, StepsPerEpoch: steps, TargetAccuracy: cfg.TargetAccuracy,
		TimeToAccuracy: map[string]float64{},
	}
	header := fmt.Sprintf("%s: %d features, %s, %d replica(s) × batch %d (global batch %d), %d steps per epoch, %d training examples, exchange %s",
		SparseModel, dim, sc.Optimizer, world, cfg.BatchSize, world*cfg.BatchSize, steps, trainExamples, sc.Exchange)
	if cfg.Progress != nil && rank == 0 {
		fmt.Fprintln(cfg.Progress, header)
	}
	peer := PeerStats{Rank: rank}
	var trainTime time.Duration
	if resume != nil {
		res.EpochResults = resume.History
		if n := len(resume.History); n > 0 {
			trainTime = time.Duration(resume.History[n-1].TrainSeconds * float64(time.Second))
		}
		peer.ResumedFrom, peer.ResumedStep = resume.Path, resume.Step
		if rank != 0 {
			peer.ResumedFrom = "rank 0's " + resume.Path
		}
		emit(Event{Kind: "resumed", Step: global, Steps: totalSteps, Path: resume.Path})
	}
	log.Info("start", zap.String("run", header))
	emit(Event{Kind: "start", Step: global, Steps: totalSteps, Info: header})

	var times syncTimes
	var evalTime, ckTime time.Duration
	saveCheckpoint := func(epoch, stepInEpoch int) error {
		if rank != 0 || job.CheckpointDir == "" {
			return nil
		}
		t := time.Now()
		hist, _ := json.Marshal(res.EpochResults) // plain numbers: cannot fail
		flat := make([]float32, 0, stateLen)
		for _, a := range state {
			flat = append(flat, a...)
		}
		path, err := WriteCheckpoint(job.CheckpointDir, &Checkpoint{
			Model: SparseModel, Params: model.W, OptState: flat,
			Step: global, Epoch: epoch, StepInEpoch: stepInEpoch, StepsPerEpoch: steps, Seed: cfg.Seed,
			Fingerprint: fp, Config: settingsJSON(settings), History: string(hist), SavedAt: time.Now(),
		}, job.KeepCheckpoints)
		ckTime += time.Since(t)
		if err != nil {
			return fmt.Errorf("writing the checkpoint at step %d: %w", global, err)
		}
		log.Debug("checkpoint", zap.String("path", path), zap.Int("step", global))
		emit(Event{Kind: "checkpoint", Step: global, Steps: totalSteps, Path: path})
		return nil
	}
	var local, merged sparse.Vector
	var touched []float32
	var epochSparse, epochDense int // steps per mode, for the epoch log
	for epoch := startEpoch; epoch <= cfg.Epochs && global < totalSteps; epoch++ {
		epochStart := time.Now()
		var lossSum float64
		examples, ran, first := 0, 0, 0
		if epoch == startEpoch {
			first = skip
		}
		for step := first; step < steps && global < totalSteps; step++ {
			t0 := time.Now()
			b, err := pipe.Next(ctx)
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d: reading the next batch: %w", epoch, step, err)
			}
			t1 := time.Now()
			if b.Size > 0 {
				x := sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}
				loss, err := model.GradientSum(x, b.Labels, &local)
				if err != nil {
					return nil, fmt.Errorf("epoch %d step %d: %w", epoch, step, err)
				}
				if math.IsNaN(loss) || math.IsInf(loss, 0) {
					return nil, &NonFiniteError{Epoch: epoch, Step: step, GlobalStep: global, Loss: loss}
				}
				lossSum += loss
				examples += b.Size
			} else {
				local.Indices, local.Values = local.Indices[:0], local.Values[:0]
			}
			t2 := time.Now()
			sample := job.MeasureWait && global%WaitSampleEvery == 0
			if sample {
				if err := g.Barrier(ctx); err != nil {
					return nil, fmt.Errorf("epoch %d step %d: waiting for the other replicas: %w", epoch, step, err)
				}
			}
			t3 := time.Now()
			n, mode, err := xch.exchange(ctx, global+1, local, b.Size, &merged)
			if err != nil {
				return nil, fmt.Errorf("epoch %d step %d: %w", epoch, step, err)
			}
			t4 := time.Now()
			if mode == sparse.ExchangeDense {
				epochDense++
			} else {
				epochSparse++
			}
			if n > 0 {
				opt.Step(model.W, merged)
			}
			global++
			ran++
			times.step(t0, t1, t2, t3, t4, time.Now(), sample)

			if job.HashEvery > 0 && global%job.HashEvery == 0 {
				t := time.Now()
				touched = touched[:0]
				for _, i := range merged.Indices {
					touched = append(touched, model.W[i])
				}
				err := compareParamHashes(ctx, g, touched, fmt.Sprintf("step %d (the %d weights it touched)", global, len(touched)))
				times.comm += time.Since(t)
				if err != nil {
					return nil, err
				}
			}
			if job.CheckpointEvery > 0 && global%job.CheckpointEvery == 0 && step+1 < steps {
				// Every replica settles lazy regularisation here, so the
				// arithmetic after a resume is the uninterrupted run's.
				t := time.Now()
				opt.Flush(model.W)
				ckTime += time.Since(t)
				if err := saveCheckpoint(epoch, step+1); err != nil {
					return nil, err
				}
			}
		}
		elapsed := time.Since(epochStart)
		trainTime += elapsed
		peer.Steps += ran
		peer.Examples += examples

		agg := []float32{float32(lossSum), float32(examples)}
		if err := g.AllReduceSum(ctx, agg); err != nil {
			return nil, fmt.Errorf("epoch %d: all-reducing the epoch loss: %w", epoch, err)
		}
		ep := Epoch{Epoch: epoch, Loss: float64(agg[0]) / math.Max(float64(agg[1]), 1), LR: cfg.LR,
			ExamplesPerSec: float64(agg[1]) / elapsed.Seconds(), TrainSeconds: trainTime.Seconds()}

		opt.Flush(model.W) // lazy regularisation, before anything reads the weights
		var m sparse.Metrics
		if sc.Test != nil || len(sc.TestFiles) > 0 {
			te := time.Now()
			m, err = job.evaluate(ctx, g, model, open)
			evalTime += time.Since(te)
			if err != nil {
				return nil, fmt.Errorf("epoch %d: evaluating: %w", epoch, err)
			}
			ep.TestLoss, ep.TestAccuracy, ep.TestAUC = m.LogLoss, m.Accuracy, m.AUC
			res.TestExamples = m.Examples
		}
		res.EpochResults = append(res.EpochResults, ep)
		fields := []zap.Field{zap.Int("epoch", epoch), zap.Int("steps", global), zap.Float64("loss", ep.Loss),
			zap.Float64("examples_per_sec", ep.ExamplesPerSec), zap.Int("sparse_steps", epochSparse), zap.Int("dense_steps", epochDense)}
		test := "no test set"
		if m.Examples > 0 {
			fields = append(fields, zap.Float64("test_accuracy", m.Accuracy), zap.Float64("test_log_loss", m.LogLoss), zap.Float64("test_auc", m.AUC))
			test = "test " + m.String()
		}
		log.Info("epoch", fields...)
		if cfg.Progress != nil && rank == 0 {
			fmt.Fprintf(cfg.Progress, "epoch %2d  steps %d  loss %.4f  %s  %8.0f examples/s  train %.1fs  exchange sparse %d dense %d\n",
				epoch, global, ep.Loss, test, ep.ExamplesPerSec, ep.TrainSeconds, epochSparse, epochDense)
		}
		epochSparse, epochDense = 0, 0
		epCopy := ep
		emit(Event{Kind: "epoch", Step: global, Steps: totalSteps, Epoch: &epCopy})
		reached := cfg.TargetAccuracy > 0 && ep.TestAccuracy >= cfg.TargetAccuracy
		// An epoch cut short by MaxSteps ends the run without a checkpoint
		// of its own: its evaluation already settled lazy regularisation
		// at a step where an uninterrupted run does not.
		complete := first+ran == steps
		if complete && (job.CheckpointEvery == 0 || global%job.CheckpointEvery == 0 || epoch == cfg.Epochs || reached) {
			if err := saveCheckpoint(epoch+1, 0); err != nil {
				return nil, err
			}
		}
		if reached {
			res.TargetReached, res.TimeToTarget = true, ep.TrainSeconds
			if cfg.Progress != nil && rank == 0 {
				fmt.Fprintf(cfg.Progress, "target reached after %d epochs, %.1fs of training\n", epoch, ep.TrainSeconds)
			}
			break
		}
	}

	if world > 1 { // alone there is nobody to compare with: no 135 MB hash in the timed part
		t := time.Now()
		err = compareParamHashes(ctx, g, model.W, "the end")
		times.comm += time.Since(t)
		if err != nil {
			return nil, err
		}
	}
	res.Steps = global
	res.TrainSeconds = trainTime.Seconds()
	if n := len(res.EpochResults); n > 0 {
		res.FinalAccuracy = res.EpochResults[n-1].TestAccuracy
	}
	res.ParamsSHA256 = ParamsHash(model.W)
	if sc.OnWeights != nil {
		sc.OnWeights(model.W)
	}
	res.WallSeconds = time.Since(wallStart).Seconds()

	peer.TestAccuracy = res.FinalAccuracy
	peer.ParamsSHA256 = res.ParamsSHA256
	times.finish(&peer, g)
	peer.EvalSeconds, peer.CheckpointSeconds = evalTime.Seconds(), ckTime.Seconds()
	log.Info("done", zap.Int("steps", global), zap.Int("sparse_steps", xch.steps[sparse.ExchangeSparse]),
		zap.Int("dense_steps", xch.steps[sparse.ExchangeDense]), zap.String("params_sha256", res.ParamsSHA256))
	return &Summary{Run: res, Peer: peer}, nil
}

// evaluate scores this replica's share of the test set, all-gathers the
// (margin, label) pairs and computes the metrics over all of them in rank
// order, so every replica reports the same figures.
func (j *SparseJob) evaluate(ctx context.Context, g Group, model *sparse.LogReg, open data.Opener) (sparse.Metrics, error) {
	rank, world := g.Rank(), g.Size()
	ecfg := data.Config{Rank: rank, World: world, Policy: data.ShardAuto, BatchSize: sparseEvalBatch, Epochs: 1}
	if j.Sparse.Test != nil {
		ecfg.Policy = data.ShardData
	}
	pipe, err := sparsePipeline(ctx, j.Sparse.Test, j.Sparse.TestFiles, open, ecfg)
	if err != nil {
		return sparse.Metrics{}, err
	}
	defer pipe.Close()
	// Each scored example is 8 bytes: float32 margin, float32 label.
	var scored []byte
	dim := uint32(model.Dim())
	for {
		b, err := pipe.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return sparse.Metrics{}, err
		}
		x := sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}
		for r := 0; r < b.Size; r++ {
			row := x.Row(r)
			for _, i := range row.Indices {
				if uint32(i) >= dim {
					return sparse.Metrics{}, fmt.Errorf("test example: feature index %d is outside [0, %d)", i, dim)
				}
			}
			scored = binary.LittleEndian.AppendUint32(scored, math.Float32bits(row.Dot(model.W)))
			scored = binary.LittleEndian.AppendUint32(scored, math.Float32bits(b.Labels[r]))
		}
	}
	all, err := g.AllGather(ctx, scored)
	if err != nil {
		return sparse.Metrics{}, fmt.Errorf("gathering the test predictions: %w", err)
	}
	var ev sparse.Evaluator
	for r, part := range all {
		if len(part)%8 != 0 {
			return sparse.Metrics{}, fmt.Errorf("rank %d sent %d bytes of test predictions, not whole (margin, label) pairs", r, len(part))
		}
		for k := 0; k+8 <= len(part); k += 8 {
			margin := math.Float32frombits(binary.LittleEndian.Uint32(part[k:]))
			label := math.Float32frombits(binary.LittleEndian.Uint32(part[k+4:]))
			if err := ev.Add(margin, label); err != nil {
				return sparse.Metrics{}, fmt.Errorf("test example %d of rank %d: %w", k/8, r, err)
			}
		}
	}
	return ev.Metrics(), nil
}
