package sparse

import (
	"fmt"
	"math"
	"unsafe"
)

// LogReg is binary logistic regression, P(y=1 | x) = σ(w·x), over a dense
// weight vector W of D = len(W) features. A bias, if wanted, is a feature
// present in every example (the Criteo generator puts it at index 0).
//
// Labels are accepted as -1/+1 or 0/1 (-1 and 0 both mean negative); any
// other label is an error naming its row. The gradient is computed sparsely:
// a call reads W only at the batch's indices and writes nothing but the
// gradient, so its cost does not depend on D.
type LogReg struct {
	W []float32
	c Coalescer
}

// NewLogReg returns a model of dim features with all weights zero.
func NewLogReg(dim int) (*LogReg, error) {
	if dim <= 0 || dim > math.MaxInt32 {
		return nil, fmt.Errorf("sparse: logistic regression over %d features: want 1..%d", dim, math.MaxInt32)
	}
	return &LogReg{W: makeFloats(dim)}, nil
}

// Dim returns the number of features D.
func (m *LogReg) Dim() int { return len(m.W) }

// Margin returns w·x, the log-odds of a positive label.
func (m *LogReg) Margin(x Vector) float32 { return x.Dot(m.W) }

// Gradient computes the mean log-loss of the batch x with the given labels
// and writes the mean gradient, coalesced and sorted, into g (reusing its
// storage). An out-of-range index or a bad label is an error naming the row;
// g is then unspecified.
func (m *LogReg) Gradient(x CSR, labels []float32, g *Vector) (loss float64, err error) {
	loss, err = m.accumulate(x, labels)
	if err != nil {
		return 0, err
	}
	n := float64(x.Rows())
	m.c.Sum(g, 1/n)
	return loss / n, nil
}

// GradientSum is Gradient without the division by the batch size: the summed
// loss and summed gradient, which is what peers exchange so that batches of
// different sizes still average correctly (see Coalescer.MergeGradients).
func (m *LogReg) GradientSum(x CSR, labels []float32, g *Vector) (lossSum float64, err error) {
	lossSum, err = m.accumulate(x, labels)
	if err != nil {
		return 0, err
	}
	m.c.Sum(g, 1)
	return lossSum, nil
}

// accumulate runs the forward pass over x, leaving the per-example gradient
// pairs in m.c, and returns the summed loss.
func (m *LogReg) accumulate(x CSR, labels []float32) (float64, error) {
	rows := x.Rows()
	if rows == 0 {
		return 0, fmt.Errorf("sparse: gradient of an empty batch")
	}
	if len(labels) != rows {
		return 0, fmt.Errorf("sparse: batch has %d rows but %d labels", rows, len(labels))
	}
	if len(x.Values) != len(x.Indices) || x.RowPtr[0] != 0 || int(x.RowPtr[rows]) != len(x.Indices) {
		return 0, fmt.Errorf("sparse: malformed CSR batch: %d indices, %d values, RowPtr spans [%d, %d]", len(x.Indices), len(x.Values), x.RowPtr[0], x.RowPtr[rows])
	}
	w := m.W
	dim := uint32(len(w))
	c := &m.c
	c.Reset()
	// Write the pairs straight into the coalescer's buffer: this loop is the
	// whole forward and backward pass, so it avoids a call per pair.
	nnz := len(x.Indices)
	if cap(c.keys) < nnz {
		c.keys = make([]uint64, 0, nnz+nnz/4)
	}
	keys := c.keys[:nnz]
	// Start every weight load of the batch before the first one is needed.
	// An index outside W is caught below before it is read; prefetching it
	// is harmless (a prefetch never faults).
	if nnz > 0 {
		prefetchIndexed(unsafe.Pointer(&w[0]), x.Indices, 2)
	}
	var maxIndex uint32
	var loss float64
	for r := 0; r < rows; r++ {
		lo, hi := x.RowPtr[r], x.RowPtr[r+1]
		if lo > hi || int(hi) > nnz {
			return 0, fmt.Errorf("sparse: malformed CSR batch: row %d spans [%d, %d) of %d", r, lo, hi, nnz)
		}
		idx := x.Indices[lo:hi]
		val := x.Values[lo:hi]
		val = val[:len(idx)]
		var z float32
		for k, i := range idx {
			if uint32(i) >= dim {
				return 0, fmt.Errorf("sparse: row %d: feature index %d is outside [0, %d)", r, i, dim)
			}
			z += w[i] * val[k]
			maxIndex = max(maxIndex, uint32(i))
		}
		y, err := label01(labels[r])
		if err != nil {
			return 0, fmt.Errorf("sparse: row %d: %w", r, err)
		}
		zz := float64(z)
		e := math.Exp(-math.Abs(zz))
		p := 1 / (1 + e)
		if zz < 0 {
			p = e / (1 + e)
		}
		// log(1+exp(-s·z)) with s = ±1, without overflow for large |z|.
		loss += math.Log1p(e) + max(0, -(2*y-1)*zz)
		d := float32(p - y)
		out := keys[lo:hi]
		out = out[:len(idx)]
		for k, i := range idx {
			out[k] = uint64(uint32(i))<<32 | uint64(math.Float32bits(d*val[k]))
		}
	}
	c.keys = keys
	c.maxIndex = maxIndex
	return loss, nil
}

// label01 maps an accepted label to 0 or 1.
func label01(y float32) (float64, error) {
	switch y {
	case 1:
		return 1, nil
	case 0, -1:
		return 0, nil
	}
	return 0, fmt.Errorf("label %v: want -1/+1 or 0/1", y)
}

// Evaluate adds the model's predictions on x to e.
func (m *LogReg) Evaluate(x CSR, labels []float32, e *Evaluator) error {
	if len(labels) != x.Rows() {
		return fmt.Errorf("sparse: batch has %d rows but %d labels", x.Rows(), len(labels))
	}
	dim := uint32(len(m.W))
	for r := 0; r < x.Rows(); r++ {
		row := x.Row(r)
		for _, i := range row.Indices {
			if uint32(i) >= dim {
				return fmt.Errorf("sparse: row %d: feature index %d is outside [0, %d)", r, i, dim)
			}
		}
		if err := e.Add(row.Dot(m.W), labels[r]); err != nil {
			return fmt.Errorf("sparse: row %d: %w", r, err)
		}
	}
	return nil
}
