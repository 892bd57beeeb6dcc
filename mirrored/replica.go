package mirrored

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/nn"
)

// replica is one replica's model and optimizer: the arithmetic of a step,
// with no data loading, disk or printing. The loops (runSync, runAsync)
// drive it; denseReplica (the nn models) and sparseReplica (sparse
// logistic regression) implement it. Methods are called from one
// goroutine.
type replica interface {
	// Params is the flat parameter vector and OptState the optimizer's
	// state vectors: views, compared by hash, broadcast and checkpointed.
	Params() []float32
	OptState() [][]float32
	// Gradient computes the gradient of batch b (possibly empty: a zero
	// gradient) into the replica's own buffer and returns the loss to add
	// to the epoch's sum.
	Gradient(b *data.Batch) (float64, error)
	// Combine replaces the gradient by the group's mean gradient.
	Combine(ctx context.Context, g Group, step int) error
	// Update applies the optimizer to params at learning rate lr (params
	// is Params() except under gossip, where it is the shared vector).
	Update(params []float32, lr float64)
	// Settle applies deferred work (lazy regularisation) so that Params
	// holds the exact parameters; every replica calls it at the same
	// steps, since it changes the arithmetic that follows.
	Settle()
	// Evaluate scores Params on the test set: this replica's share, the
	// figures combined over g so that every replica reports the same;
	// Examples is 0 when there is no test set.
	Evaluate(ctx context.Context, g Group) (metrics, error)
	// Checked returns the values whose hashes the replicas compare every
	// Job.HashEvery steps, and what they are.
	Checked() ([]float32, string)
	// Layout names the tensors of Params and OptState as checkpoints
	// store them (PyTorch's names and shapes), and the data's shape.
	Layout() checkpoint.Layout
}

// metrics are a model's figures on the test set.
type metrics struct {
	Examples       int
	Loss, Accuracy float64
	AUC            float64 // binary models only
}

// denseReplica is an nn model (LeNet-5, softmax regression) with its
// optimizer and its share of the test set.
type denseReplica struct {
	model         nn.Model
	spec          nn.Spec
	norm          data.Normalization // the inputs', recorded in checkpoints
	params, grads []float32
	// buffers are the model's non-trainable state (nn.Stateful: batch
	// normalization's moving statistics), empty for most models. They
	// travel with the optimizer's state (OptState: checkpoints, resumes,
	// elastic commits) and with the parameters in the hash comparisons,
	// and every step the chief's overwrite the others' (DDP's
	// broadcast_buffers), so the replicas keep the same bits.
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
	// its digest, for a model built by Job.NewModel that has one (see
	// architected); empty otherwise.
	arch, archDigest string
	// comb combines the gradient across the group (nil: Mean).
	comb Combiner
	// ov exchanges the gradient in buckets during the backward pass; nil
	// when the model cannot (see newOverlap).
	ov *overlap
}

// buffered is a replica whose model has non-trainable buffers (see
// denseReplica.buffers).
type buffered interface{ buffersOf() []float32 }

func (r *denseReplica) buffersOf() []float32 { return r.buffers }

// architected is a model that can state its definition as data: an
// nn.Sequential. The replicas of a Job.NewModel model that is one
// compare its digest at start-up, and checkpoints record it.
type architected interface {
	Architecture() nn.Architecture
}

// newDenseReplica builds cfg's model for test's image size and classes
// classes.
func newDenseReplica(cfg *Config, newModel func(nn.Spec, int64, int) (nn.Model, error), test *data.Images, classes, rank, world int) (*denseReplica, error) {
	shards := cfg.Shards
	if shards == 0 {
		shards = nn.DefaultShards
	}
	spec := nn.Spec{Rows: test.Rows, Cols: test.Cols, Classes: classes}
	custom := newModel != nil
	if newModel == nil {
		newModel = func(spec nn.Spec, seed int64, shards int) (nn.Model, error) {
			return nn.NewModelFor(cfg.Model, spec, seed, shards)
		}
	}
	model, err := newModel(spec, cfg.Seed, shards)
	if err != nil {
		return nil, err
	}
	if model.InputDim() != spec.Rows*spec.Cols || model.Classes() != classes {
		return nil, fmt.Errorf("model %s takes %d inputs and has %d classes; the data set has %d×%d images and %d classes",
			model.Name(), model.InputDim(), model.Classes(), spec.Rows, spec.Cols, classes)
	}
	r := &denseReplica{model: model, spec: spec, norm: test.Norm.Resolve(), params: model.Params(), grads: model.Grads(), rank: rank, world: world, testN: test.N}
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
	lo, hi := rank*test.N/world, (rank+1)*test.N/world
	r.testX, r.testY = denseRange(test, lo, hi)
	if world > 1 {
		r.ov = newOverlap(model, cfg.GradientBucket)
	}
	return r, nil
}

