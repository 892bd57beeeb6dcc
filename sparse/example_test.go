package sparse_test

import (
	"fmt"

	"github.com/meshtrain/meshtrain/sparse"
)

// One synchronous step among two peers: each computes the gradient sum of
// its own examples, the sums are all-gathered (here: a slice in rank order)
// and merged, and every peer applies the same update.
func ExampleCoalescer_MergeGradients() {
	const dim = 8
	x0 := sparse.CSR{RowPtr: []int32{0, 2}, Indices: []int32{0, 3}, Values: []float32{1, 1}}
	x1 := sparse.CSR{RowPtr: []int32{0, 2}, Indices: []int32{0, 5}, Values: []float32{1, 1}}
	m, _ := sparse.NewLogReg(dim)
	var g0, g1, g sparse.Vector
	m.GradientSum(x0, []float32{1}, &g0)  // peer 0: one positive
	m.GradientSum(x1, []float32{-1}, &g1) // peer 1: one negative
	var c sparse.Coalescer
	if err := c.MergeGradients(&g, []sparse.Vector{g0, g1}, dim, 2); err != nil {
		panic(err)
	}
	fmt.Println(g.Indices, g.Values)
	// 2 pairs of 8 bytes beat a 32-byte dense gradient; 5 pairs would not.
	fmt.Println(sparse.ChooseExchange(sparse.ExchangeAuto, g0.Len(), dim, 2, sparse.RawPairBytes))
	fmt.Println(sparse.ChooseExchange(sparse.ExchangeAuto, 5, dim, 2, sparse.RawPairBytes))
	// Output:
	// [0 3 5] [0 -0.25 0.25]
	// sparse
	// dense
}
