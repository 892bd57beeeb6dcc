package replica

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// DenseConfig is what a Dense replica is built from: the model and
// optimizer settings of mirrored's Config, the image shape, and this
// replica's share of the test set.
type DenseConfig struct {
	// NewModel builds the model; nil: nn.NewModelFor(Model, …).
	NewModel func(nn.Spec, int64, int) (nn.Model, error)
	Model    string // nn model name, when NewModel is nil
	Spec     nn.Spec
	Seed     int64
	Shards   int // 0: nn.DefaultShards
	// Optimizer, LR, Momentum, WeightDecay configure the nn optimizer.
	Optimizer                 string
	LR, Momentum, WeightDecay float64
	// GradientBucket is the bucket size in bytes (0: DefaultGradientBucket,
	// negative: no buckets).
	GradientBucket int
	// Combiner combines the gradient across the group (nil: Mean).
	Combiner Combiner
	// SyncBatchNorm normalises the model's batch normalizations over the
	// global batch, their statistics summed across the group inside the
	// forward and backward passes (nn.BatchNormSyncer; the synchronous
	// step hands the replica its group: StepGrouper). The gradient is
	// then exchanged after the backward pass, and the moving statistics,
	// the same bits on every replica, are not broadcast.
	SyncBatchNorm bool
	// Norm is the inputs' normalisation, recorded in checkpoints.
	Norm data.Normalization
	// ClassNames and Features are the data set's class names and a
	// table's column encoding (data.ImageSet's), recorded in checkpoints.
	ClassNames []string
	Features   *data.Features
	// TestX, TestY are this replica's contiguous share of the TestN test
	// examples (normalised images and labels).
	TestX []float32
	TestY []int32
	TestN int
	// Rank and World say how the test set is shared out (1 world: each
	// replica scores the whole set alone).
	Rank, World int
}

// Dense is an nn model (LeNet-5, softmax regression) with its
// optimizer and its share of the test set.
type Dense struct {
	model         nn.Model
	spec          nn.Spec
	norm          data.Normalization // the inputs', recorded in checkpoints
	classNames    []string
	features      string // data.Features' JSON, recorded in checkpoints
	params, grads []float32
	// buffers are the model's non-trainable state (nn.Stateful: batch
	// normalization's moving statistics), empty for most models. They
	// travel with the optimizer's state (OptState: checkpoints, resumes,
	// elastic commits) and with the parameters in the hash comparisons,
	// and every step the chief's overwrite the others' (DDP's
	// broadcast_buffers), so the replicas keep the same bits (synchronized
	// batch normalization computes the same bits on each: no broadcast).
	buffers     []float32
	bufT        []nn.ParamTensor
	checked     []float32 // params then buffers, for Checked
	opt         nn.Optimizer
	rank, world int
	labels      []int32
	// testX, testY are this replica's contiguous share of the testN test
	// examples.
	testX []float32
	testY []int32
	testN int
	// arch is the model's definition (nn's canonical JSON) and archDigest
	// its digest, for a model built by DenseConfig.NewModel that has one (see
	// architected); empty otherwise.
	arch, archDigest string
	// comb combines the gradient across the group (nil: Mean).
	comb Combiner
	// ov exchanges the gradient in buckets during the backward pass; nil
	// when the model cannot (see newOverlap).
	ov *overlap
	// stats sums synchronized batch normalization's statistics across
	// the group (DenseConfig.SyncBatchNorm); nil when off.
	stats *groupStats
}

// UseCombiner makes the replica combine its gradient with c (nil: Mean),
// as DenseConfig.Combiner does.
func (r *Dense) UseCombiner(c Combiner) { r.comb = c }

// Buffers are the model's non-trainable state (nn.Stateful), empty for
// most models.
func (r *Dense) Buffers() []float32 { return r.buffers }

// BufferTensors name the Buffers (nn.Stateful.BufferTensors).
func (r *Dense) BufferTensors() []nn.ParamTensor { return r.bufT }

// Overlaps says whether the replica can exchange its gradient in buckets
// during the backward pass (see newOverlap): more than one replica, a
// model that announces its gradient, and more than one bucket of it.
func (r *Dense) Overlaps() bool { return r.ov != nil }

// Model is the replica's nn model.
func (r *Dense) Model() nn.Model { return r.model }

