package nn

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// BenchmarkGemm compares gemmNN with gonum's blas32.Gemm on LeNet's
// shapes (the reason this package has its own kernels; see doc.go).
func BenchmarkGemm(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, sh := range []struct {
		name    string
		m, n, k int
	}{
		{"conv1_fwd_6x784x25", 6, 784, 25},
		{"conv2_fwd_16x100x150", 16, 100, 150},
		{"conv2_dx_150x100x16", 150, 100, 16},
		{"fc1_dw_120x400x32", 120, 400, 32},
	} {
		a := randSlice(rng, sh.m*sh.k)
		bb := randSlice(rng, sh.k*sh.n)
		c := make([]float32, sh.m*sh.n)
		flops := float64(2 * sh.m * sh.n * sh.k)
		b.Run(fmt.Sprintf("%s/nn", sh.name), func(b *testing.B) {
			for b.Loop() {
				gemmNN(sh.m, sh.n, sh.k, a, sh.k, bb, sh.n, c, sh.n, false)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		b.Run(fmt.Sprintf("%s/gonum", sh.name), func(b *testing.B) {
			A := blas32.General{Rows: sh.m, Cols: sh.k, Stride: sh.k, Data: a}
			B := blas32.General{Rows: sh.k, Cols: sh.n, Stride: sh.n, Data: bb}
			C := blas32.General{Rows: sh.m, Cols: sh.n, Stride: sh.n, Data: c}
			for b.Loop() {
				blas32.Gemm(blas.NoTrans, blas.NoTrans, 1, A, B, 0, C)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
