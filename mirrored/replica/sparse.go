package replica

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
	"github.com/meshtrain/meshtrain/sparse"
	"go.uber.org/zap"
)

var (
	_ Undoer        = (*Sparse)(nil)
	_ EpochInformer = (*Sparse)(nil)
)

// SparseModel is the model name of sparse binary logistic regression
// (--model sparse-lr), as checkpoints record it.
const SparseModel = "sparse-lr"

// Sparse is sparse logistic regression (sparse.LogReg) with its
// optimizer: each step touches only the features of its batch, and the
// replicas exchange those (see mirrored's sparseBuilder) rather than D
// floats.
type Sparse struct {
	model *sparse.LogReg
	opt   sparse.Optimizer
	state [][]float32
	xch   *Exchanger // nil under gossip: no Combine
	// mean (gossip): Gradient computes the batch's mean gradient, which
	// Update applies as it is, with no exchange.
	mean bool
	// test opens a pipeline over rank's part of the test set (nil: no
	// test set).
	test        func(ctx context.Context, rank, world int) (*data.Pipeline, error)
	rank, world int

	local, merged sparse.Vector // this replica's gradient sum; the group's mean
	examples      int           // examples behind local
	combined      int           // examples behind merged (0: no update)
	touched       []float32
	log           undoLog // what the steps overwrote since the last commit (elastic)
	// Steps per exchange mode since the last epoch line.
	epochSparse, epochDense int
}

// NewSparse is a replica of model trained by opt; test, if set, opens a
// pipeline over rank's part of the test set. It combines nothing until
// UseExchanger (the ring) or UseMean (gossip).
func NewSparse(model *sparse.LogReg, opt sparse.Optimizer, test func(ctx context.Context, rank, world int) (*data.Pipeline, error)) *Sparse {
	return &Sparse{model: model, opt: opt, state: opt.State(), test: test}
}

// UseExchanger makes Combine exchange the gradient sums as rank of world
// (see NewExchanger).
func (r *Sparse) UseExchanger(rank, world int, mode sparse.Exchange, gather string, dim int, log *zap.Logger) error {
	var err error
	r.xch, err = NewExchanger(rank, world, mode, gather, dim, log)
	return err
}

// UseMean makes Gradient compute the batch's mean gradient, which Update
// applies as it is, with no exchange (gossip).
func (r *Sparse) UseMean() { r.mean = true }

// HasTest says whether the replica has a test set to evaluate on.
func (r *Sparse) HasTest() bool { return r.test != nil }

// Weights are the model's weights (Params).
func (r *Sparse) Weights() []float32 { return r.model.W }

func (r *Sparse) Params() []float32     { return r.model.W }
func (r *Sparse) OptState() [][]float32 { return r.state }

// sparseStateNames are PyTorch's names for the sparse optimizers' state
// (AdaGrad's sum of squares; FTRL's z and n, interleaved: shape [D 2]).
var sparseStateNames = map[string]string{"adagrad": "sum", "ftrl": "zn"}

// Layout is "weight" [D] and the optimizer's state arrays, per feature.
func (r *Sparse) Layout() checkpoint.Layout {
	d := len(r.model.W)
	l := checkpoint.Layout{Params: []checkpoint.Slot{{Name: "weight", Shape: []int{d}}}}
	for i, a := range r.state {
		name, ok := sparseStateNames[r.opt.Name()]
		if !ok || len(r.state) > 1 {
			name = fmt.Sprintf("state%d", i)
		}
		shape := []int{d}
		if len(a) != d && d > 0 {
			shape = []int{d, len(a) / d}
		}
		l.State = append(l.State, checkpoint.Slot{Name: "optimizer.weight." + name, Shape: shape})
	}
	return l
}

// Gradient computes the gradient sum over the batch's examples (the
// exchange turns the sums into the mean of the union batch) and returns
// the loss sum.
func (r *Sparse) Gradient(b *data.Batch) (float64, error) {
	r.examples = b.Size
	if b.Size == 0 {
		r.combined = 0
		r.local.Indices, r.local.Values = r.local.Indices[:0], r.local.Values[:0]
		return 0, nil
	}
	x := sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}
	if r.mean {
		r.combined = b.Size
		return r.model.Gradient(x, b.Labels, &r.merged)
	}
	return r.model.GradientSum(x, b.Labels, &r.local)
}

func (r *Sparse) Combine(ctx context.Context, g Group, step int) error {
	n, mode, err := r.xch.Exchange(ctx, g, step, r.local, r.examples, &r.merged)
	if err != nil {
		return err
	}
	r.combined = n
	if mode == sparse.ExchangeDense {
		r.epochDense++
	} else {
		r.epochSparse++
	}
	return nil
}

// Update applies the optimizer at its configured (constant) rate; a step
// in which no replica had an example changes nothing.
func (r *Sparse) Update(w []float32, _ float64) {
	if r.combined > 0 {
		r.log.save(r.merged.Indices, w, r.state)
		r.opt.Step(w, r.merged)
	}
}

func (r *Sparse) Settle() { r.opt.Flush(r.model.W) }

// Mark implements Undoer, unless a lazy L2 decay makes every settling
// change every weight: then commits copy.
func (r *Sparse) Mark() bool {
	if sgd, ok := r.opt.(*sparse.SGD); ok && sgd.Lazy() {
		return false
	}
	r.log.reset(len(r.model.W))
	return true
}