// ArchDigest is the digest of the model's definition, for a model built
// by DenseConfig.NewModel that states one (see architected); empty
// otherwise.
func (r *Dense) ArchDigest() string { return r.archDigest }

// architected is a model that can state its definition as data: an
// nn.Sequential. The replicas of a DenseConfig.NewModel model that is one
// compare its digest at start-up, and checkpoints record it.
type architected interface {
	Architecture() nn.Architecture
}

// NewDense builds cfg's model for cfg.Spec, its optimizer and its
// bucketed exchange (more than one replica only).
func NewDense(cfg DenseConfig) (*Dense, error) {
	shards := cfg.Shards
	if shards == 0 {
		shards = nn.DefaultShards
	}
	spec, newModel := cfg.Spec, cfg.NewModel
	custom := newModel != nil
	if newModel == nil {
		newModel = func(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
			return nn.NewModelFor(cfg.Model, spec, seed, shards)
		}
	}
	model, err := newModel(spec, cfg.Seed, shards)
	if err != nil {
		if !custom {
			// A built-in model that cannot take the data (LeNet and
			// colour or 32×32 images): the user's to fix, before any step.
			return nil, data.BadData(err)
		}
		return nil, err
	}
	if model.InputDim() != spec.InputDim() || model.Classes() != spec.Classes {
		return nil, data.BadData(fmt.Errorf("model %s takes %d inputs and has %d classes; the data set has %d×%d×%d images and %d classes",
			model.Name(), model.InputDim(), model.Classes(), spec.Rows, spec.Cols, spec.C(), spec.Classes))
	}
	var features string
	if cfg.Features != nil {
		b, err := json.Marshal(cfg.Features)
		if err != nil {
			return nil, fmt.Errorf("the data set's features: %w", err)
		}
		features = string(b)
	}
	r := &Dense{model: model, spec: spec, norm: cfg.Norm, classNames: cfg.ClassNames, features: features, params: model.Params(), grads: model.Grads(), rank: cfg.Rank, world: cfg.World,
		testX: cfg.TestX, testY: cfg.TestY, testN: cfg.TestN, comb: cfg.Combiner}
	if st, ok := model.(nn.Stateful); ok {
		r.buffers, r.bufT = st.Buffers(), st.BufferTensors()
	}
	if a, ok := model.(architected); ok && custom {
		arch := a.Architecture()
		b, err := json.Marshal(arch)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", model.Name(), err)
		}
		if r.archDigest, err = arch.Digest(); err != nil {
			return nil, fmt.Errorf("model %s: %w", model.Name(), err)
		}
		r.arch = string(b)
	}
	if r.opt, err = nn.NewOptimizer(cfg.Optimizer, nn.OptimizerConfig{
		Params: len(r.params), LR: cfg.LR, Momentum: cfg.Momentum, WeightDecay: cfg.WeightDecay}); err != nil {
		return nil, err
	}
	switch {
	case cfg.SyncBatchNorm:
		if err := r.syncBatchNorm(); err != nil {
			return nil, data.BadData(err) // the user's to fix, before any step
		}
	case cfg.World > 1:
		r.ov = newOverlap(model, cfg.GradientBucket)
	}
	return r, nil
}

func (r *Dense) Params() []float32 { return r.params }

// OptState is the optimizer's state, then the model's buffers: the
// state a run carries besides the parameters.
func (r *Dense) OptState() [][]float32 {
	var out [][]float32
	if st := r.opt.State(); len(st) > 0 {
		out = append(out, st)
	}
	if len(r.buffers) > 0 {
		out = append(out, r.buffers)
	}
	return out
}

func (r *Dense) Gradient(b *data.Batch) (float64, error) {
	if b.Size == 0 {
		clear(r.grads) // an empty batch still takes part in the all-reduce
		if r.stats != nil {
			// and in the passes' sums of statistics.
			_, err := r.model.ForwardBackward(nil, nil, 0)
			return 0, err
		}
		return 0, nil
	}
	r.labels = b.IntLabels(r.labels)
	if s, ok := r.model.(nn.Stepper); ok { // dropout's masks: this replica's, this batch's
		s.SetStep(r.rank, b.Epoch, b.Step)
	}
	return r.model.ForwardBackward(b.X, r.labels, b.Size)
}

