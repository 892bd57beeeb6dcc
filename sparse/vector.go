package sparse

import (
	"fmt"
	"math"
)

// Vector is a sparse vector of float32.
//
// Invariant: len(Indices) == len(Values); Indices are strictly increasing
// (sorted and unique) and non-negative; every value is finite. Explicit zeros
// are allowed: a coalesced gradient may sum to zero at a touched index. A
// Vector does not carry its dimension; Validate(dim) also checks that every
// index is below dim.
type Vector struct {
	Indices []int32
	Values  []float32
}

// Len returns the number of stored (index, value) pairs.
func (v Vector) Len() int { return len(v.Indices) }

// Validate reports the first violation of the Vector invariant for a vector
// of dimension dim, or nil.
func (v Vector) Validate(dim int) error {
	if len(v.Indices) != len(v.Values) {
		return fmt.Errorf("sparse: vector has %d indices but %d values", len(v.Indices), len(v.Values))
	}
	prev := int64(-1)
	for k, i := range v.Indices {
		if i < 0 || int64(i) >= int64(dim) {
			return fmt.Errorf("sparse: index %d at position %d is outside [0, %d)", i, k, dim)
		}
		if int64(i) <= prev {
			return fmt.Errorf("sparse: index %d at position %d does not follow %d: indices must be strictly increasing", i, k, prev)
		}
		prev = int64(i)
		if f := float64(v.Values[k]); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("sparse: value %v at index %d (position %d) is not finite", v.Values[k], i, k)
		}
	}
	return nil
}

// Dot returns the dot product of v with the dense vector w. It panics if an
// index of v is outside w.
func (v Vector) Dot(w []float32) float32 {
	var s float32
	for k, i := range v.Indices {
		s += w[i] * v.Values[k]
	}
	return s
}

// AddScaledTo adds alpha·v to the dense vector dst, touching only v's
// indices. It panics if an index of v is outside dst.
func (v Vector) AddScaledTo(dst []float32, alpha float32) {
	vals := v.Values[:len(v.Indices)]
	for k, i := range v.Indices {
		dst[i] += alpha * vals[k]
	}
}

// ToDense writes v into dst, which it zeroes first (O(len(dst))).
func (v Vector) ToDense(dst []float32) {
	clear(dst)
	for k, i := range v.Indices {
		dst[i] = v.Values[k]
	}
}

// FromDense sets v to the non-zero entries of d, reusing v's storage. It is
// O(len(d)): the dense exchange's way back to a sparse update.
func (v *Vector) FromDense(d []float32) {
	v.Indices, v.Values = v.Indices[:0], v.Values[:0]
	for i, x := range d {
		if x != 0 {
			v.Indices = append(v.Indices, int32(i))
			v.Values = append(v.Values, x)
		}
	}
}

// CopyFrom makes v a deep copy of src, reusing v's storage.
func (v *Vector) CopyFrom(src Vector) {
	v.Indices = append(v.Indices[:0], src.Indices...)
	v.Values = append(v.Values[:0], src.Values...)
}

// CSR is a batch of sparse rows in compressed-sparse-row form: row r is
// Indices[RowPtr[r]:RowPtr[r+1]] with Values alongside. It has the same
// layout as data.Batch's sparse fields, so a batch converts without copying.
//
// Invariant: len(RowPtr) == rows+1, RowPtr[0] == 0, RowPtr non-decreasing,
// RowPtr[rows] == len(Indices) == len(Values). Indices within a row need not
// be sorted; duplicates within a row are summed by whoever consumes them.
type CSR struct {
	RowPtr  []int32
	Indices []int32
	Values  []float32
}

// Rows returns the number of rows.
func (m CSR) Rows() int {
	if len(m.RowPtr) == 0 {
		return 0
	}
	return len(m.RowPtr) - 1
}

// Row returns row r as a view (not a copy, and not necessarily sorted).
func (m CSR) Row(r int) Vector {
	lo, hi := m.RowPtr[r], m.RowPtr[r+1]
	return Vector{Indices: m.Indices[lo:hi], Values: m.Values[lo:hi]}
}

// Reset empties m, keeping its storage.
func (m *CSR) Reset() {
	m.RowPtr = append(m.RowPtr[:0], 0)
	m.Indices = m.Indices[:0]
	m.Values = m.Values[:0]
}

// AppendRow adds a row; it copies idx and val.
func (m *CSR) AppendRow(idx []int32, val []float32) {
	if len(idx) != len(val) {
		panic(fmt.Sprintf("sparse: AppendRow with %d indices and %d values", len(idx), len(val)))
	}
	if len(m.RowPtr) == 0 {
		m.RowPtr = append(m.RowPtr, 0)
	}
	m.Indices = append(m.Indices, idx...)
	m.Values = append(m.Values, val...)
	m.RowPtr = append(m.RowPtr, int32(len(m.Indices)))
}

// Validate reports the first violation of the CSR invariant, an index
// outside [0, dim) or a non-finite value, naming the row.
func (m CSR) Validate(dim int) error {
	if len(m.RowPtr) == 0 {
		if len(m.Indices) != 0 || len(m.Values) != 0 {
			return fmt.Errorf("sparse: CSR has no RowPtr but %d indices", len(m.Indices))
		}
		return nil
	}
	if m.RowPtr[0] != 0 {
		return fmt.Errorf("sparse: CSR RowPtr[0] = %d, want 0", m.RowPtr[0])
	}
	if len(m.Indices) != len(m.Values) {
		return fmt.Errorf("sparse: CSR has %d indices but %d values", len(m.Indices), len(m.Values))
	}
	if last := m.RowPtr[len(m.RowPtr)-1]; int(last) != len(m.Indices) {
		return fmt.Errorf("sparse: CSR RowPtr ends at %d but there are %d indices", last, len(m.Indices))
	}
	for r := 0; r < m.Rows(); r++ {
		lo, hi := m.RowPtr[r], m.RowPtr[r+1]
		if hi < lo {
			return fmt.Errorf("sparse: CSR RowPtr decreases at row %d (%d -> %d)", r, lo, hi)
		}
		for k := lo; k < hi; k++ {
			i := m.Indices[k]
			if i < 0 || int64(i) >= int64(dim) {
				return fmt.Errorf("sparse: row %d: index %d is outside [0, %d)", r, i, dim)
			}
			if f := float64(m.Values[k]); math.IsNaN(f) || math.IsInf(f, 0) {
				return fmt.Errorf("sparse: row %d: value %v at index %d is not finite", r, m.Values[k], i)
			}
		}
	}
	return nil
}
