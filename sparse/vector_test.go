package sparse

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestVectorValidate(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name string
		v    Vector
		dim  int
		want string // substring of the error; "" for valid
	}{
		{"empty", Vector{}, 10, ""},
		{"valid", Vector{[]int32{0, 3, 9}, []float32{1, 0, -2}}, 10, ""},
		{"length mismatch", Vector{[]int32{0, 3}, []float32{1}}, 10, "2 indices but 1 values"},
		{"unsorted", Vector{[]int32{3, 1}, []float32{1, 1}}, 10, "strictly increasing"},
		{"duplicate", Vector{[]int32{3, 3}, []float32{1, 1}}, 10, "strictly increasing"},
		{"negative", Vector{[]int32{-1}, []float32{1}}, 10, "outside [0, 10)"},
		{"too large", Vector{[]int32{10}, []float32{1}}, 10, "outside [0, 10)"},
		{"nan", Vector{[]int32{2}, []float32{nan}}, 10, "not finite"},
		{"inf", Vector{[]int32{2}, []float32{inf}}, 10, "not finite"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.v.Validate(tc.dim)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want error containing %q", err, tc.want)
			}
		})
	}
}

// randomVector returns a valid vector over dim with about density·dim pairs.
func randomVector(r *rand.Rand, dim int, density float64) Vector {
	var v Vector
	for i := 0; i < dim; i++ {
		if r.Float64() < density {
			v.Indices = append(v.Indices, int32(i))
			v.Values = append(v.Values, float32(r.NormFloat64()))
		}
	}
	return v
}

func TestDotAddScaledDenseRoundTripMatchDense(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		dim := 1 + r.IntN(300)
		v := randomVector(r, dim, r.Float64())
		if err := v.Validate(dim); err != nil {
			t.Fatal(err)
		}
		dense := make([]float32, dim)
		v.ToDense(dense)
		w := make([]float32, dim)
		for i := range w {
			w[i] = float32(r.NormFloat64())
		}
		var want float64
		for i := range dense {
			want += float64(dense[i]) * float64(w[i])
		}
		if got := float64(v.Dot(w)); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
			t.Fatalf("trial %d: Dot = %v, dense = %v", trial, got, want)
		}
		alpha := float32(r.NormFloat64())
		got := append([]float32(nil), w...)
		v.AddScaledTo(got, alpha)
		for i := range w {
			if want := w[i] + alpha*dense[i]; got[i] != want {
				t.Fatalf("trial %d: AddScaledTo[%d] = %v, want %v", trial, i, got[i], want)
			}
		}
		var back Vector
		back.FromDense(dense)
		// FromDense drops explicit zeros; compare through dense form.
		dense2 := make([]float32, dim)
		back.ToDense(dense2)
		for i := range dense {
			if dense[i] != dense2[i] {
				t.Fatalf("trial %d: FromDense∘ToDense differs at %d", trial, i)
			}
		}
	}
}

func TestCoalesceMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var c Coalescer
	var reused Vector
	for trial := 0; trial < 300; trial++ {
		// Dimensions from tiny to 2^31-1 exercise 0..3 radix passes; sizes
		// straddle the insertion-sort cutoff.
		dims := []int{1, 7, 1000, 1 << 20, 33762578, math.MaxInt32}
		dim := dims[trial%len(dims)]
		n := r.IntN(3 * insertionCutoff)
		if trial%5 == 0 {
			n = r.IntN(5000)
		}
		// Draw from a small pool so duplicates are common.
		pool := make([]int32, 1+r.IntN(n+1))
		for k := range pool {
			pool[k] = int32(r.Int64N(int64(dim)))
		}
		idx := make([]int32, n)
		val := make([]float32, n)
		want := map[int32]float64{}
		for k := range idx {
			idx[k] = pool[r.IntN(len(pool))]
			val[k] = float32(r.NormFloat64())
			want[idx[k]] += float64(val[k])
		}
		var fresh Vector
		var c2 Coalescer
		c2.Coalesce(&fresh, idx, val)
		c.Coalesce(&reused, idx, val)
		for _, got := range []Vector{fresh, reused} {
			if err := got.Validate(dim); err != nil {
				t.Fatalf("trial %d: coalesced vector invalid: %v", trial, err)
			}
			if got.Len() != len(want) {
				t.Fatalf("trial %d: %d unique indices, want %d", trial, got.Len(), len(want))
			}
			for k, i := range got.Indices {
				if w := float32(want[i]); got.Values[k] != w {
					t.Fatalf("trial %d: sum at %d = %v, want %v", trial, i, got.Values[k], w)
				}
			}
		}
	}
}

func TestCoalesceSumsInOrderOfAppearance(t *testing.T) {
	// 1e8 + 1 - 1e8 is 1 in order but 0 if the 1 is added last in float32;
	// in float64 any order gives 1, so check the float64 accumulation too.
	var c Coalescer
	var v Vector
	c.Coalesce(&v, []int32{5, 5, 5}, []float32{1e8, 1, -1e8})
	if v.Len() != 1 || v.Values[0] != 1 {
		t.Fatalf("got %+v, want index 5 value 1", v)
	}
}

func TestCSRValidate(t *testing.T) {
	good := CSR{RowPtr: []int32{0, 2, 2, 3}, Indices: []int32{4, 1, 0}, Values: []float32{1, 1, 2}}
	for _, tc := range []struct {
		name string
		m    CSR
		want string
	}{
		{"valid", good, ""},
		{"empty", CSR{}, ""},
		{"bad start", CSR{RowPtr: []int32{1, 1}}, "RowPtr[0]"},
		{"bad end", CSR{RowPtr: []int32{0, 2}, Indices: []int32{1}, Values: []float32{1}}, "ends at 2"},
		{"decreasing", CSR{RowPtr: []int32{0, 2, 1, 2}, Indices: []int32{1, 2}, Values: []float32{1, 1}}, "decreases at row 1"},
		{"index", CSR{RowPtr: []int32{0, 1, 2}, Indices: []int32{1, 9}, Values: []float32{1, 1}}, "row 1: index 9"},
		{"nan", CSR{RowPtr: []int32{0, 1}, Indices: []int32{1}, Values: []float32{float32(math.NaN())}}, "row 0: value NaN"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.m.Validate(5)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want error containing %q", err, tc.want)
			}
		})
	}
	var m CSR
	m.AppendRow([]int32{4, 1}, []float32{1, 1})
	m.AppendRow(nil, nil)
	m.AppendRow([]int32{0}, []float32{2})
	if m.Rows() != 3 || m.Row(2).Indices[0] != 0 || m.Validate(5) != nil {
		t.Fatalf("AppendRow built %+v", m)
	}
	m.Reset()
	if m.Rows() != 0 || len(m.Indices) != 0 {
		t.Fatalf("Reset left %+v", m)
	}
}