func (r *denseReplica) Params() []float32 { return r.params }

// OptState is the optimizer's state, then the model's buffers: the
// state a run carries besides the parameters.
func (r *denseReplica) OptState() [][]float32 {
	var out [][]float32
	if st := r.opt.State(); len(st) > 0 {
		out = append(out, st)
	}
	if len(r.buffers) > 0 {
		out = append(out, r.buffers)
	}
	return out
}

func (r *denseReplica) Gradient(b *data.Batch) (float64, error) {
	if b.Size == 0 {
		clear(r.grads) // an empty batch still takes part in the all-reduce
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
func (r *denseReplica) TrainCorrect() (int, bool) {
	if tc, ok := r.model.(nn.TrainCounter); ok {
		return tc.TrainCorrect(), true
	}
	return 0, false
}

// Combine replaces the gradient by the group's combination (r.comb): the
// buckets the backward pass did not send, or the whole gradient at once.
func (r *denseReplica) Combine(ctx context.Context, g Group, _ int) error {
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
	if err != nil || len(r.buffers) == 0 || g.Size() < 2 {
		return err
	}
	if err := g.Broadcast(ctx, r.buffers, 0); err != nil {
		return fmt.Errorf("broadcasting the model's buffers (%s …) from rank 0: %w", r.bufT[0].Name, err)
	}
	return nil
}

// combiner is the replica's Combiner (Mean unless the Job sets one).
func (r *denseReplica) combiner() Combiner {
	if r.comb == nil {
		return Mean{}
	}
	return r.comb
}

func (r *denseReplica) Update(params []float32, lr float64) {
	r.opt.SetLR(lr)
	r.opt.Step(params, r.grads)
}

func (r *denseReplica) Settle() {}

func (r *denseReplica) Checked() ([]float32, string) {
	if len(r.buffers) == 0 {
		return r.params, ""
	}
	r.checked = append(append(r.checked[:0], r.params...), r.buffers...)
	return r.checked, " (parameters and buffers)"
}

func (r *denseReplica) Layout() checkpoint.Layout {
	l := denseLayout(r.model.Tensors(), r.opt.StateParts(), r.spec)
	for _, t := range r.bufT { // after the optimizer's state, as OptState
		l.State = append(l.State, checkpoint.Slot{Name: t.Name, Shape: t.Shape})
	}
	l.Architecture = r.arch
	l.InputScale, l.InputMean, l.InputStd = r.norm.Scale, r.norm.Mean, r.norm.Std
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
func (r *denseReplica) Evaluate(ctx context.Context, g Group) (metrics, error) {
	testLoss, correct := 0.0, 0
	if n := len(r.testY); n > 0 {
		var err error
		if testLoss, correct, err = r.model.Evaluate(r.testX, r.testY, n); err != nil {
			return metrics{}, err
		}
	}
	ev := []float32{float32(testLoss), float32(correct)}
	if err := g.AllReduceSum(ctx, ev); err != nil {
		return metrics{}, fmt.Errorf("all-reducing the test counts: %w", err)
	}
	m := metrics{Examples: r.testN, Loss: float64(ev[0]) / float64(r.testN), Accuracy: float64(ev[1]) / float64(r.testN)}
	if r.world == 1 {
		m.Loss = testLoss / float64(r.testN)
	}
	return m, nil
}
