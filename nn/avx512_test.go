package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withoutAVX512 runs f on the AVX2 kernels only.
func withoutAVX512(f func()) {
	defer func(v bool) { useAVX512 = v }(useAVX512)
	useAVX512 = false
	f()
}

// TestAVX512SameBits: the 64-column AVX-512 kernels (kernNN6x64,
// kernConv6x64, kernConv4x64) and gemmNN's panels give the very bits of
// the AVX2 kernels, which is what lets LeNet-5 run on them with its golden
// file unchanged.
func TestAVX512SameBits(t *testing.T) {
	if !useAsm || !useAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	same := func(t *testing.T, what string, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s %d: AVX-512 %v, AVX2 %v", what, i, a[i], b[i])
			}
		}
	}
	for _, sh := range [][3]int{{6, 64, 5}, {13, 200, 70}, {64, 640, 288}, {128, 2100, 64}, {10, 784, 33}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, acc := range []bool{false, true} {
			t.Run(fmt.Sprintf("gemmNN_m%d_n%d_k%d_acc%v", m, n, k, acc), func(t *testing.T) {
				a, b, c := randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, m*n)
				c2 := append([]float32(nil), c...)
				gemmNN(m, n, k, a, k, b, n, c, n, acc)
				withoutAVX512(func() { gemmNNAsm(m, n, k, a, k, b, n, c2, n, acc) })
				same(t, "C", c, c2)
			})
		}
	}
	for _, sh := range [][6]int{{1, 28, 28, 6, 5, 2}, {6, 14, 14, 16, 5, 0}, {32, 26, 26, 64, 3, 0}, {3, 20, 30, 10, 3, 1}} {
		t.Run(fmt.Sprintf("conv_%v", sh), func(t *testing.T) {
			const n = 2
			l := newConv2D(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5])
			params := randSlice(rng, l.NumParams())
			l.Bind(params, make([]float32, len(params)))
			x := randSlice(rng, n*l.InSize())
			y, y2 := make([]float32, n*l.OutSize()), make([]float32, n*l.OutSize())
			l.Forward(y, x, n)
			withoutAVX512(func() { l.Forward(y2, x, n) })
			same(t, "y", y, y2)
		})
	}
}
