package mirrored

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/data/criteo"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored/gossip"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/sparse"
)

// SparseModel is the --model name of sparse binary logistic regression.
const SparseModel = replica.SparseModel

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
	// Exchange is sparse, dense or auto (chosen per step, see sparseBuilder).
	Exchange sparse.Exchange
	// Gather is the sparse all-gather: GatherDirect (default) or GatherRing.
	Gather string
	// Wire is the dense exchange's format (FP32, or 16 bits: see replica.Exchanger.UseDenseWire).
	Wire half.Format
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

// sparseBuilder builds the replicas of sparse logistic regression
// (sparse.LogReg, Job.Sparse). Of the Job it uses Epochs, BatchSize (per
// replica), LR, Seed, TargetAccuracy, HashEvery, MeasureWait, NoShuffle,
// the checkpoint settings, Logger and Observers; Model must be
// SparseModel or empty.
//
// The ring strategy, on every replica:
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
//   - checkpoints (chief only, as for the dense models): the weights and the
//     optimizer state at the end of every epoch, or every CheckpointEvery
//     steps, and at the end (every replica first applies any lazy
//     regularisation at those steps, so a resumed run ends with the same
//     bits as the uninterrupted one). A run resumes from the newest one in
//     CheckpointDir (or Restore): the chief reads it and broadcasts the
//     weights and state. One exception to bitwise resumption: with
//     --exchange auto the first step after a resume is sparse.
type sparseBuilder Job

func (j *sparseBuilder) validate() error {
	c, s := &j.Config, j.Sparse
	if c.Model != "" && c.Model != SparseModel {
		return fmt.Errorf("sparse job with model %q: want %s", c.Model, SparseModel)
	}
	if s == nil {
		return fmt.Errorf("model %s without its settings: give --features and --train-files (Job.Sparse)", SparseModel)
	}
	if err := c.validateCommon(); err != nil {
		return err
	}
	switch {
	case s.Features <= 0 || s.Features > math.MaxInt32:
		return fmt.Errorf("--features %d: want the number of features, 1..%d (33762578 for Criteo)", s.Features, math.MaxInt32)
	case s.Train == nil && len(s.TrainFiles) == 0:
		return errors.New("no training data: give --train-files")
	case s.MaxSteps < 0:
		return fmt.Errorf("max steps %d: want ≥ 0 (0: no limit)", s.MaxSteps)
	case s.ShuffleBuffer < 0:
		return fmt.Errorf("shuffle buffer %d: want ≥ 0 (0: the default)", s.ShuffleBuffer)
	}
	if _, err := data.SparseFormat(s.Format, ""); err != nil {
		return err
	}
	for _, ds := range []data.Dataset{s.Train, s.Test} {
		if ds != nil && ds.Dim() != 0 {
			return fmt.Errorf("in-memory data set of %d dense features: a sparse job needs a sparse data set", ds.Dim())
		}
	}
	// The optimizer checks its own hyper-parameters.
	if _, err := sparse.NewOptimizer(s.Optimizer, 1, j.optimizerConfig()); err != nil {
		return err
	}
	return j.checkMemory()
}

// checkMemory refuses a run whose model cannot fit in the memory this
// process may use (rusage.MemoryLimit): the arrays of D values are
// allocated at start-up, and past the limit the Go runtime dies with a
// dump of every goroutine instead of an error.
func (j *sparseBuilder) checkMemory() error {
	limit, source := rusage.MemoryLimit()
	need, parts := j.modelMemory()
	if limit == 0 || need <= limit {
		return nil
	}
	return fmt.Errorf("--features %d needs about %s for the model alone (%s), more than the %s this process may use (%s): lower --features (%d for Criteo), or run with more memory",
		j.Sparse.Features, gib(need), strings.Join(parts, ", "), gib(limit), source, criteo.Features)
}

