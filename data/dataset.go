package data

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Dataset is an in-memory, randomly addressable set of examples; the fast
// Pipeline shuffles and shards indices into it and copies the chosen rows
// straight into a reused Batch.
type Dataset interface {
	// Len is the number of examples.
	Len() int
	// Dim is the dense feature width, or 0 for a sparse dataset.
	Dim() int
	// Append appends example i (0 <= i < Len()) to b as its next row: a
	// row of X and a label for a dense dataset, a CSR row for a sparse one.
	Append(b *Batch, i int)
}

// reset empties b for a new batch of up to size examples of width dim
// (0: sparse), keeping its memory.
func (b *Batch) reset(dim, size int, sparse bool) {
	b.Size, b.Dim = 0, dim
	b.X = slices.Grow(b.X[:0], dim*size)
	b.Labels = slices.Grow(b.Labels[:0], size)
	b.Indices, b.Values = b.Indices[:0], b.Values[:0]
	b.RowPtr = b.RowPtr[:0]
	if sparse {
		b.RowPtr = append(slices.Grow(b.RowPtr, size+1), 0)
	}
}

// appendDense appends one dense row.
func (b *Batch) appendDense(x []float32, label float32) {
	b.X = append(b.X, x...)
	b.Labels = append(b.Labels, label)
	b.Size++
}

// appendSparse appends one CSR row.
func (b *Batch) appendSparse(idx []int32, val []float32, label float32) {
	if len(b.RowPtr) == 0 {
		b.RowPtr = append(b.RowPtr, 0)
	}
	b.Indices = append(b.Indices, idx...)
	b.Values = append(b.Values, val...)
	b.RowPtr = append(b.RowPtr, int32(len(b.Indices)))
	b.Labels = append(b.Labels, label)
	b.Size++
}

// DenseSet is an in-memory dense Dataset: example i is
// X[i*Dim:(i+1)*Dim] with label Labels[i].
type DenseSet struct {
	dim    int
	x      []float32
	labels []float32
}

// NewDenseSet checks that x holds len(labels) rows of dim features and
// wraps them (without copying) as a Dataset.
func NewDenseSet(x []float32, labels []float32, dim int) (*DenseSet, error) {
	if dim <= 0 {
		return nil, fmt.Errorf("dense dataset: feature width %d: want > 0", dim)
	}
	if len(x) != dim*len(labels) {
		return nil, fmt.Errorf("dense dataset: %d values for %d labels of width %d: want %d", len(x), len(labels), dim, dim*len(labels))
	}
	return &DenseSet{dim: dim, x: x, labels: labels}, nil
}

func (s *DenseSet) Len() int { return len(s.labels) }
func (s *DenseSet) Dim() int { return s.dim }
func (s *DenseSet) Append(b *Batch, i int) {
	b.appendDense(s.x[i*s.dim:(i+1)*s.dim], s.labels[i])
}

// SparseSet is an in-memory sparse Dataset in CSR form: example i has
// indices Indices[RowPtr[i]:RowPtr[i+1]] (sorted, unique) and the matching
// values, and label Labels[i].
type SparseSet struct {
	rowPtr  []int
	indices []int32
	values  []float32
	labels  []float32
}

// NewSparseSet checks the CSR arrays (row pointers non-decreasing from 0 to
// len(indices), indices sorted and unique within each row, one label per
// row) and wraps them without copying.
func NewSparseSet(rowPtr []int, indices []int32, values []float32, labels []float32) (*SparseSet, error) {
	if len(rowPtr) != len(labels)+1 || rowPtr[0] != 0 || rowPtr[len(rowPtr)-1] != len(indices) || len(values) != len(indices) {
		return nil, fmt.Errorf("sparse dataset: %d row pointers, %d labels, %d indices, %d values: want len(rowPtr) = labels+1, rowPtr from 0 to len(indices), one value per index", len(rowPtr), len(labels), len(indices), len(values))
	}
	for r := range labels {
		lo, hi := rowPtr[r], rowPtr[r+1]
		if hi < lo {
			return nil, fmt.Errorf("sparse dataset: row pointers decrease at row %d (%d > %d)", r, lo, hi)
		}
		for k := lo + 1; k < hi; k++ {
			if indices[k] <= indices[k-1] {
				return nil, fmt.Errorf("sparse dataset: row %d: indices not sorted and unique (%d after %d)", r, indices[k], indices[k-1])
			}
		}
	}
	return &SparseSet{rowPtr: rowPtr, indices: indices, values: values, labels: labels}, nil
}

