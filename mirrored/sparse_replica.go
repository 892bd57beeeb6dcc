package mirrored

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
)

// sparseReplica is sparse logistic regression (sparse.LogReg) with its
// optimizer: each step touches only the features of its batch, and the
// replicas exchange those (see sparseBuilder) rather than D floats.
type sparseReplica struct {
	model *sparse.LogReg
	opt   sparse.Optimizer
	state [][]float32
	xch   *exchanger // nil under gossip: no Combine
	// mean (gossip): Gradient computes the batch's mean gradient, which
	// Update applies as it is, with no exchange.
	mean bool
	// test opens a pipeline over the test set with the given shard config
	// (nil: no test set).
	test        func(ctx context.Context, cfg data.Config) (*data.Pipeline, error)
	rank, world int

	local, merged sparse.Vector // this replica's gradient sum; the group's mean
	examples      int           // examples behind local
	combined      int           // examples behind merged (0: no update)
	touched       []float32
	changed       changeSet // the features updated since the last commit (elastic)
	// Steps per exchange mode since the last epoch line.
	epochSparse, epochDense int
}

func (r *sparseReplica) Params() []float32     { return r.model.W }
func (r *sparseReplica) OptState() [][]float32 { return r.state }

// sparseStateNames are PyTorch's names for the sparse optimizers' state
// (AdaGrad's sum of squares; FTRL's z and n, interleaved: shape [D 2]).
var sparseStateNames = map[string]string{"adagrad": "sum", "ftrl": "zn"}

// Layout is "weight" [D] and the optimizer's state arrays, per feature.
func (r *sparseReplica) Layout() checkpoint.Layout {
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
func (r *sparseReplica) Gradient(b *data.Batch) (float64, error) {
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

func (r *sparseReplica) Combine(ctx context.Context, g Group, step int) error {
	n, mode, err := r.xch.exchange(ctx, g, step, r.local, r.examples, &r.merged)
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
func (r *sparseReplica) Update(w []float32, _ float64) {
	if r.combined > 0 {
		r.opt.Step(w, r.merged)
		r.changed.add(r.merged.Indices, len(w))
	}
}

func (r *sparseReplica) Settle() {
	if sgd, ok := r.opt.(*sparse.SGD); ok && sgd.Lazy() {
		r.changed.all = true // the decay settles every weight
	}
	r.opt.Flush(r.model.W)
}

func (r *sparseReplica) dirty() ([]int32, bool) { return r.changed.list, r.changed.all }
func (r *sparseReplica) resetDirty()            { r.changed.reset() }
func (r *sparseReplica) trackChanges()          { r.changed.track = true }

// changeSet is a set of feature indices, kept as a list and a bitmap;
// past a quarter of the features it gives up and says all.
type changeSet struct {
	track bool // only elastic runs commit: the others keep nothing
	bits  []uint64
	list  []int32
	all   bool
}

func (s *changeSet) add(idx []int32, n int) {
	if !s.track || s.all {
		return
	}
	if len(s.bits) != (n+63)/64 {
		s.bits = make([]uint64, (n+63)/64)
	}
	for _, i := range idx {
		if w, b := i>>6, uint64(1)<<(i&63); s.bits[w]&b == 0 {
			s.bits[w] |= b
			s.list = append(s.list, i)
		}
	}
	if len(s.list) > n/4 {
		s.all = true
	}
}

func (s *changeSet) reset() {
	if s.all {
		clear(s.bits)
	} else {
		for _, i := range s.list {
			s.bits[i>>6] = 0
		}
	}
	s.list, s.all = s.list[:0], false
}

// Checked is the weights the last step touched: cheap to hash every few
// steps, and where a divergence shows first.
func (r *sparseReplica) Checked() ([]float32, string) {
	r.touched = r.touched[:0]
	for _, i := range r.merged.Indices {
		r.touched = append(r.touched, r.model.W[i])
	}
	return r.touched, fmt.Sprintf(" (the %d weights it touched)", len(r.touched))
}

// epochInfo says how the epoch's steps exchanged, and starts counting
// afresh.
func (r *sparseReplica) epochInfo() string {
	s := fmt.Sprintf("exchange sparse %d dense %d", r.epochSparse, r.epochDense)
	r.epochSparse, r.epochDense = 0, 0
	return s
}

// Evaluate scores this replica's share of the test set, all-gathers the
// (margin, label) pairs and computes the metrics over all of them in rank
// order, so every replica reports the same figures.
func (r *sparseReplica) Evaluate(ctx context.Context, g Group) (metrics, error) {
	if r.test == nil {
		return metrics{}, nil
	}
	rank, world := g.Rank(), g.Size()
	pipe, err := r.test(ctx, sparseTestConfig(rank, world))
	if err != nil {
		return metrics{}, err
	}
	defer pipe.Close()
	scored, err := r.score(ctx, pipe)
	if err != nil {
		return metrics{}, err
	}
	all, err := g.AllGather(ctx, scored)
	if err != nil {
		return metrics{}, fmt.Errorf("gathering the test predictions: %w", err)
	}
	var ev sparse.Evaluator
	for r, part := range all {
		if len(part)%8 != 0 {
			return metrics{}, fmt.Errorf("rank %d sent %d bytes of test predictions, not whole (margin, label) pairs", r, len(part))
		}
		for k := 0; k+8 <= len(part); k += 8 {
			margin := math.Float32frombits(binary.LittleEndian.Uint32(part[k:]))
			label := math.Float32frombits(binary.LittleEndian.Uint32(part[k+4:]))
			if err := ev.Add(margin, label); err != nil {
				return metrics{}, fmt.Errorf("test example %d of rank %d: %w", k/8, r, err)
			}
		}
	}
	m := ev.Metrics()
	return metrics{Examples: m.Examples, Loss: m.LogLoss, Accuracy: m.Accuracy, AUC: m.AUC}, nil
}

// score returns each example of pipe as 8 bytes: float32 margin, float32
// label.
func (r *sparseReplica) score(ctx context.Context, pipe *data.Pipeline) ([]byte, error) {
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