// TrainCorrect is the count of correct examples in the last Gradient's
// batch, if the model counts them (nn.TrainCounter).
func (r *Dense) TrainCorrect() (int, bool) {
	if tc, ok := r.model.(nn.TrainCounter); ok {
		return tc.TrainCorrect(), true
	}
	return 0, false
}

// Combine replaces the gradient by the group's combination (r.comb): the
// buckets the backward pass did not send, or the whole gradient at once.
func (r *Dense) Combine(ctx context.Context, g Group, _ int) error {
	var err error
	switch {
	case r.ov != nil && r.ov.work != nil:
		err = r.ov.finish()
	default:
		if r.ov != nil {
			r.ov.spans = r.ov.spans[:0] // one exchange, on the Combine track
		}
		err = r.combiner().CombineRange(ctx, g, r.grads, 0, len(r.grads))
	}
	if err != nil || len(r.buffers) == 0 || g.Size() < 2 || r.stats != nil {
		return err
	}
	if err := g.Broadcast(ctx, r.buffers, 0); err != nil {
		return fmt.Errorf("broadcasting the model's buffers (%s …) from rank 0: %w", r.bufT[0].Name, err)
	}
	return nil
}

// combiner is the replica's Combiner (Mean unless the config sets one).
func (r *Dense) combiner() Combiner {
	if r.comb == nil {
		return Mean{}
	}
	return r.comb
}

func (r *Dense) Update(params []float32, lr float64) {
	r.opt.SetLR(lr)
	r.opt.Step(params, r.grads)
}

func (r *Dense) Settle() {}

func (r *Dense) Checked() ([]float32, string) {
	if len(r.buffers) == 0 {
		return r.params, ""
	}
	r.checked = append(append(r.checked[:0], r.params...), r.buffers...)
	return r.checked, " (parameters and buffers)"
}

func (r *Dense) Layout() checkpoint.Layout {
	l := denseLayout(r.model.Tensors(), r.opt.StateParts(), r.spec)
	for _, t := range r.bufT { // after the optimizer's state, as OptState
		l.State = append(l.State, checkpoint.Slot{Name: t.Name, Shape: t.Shape})
	}
	l.Architecture = r.arch
	l.InputScale, l.InputMean, l.InputStd = r.norm.Scale, r.norm.Mean, r.norm.Std
	if r.spec.C() > 1 {
		l.Channels = r.spec.C()
	}
	l.ClassNames, l.Features = r.classNames, r.features
	return l
}

// denseLayout names an nn model's tensors and its optimizer's state as
// PyTorch does: the state of parameter p is "optimizer.p.<part>" with p's
// shape (momentum_buffer; exp_avg, exp_avg_sq), a scalar part
// "optimizer.<part>" (Adam's step).
func denseLayout(tensors []nn.ParamTensor, parts []nn.StatePart, spec nn.Spec) checkpoint.Layout {
	l := checkpoint.Layout{Classes: spec.Classes, Rows: spec.Rows, Cols: spec.Cols}
	for _, t := range tensors {
		l.Params = append(l.Params, checkpoint.Slot{Name: t.Name, Shape: t.Shape})
	}
	for _, p := range parts {
		if !p.PerParam {
			l.State = append(l.State, checkpoint.Slot{Name: "optimizer." + p.Name, Shape: []int{p.Len}})
			continue
		}
		for _, t := range tensors {
			l.State = append(l.State, checkpoint.Slot{Name: "optimizer." + t.Name + "." + p.Name, Shape: t.Shape})
		}
	}
	return l
}

// Evaluate all-reduces the loss sum and correct count of each replica's
// share; alone, the loss is exact (not rounded through float32).
func (r *Dense) Evaluate(ctx context.Context, g Group) (Metrics, error) {
	testLoss, correct := 0.0, 0
	if n := len(r.testY); n > 0 {
		var err error
		if testLoss, correct, err = r.model.Evaluate(r.testX, r.testY, n); err != nil {
			return Metrics{}, err
		}
	}
	ev := []float32{float32(testLoss), float32(correct)}
	if err := g.AllReduceSum(ctx, ev); err != nil {
		return Metrics{}, fmt.Errorf("all-reducing the test counts: %w", err)
	}
	m := Metrics{Examples: r.testN, Loss: float64(ev[0]) / float64(r.testN), Accuracy: float64(ev[1]) / float64(r.testN)}
	if r.world == 1 {
		m.Loss = testLoss / float64(r.testN)
	}
	return m, nil
}