// modelMemory is what the run's arrays of D values take: the weights, the
// optimizer state, the dense exchange buffer and, with checkpoints, their
// encoding; and the parts as text.
func (j *sparseBuilder) modelMemory() (int64, []string) {
	s := j.Sparse
	d := int64(s.Features)
	var opt int64 // bytes per feature
	switch s.Optimizer {
	case "adagrad":
		opt = 4
	case "ftrl":
		opt = 8
	case "sgd":
		if s.L2 > 0 {
			opt = 4
		}
	}
	need := 4 * d
	parts := []string{"weights " + gib(4*d)}
	if opt > 0 {
		need += opt * d
		parts = append(parts, s.Optimizer+" state "+gib(opt*d))
	}
	if s.Exchange != sparse.ExchangeSparse {
		need += 4 * d
		parts = append(parts, "dense exchange buffer "+gib(4*d))
	}
	if j.CheckpointDir != "" || j.Restore != "" {
		ck := (2*(4+opt) + opt) * d // the tensors' bytes, the file's, the state gathered
		need += ck
		parts = append(parts, "checkpoint encoding "+gib(ck))
	}
	return need, parts
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

func (j *sparseBuilder) optimizerConfig() sparse.OptimizerConfig {
	return sparse.OptimizerConfig{LR: j.Config.LR, L1: j.Sparse.L1, L2: j.Sparse.L2, Beta: j.Sparse.Beta}
}

// opener returns the reader of the run's files (data.OpenSparse, in the
// configured format or each file's by its extension).
func (j *sparseBuilder) opener(log *zap.Logger) (data.Opener, error) {
	// One Inputs for the run: the count up front, every epoch and every
	// evaluation read the same files, and a file that changes between
	// them stops the run naming it.
	return data.OpenSparse(j.Sparse.Format, data.SparseOptions{Dim: j.Sparse.Features, ZeroBased: j.Sparse.ZeroBased, SkipCorrupt: j.Sparse.SkipCorrupt,
		OnSkip: func(err error) { log.Warn("skipped a corrupt record", zap.Error(err)) }, Inputs: data.NewInputs()})
}

// settings lists what every replica must agree on.
func (j *sparseBuilder) settings(replicas int) ([]setting, error) {
	c, s := &j.Config, j.Sparse
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
			if err := data.CheckSparseFile(f); err != nil {
				return "", err
			}
			format, err := data.SparseFormat(s.Format, f)
			if err != nil {
				return "", err
			}
			parts = append(parts, fmt.Sprintf("%s:%d:%s", filepath.Base(f), st.Size(), format))
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
	arith := func(name, value string) setting { return setting{Name: name, Value: value, Resume: true} }
	v := func(name, value string) setting { return setting{Name: name, Value: value} }
	return append([]setting{
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
	}, append(replica.WireSettings(s.Wire), (*Job)(j).driverSettings()...)...), nil
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
func (j *sparseBuilder) trainPipeline(ctx context.Context, rank, world int, open data.Opener) (data.Config, int, error) {
	c, s := &j.Config, j.Sparse
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

// sparseTestConfig is the pipeline of rank's part of the test set: the
// evaluation splits it among the replicas.
func sparseTestConfig(rank, world int) data.Config {
	return data.Config{Rank: rank, World: world, Policy: data.ShardAuto, BatchSize: sparseEvalBatch, Epochs: 1}
}

// sparsePipeline reads ds when it is set (data held in memory), else files.
func sparsePipeline(ctx context.Context, ds data.Dataset, files []string, open data.Opener, cfg data.Config) (*data.Pipeline, error) {
	if ds != nil {
		return data.NewPipeline(ctx, ds, cfg)
	}
	return data.NewFilePipeline(ctx, files, open, cfg)
}

// build counts this replica's shard, reads its part of the test files
// once and builds the replica (with its exchanger under the ring).
func (j *sparseBuilder) build(ctx context.Context, rank, world int) (*plan, error) {
	cfg, sc := &j.Config, j.Sparse
	log := cfg.logger().With(zap.Int("rank", rank))
	pr, err := j.prepare(ctx, rank, world, log)
	if err != nil {
		return nil, err
	}
	rep, open, pcfg := pr.rep, pr.open, pr.pcfg
	p := &plan{
		rep: rep, settings: pr.settings, shard: pr.shard,
		pipeline: func(ctx context.Context, startEpoch, epochs, steps int) (*data.Pipeline, error) {
			p := pcfg
			p.StepsPerEpoch, p.Epochs, p.StartEpoch = steps, epochs, startEpoch-1 // the pipeline counts epochs from 0
			return sparsePipeline(ctx, sc.Train, sc.TrainFiles, open, p)
		},
		schedule: j.schedule,
		result:   j.result(),
		header: func(steps, examples int) string {
			return fmt.Sprintf("%s: %d features, %s, %d replica(s) × batch %d (global batch %d), %d steps per epoch, %d training examples, exchange %s",
				SparseModel, sc.Features, sc.Optimizer, world, cfg.BatchSize, world*cfg.BatchSize, steps, examples, sc.Exchange)
		},
		maxSteps: sc.MaxSteps,
		done: func() {
			if sc.OnWeights != nil {
				sc.OnWeights(rep.Weights())
			}
		},
	}
	st, gossiping := (*Job)(j).strategy().(Gossip)
	if !gossiping {
		err := rep.UseExchanger(rank, world, sc.Exchange, sc.Gather, sc.Features, log)
		rep.UseDenseWire(sc.Wire)
		return p, err
	}
	rep.UseMean()
	p.header = func(steps, _ int) string {
		return fmt.Sprintf("%s: %d features, %s, %d gossip replica(s) × batch %d, %s peer each %d step(s), changed coordinates only, %d steps per pass over a shard",
			SparseModel, sc.Features, sc.Optimizer, world, cfg.BatchSize, st.Schedule, st.Every, steps)
	}
	p.sparse = true
	p.opts = gossip.Options{Sparse: true, SparseTolerance: gossip.DefaultOptions().SparseTolerance}
	// Every replica starts from zero weights, so nothing is broadcast; the
	// engine shares the model's own weights, and evaluations score a
	// snapshot of them.
	if rep.HasTest() {
		p.evalView = make([]float32, sc.Features)
	}
	p.evaluate = func(ctx context.Context) (replica.Metrics, error) {
		if !rep.HasTest() {
			return replica.Metrics{}, nil
		}
		m, err := scoreSparse(ctx, sc, &sparse.LogReg{W: p.evalView}, open)
		return replica.Metrics{Examples: m.Examples, Loss: m.LogLoss, Accuracy: m.Accuracy, AUC: m.AUC}, err
	}
	return p, nil
}

// prepared is what both sparse loops start from.
type prepared struct {
	open     data.Opener
	settings []setting
	pcfg     data.Config // this replica's training pipeline
	shard    int         // its training examples
	rep      *replica.Sparse
}

// prepare reads what a sparse run needs before its handshake: the
// settings, this replica's shard (counted) and its part of the test files
// (read once now, as the shard was, so that a bad file stops the run
// before the first epoch, not after it), and builds the replica.
func (j *sparseBuilder) prepare(ctx context.Context, rank, world int, log *zap.Logger) (*prepared, error) {
	sc := j.Sparse
	open, err := j.opener(log.Named("data"))
	if err != nil {
		return nil, err
	}
	pr := &prepared{open: open}
	if pr.settings, err = j.settings(world); err != nil {
		return nil, err
	}
	if pr.pcfg, pr.shard, err = j.trainPipeline(ctx, rank, world, pr.open); err != nil {
		return nil, err
	}
	if sc.Test == nil && len(sc.TestFiles) > 0 {
		if _, err := data.ShardCount(ctx, sc.TestFiles, pr.open, sparseTestConfig(rank, world)); err != nil {
			return nil, fmt.Errorf("checking this replica's test examples: %w", err)
		}
	}
	pr.rep, err = j.newReplica(pr.open)
	return pr, err
}

// newReplica builds the model (zero weights), its optimizer and the test
// set's reader.
func (j *sparseBuilder) newReplica(open data.Opener) (*replica.Sparse, error) {
	sc := j.Sparse
	model, err := sparse.NewLogReg(sc.Features)
	if err != nil {
		return nil, err
	}
	opt, err := sparse.NewOptimizer(sc.Optimizer, sc.Features, j.optimizerConfig())
	if err != nil {
		return nil, err
	}
	var test func(ctx context.Context, rank, world int) (*data.Pipeline, error)
	if sc.Test != nil || len(sc.TestFiles) > 0 {
		test = func(ctx context.Context, rank, world int) (*data.Pipeline, error) {
			cfg := sparseTestConfig(rank, world)
			if sc.Test != nil {
				cfg.Policy = data.ShardData
			}
			return sparsePipeline(ctx, sc.Test, sc.TestFiles, open, cfg)
		}
	}
	return replica.NewSparse(model, opt, test), nil
}

// schedule is the (constant) learning rate: the sparse optimizers adapt
// their own step sizes.
func (j *sparseBuilder) schedule(int) (nn.Schedule, error) {
	return nn.NewSchedule(nn.ScheduleConfig{Kind: nn.ScheduleConstant, Base: j.Config.LR})
}

// result describes the run for its Result.
func (j *sparseBuilder) result() Result {
	cfg, sc := &j.Config, j.Sparse
	return Result{
		Model: SparseModel, Params: sc.Features, BatchSize: cfg.BatchSize, Epochs: cfg.Epochs,
		Optimizer: sc.Optimizer, LR: cfg.LR, WeightDecay: sc.L2, Schedule: nn.ScheduleConstant, Seed: cfg.Seed,
		TargetAccuracy: cfg.TargetAccuracy, TargetLoss: cfg.TargetLoss,
	}
}

// scoreSparse evaluates model on the whole test set of sc on this
// replica alone (no collective: under gossip a peer may be gone).
func scoreSparse(ctx context.Context, sc *SparseConfig, model *sparse.LogReg, open data.Opener) (sparse.Metrics, error) {
	ecfg := data.Config{World: 1, Policy: data.ShardOff, BatchSize: sparseEvalBatch, Epochs: 1}
	pipe, err := sparsePipeline(ctx, sc.Test, sc.TestFiles, open, ecfg)
	if err != nil {
		return sparse.Metrics{}, err
	}
	defer pipe.Close()
	var e sparse.Evaluator
	for {
		b, err := pipe.Next(ctx)
		if errors.Is(err, io.EOF) {
			return e.Metrics(), nil
		}
		if err != nil {
			return sparse.Metrics{}, err
		}
		if err := model.Evaluate(sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}, b.Labels, &e); err != nil {
			return sparse.Metrics{}, err
		}
	}
}