func (s *SparseSet) Len() int { return len(s.labels) }
func (s *SparseSet) Dim() int { return 0 }
func (s *SparseSet) Append(b *Batch, i int) {
	lo, hi := s.rowPtr[i], s.rowPtr[i+1]
	b.appendSparse(s.indices[lo:hi], s.values[lo:hi], s.labels[i])
}

// appendRows appends the examples rows to b, as Append of each in turn.
// A shuffled batch's rows lie scattered over the whole set (tens of MB),
// so each row costs a handful of cache misses (its row pointers, label,
// indices and values); copied one row at a time those misses are paid one
// after another. Two passes of independent loads touch every row first, so
// the misses of the whole batch overlap, and the copies then hit the cache.
func (s *SparseSet) appendRows(b *Batch, rows []int32) {
	var isum int
	var fsum float32
	for _, i := range rows {
		isum += s.rowPtr[i+1]
		fsum += s.labels[i]
	}
	for _, i := range rows {
		lo, hi := s.rowPtr[i], s.rowPtr[i+1]
		// One load per 64-byte line of the row (16 four-byte entries),
		// and its last entry, which may start another line.
		for k := lo; k < hi; k += 16 {
			isum += int(s.indices[k])
			fsum += s.values[k]
		}
		if lo < hi {
			isum += int(s.indices[hi-1])
			fsum += s.values[hi-1]
		}
	}
	keepLoads(isum, fsum)
	for _, i := range rows {
		lo, hi := s.rowPtr[i], s.rowPtr[i+1]
		b.appendSparse(s.indices[lo:hi], s.values[lo:hi], s.labels[i])
	}
}

// keepLoads takes the sums of appendRows' touching loads so the compiler
// cannot drop the loads as dead code.
//
//go:noinline
func keepLoads(int, float32) {}

// Collect reads src to its end into memory: a DenseSet if its examples are
// dense (all of one width), a SparseSet if sparse. An empty source gives an
// empty SparseSet.
func Collect(ctx context.Context, src Source) (Dataset, error) {
	var (
		dim     = -1 // unknown until the first example
		x       []float32
		labels  []float32
		rowPtr  = []int{0}
		indices []int32
		values  []float32
	)
	for n := 0; ; n++ {
		ex, err := src.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		d := len(ex.Features)
		if ex.Features == nil {
			d = 0
		}
		if dim == -1 {
			dim = d
		}
		if d != dim {
			return nil, fmt.Errorf("example %d has %d dense features, earlier examples %d: a source must be all dense of one width or all sparse", n, d, dim)
		}
		labels = append(labels, ex.Label)
		if dim > 0 {
			x = append(x, ex.Features...)
			continue
		}
		if err := checkSparse(ex); err != nil {
			return nil, fmt.Errorf("example %d: %w", n, err)
		}
		indices = append(indices, ex.Indices...)
		values = append(values, ex.Values...)
		rowPtr = append(rowPtr, len(indices))
	}
	if dim > 0 {
		return NewDenseSet(x, labels, dim)
	}
	return &SparseSet{rowPtr: rowPtr, indices: indices, values: values, labels: labels}, nil
}

// checkSparse checks a sparse example's invariant: one value per index,
// indices sorted, unique and non-negative.
func checkSparse(ex Example) error {
	if len(ex.Indices) != len(ex.Values) {
		return fmt.Errorf("sparse example has %d indices but %d values", len(ex.Indices), len(ex.Values))
	}
	for k, i := range ex.Indices {
		if i < 0 || (k > 0 && i <= ex.Indices[k-1]) {
			return fmt.Errorf("sparse example: index %d at position %d: indices must be non-negative, sorted and unique", i, k)
		}
	}
	return nil
}

// lookup sets row[j] = lut[src[j]]. It is the pipeline's inner loop (784
// pixels per MNIST example); unrolling by 8 over fixed-size windows lets
// the compiler drop bounds checks and loop overhead (BENCHMARKS.md,
// "Figures behind the code": the pixel lookup).
func lookup(row []float32, src []uint8, lut *[256]float32) {
	src = src[:len(row)]
	for len(src) >= 8 {
		r, p := row[:8:8], src[:8:8]
		r[0], r[1], r[2], r[3] = lut[p[0]], lut[p[1]], lut[p[2]], lut[p[3]]
		r[4], r[5], r[6], r[7] = lut[p[4]], lut[p[5]], lut[p[6]], lut[p[7]]
		row, src = row[8:], src[8:]
	}
	for j, p := range src {
		row[j] = lut[p]
	}
}