func (r *Sparse) Undo() { r.log.apply(r.model.W, r.state) }

// undoLog holds the values a replica's steps overwrote since its mark,
// the first time each feature changed: its weight and the k floats of
// each optimizer state it keeps per feature (at k·i). The steps touch
// those values anyway, so keeping them costs little; it grows with the
// features touched between commits.
type undoLog struct {
	on   bool // marked: an elastic run keeps it
	bits []uint64
	idx  []int32
	w    []float32
	s    []float32 // per logged feature, every state's k values in turn
}

func (u *undoLog) reset(n int) {
	if len(u.bits) != (n+63)/64 {
		u.bits = make([]uint64, (n+63)/64)
	} else {
		for _, i := range u.idx {
			u.bits[i>>6] = 0
		}
	}
	u.on, u.idx, u.w, u.s = true, u.idx[:0], u.w[:0], u.s[:0]
}

// save logs the old values of the features idx of w and states that are
// not logged yet.
func (u *undoLog) save(idx []int32, w []float32, states [][]float32) {
	if !u.on {
		return
	}
	for _, i := range idx {
		word, bit := i>>6, uint64(1)<<(i&63)
		if u.bits[word]&bit != 0 {
			continue
		}
		u.bits[word] |= bit
		u.idx = append(u.idx, i)
		u.w = append(u.w, w[i])
		for _, a := range states {
			k := len(a) / len(w)
			u.s = append(u.s, a[k*int(i):k*int(i)+k]...)
		}
	}
}

// apply writes the logged values back: w and states are as at the mark.
func (u *undoLog) apply(w []float32, states [][]float32) {
	off := 0
	for j, i := range u.idx {
		w[i] = u.w[j]
		for _, a := range states {
			k := len(a) / len(w)
			off += copy(a[k*int(i):k*int(i)+k], u.s[off:off+k])
		}
	}
	u.reset(len(w))
}

// Checked is the weights the last step touched: cheap to hash every few
// steps, and where a divergence shows first.
func (r *Sparse) Checked() ([]float32, string) {
	r.touched = r.touched[:0]
	for _, i := range r.merged.Indices {
		r.touched = append(r.touched, r.model.W[i])
	}
	return r.touched, fmt.Sprintf(" (the %d weights it touched)", len(r.touched))
}

// EpochInfo says how the epoch's steps exchanged, and starts counting
// afresh.
func (r *Sparse) EpochInfo() string {
	s := fmt.Sprintf("exchange sparse %d dense %d", r.epochSparse, r.epochDense)
	r.epochSparse, r.epochDense = 0, 0
	return s
}

// Evaluate scores this replica's share of the test set, all-gathers the
// (margin, label) pairs and computes the metrics over all of them in rank
// order, so every replica reports the same figures.
func (r *Sparse) Evaluate(ctx context.Context, g Group) (Metrics, error) {
	if r.test == nil {
		return Metrics{}, nil
	}
	rank, world := g.Rank(), g.Size()
	pipe, err := r.test(ctx, rank, world)
	if err != nil {
		return Metrics{}, err
	}
	defer pipe.Close()
	scored, err := r.score(ctx, pipe)
	if err != nil {
		return Metrics{}, err
	}
	all, err := g.AllGather(ctx, scored)
	if err != nil {
		return Metrics{}, fmt.Errorf("gathering the test predictions: %w", err)
	}
	var ev sparse.Evaluator
	for r, part := range all {
		if len(part)%8 != 0 {
			return Metrics{}, fmt.Errorf("rank %d sent %d bytes of test predictions, not whole (margin, label) pairs", r, len(part))
		}
		for k := 0; k+8 <= len(part); k += 8 {
			margin := math.Float32frombits(binary.LittleEndian.Uint32(part[k:]))
			label := math.Float32frombits(binary.LittleEndian.Uint32(part[k+4:]))
			if err := ev.Add(margin, label); err != nil {
				return Metrics{}, fmt.Errorf("test example %d of rank %d: %w", k/8, r, err)
			}
		}
	}
	m := ev.Metrics()
	return Metrics{Examples: m.Examples, Loss: m.LogLoss, Accuracy: m.Accuracy, AUC: m.AUC}, nil
}

// score returns each example of pipe as 8 bytes: float32 margin, float32
// label.
func (r *Sparse) score(ctx context.Context, pipe *data.Pipeline) ([]byte, error) {
	var scored []byte
	dim := uint32(r.model.Dim())
	for {
		b, err := pipe.Next(ctx)
		if errors.Is(err, io.EOF) {
			return scored, nil
		}
		if err != nil {
			return nil, err
		}
		x := sparse.CSR{RowPtr: b.RowPtr, Indices: b.Indices, Values: b.Values}
		for k := 0; k < b.Size; k++ {
			row := x.Row(k)
			for _, i := range row.Indices {
				if uint32(i) >= dim {
					return nil, fmt.Errorf("test example: feature index %d is outside [0, %d)", i, dim)
				}
			}
			scored = binary.LittleEndian.AppendUint32(scored, math.Float32bits(row.Dot(r.model.W)))
			scored = binary.LittleEndian.AppendUint32(scored, math.Float32bits(b.Labels[k]))
		}
	}
}
