package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withGo runs f on the portable Go loops instead of the assembly kernels.
func withGo(f func()) {
	defer func(v bool) { useAsm = v }(useAsm)
	useAsm = false
	f()
}

// TestKernelsMatchGo: the assembly paths of the grid convolutions, the
// fused pooling and the momentum step compute what the Go loops compute,
// up to FMA rounding (the optimizer bit for bit).
func TestKernelsMatchGo(t *testing.T) {
	if !useAsm {
		t.Skip("no assembly kernels on this CPU")
	}
	shapes := [][6]int{{1, 28, 28, 6, 5, 2}, {6, 14, 14, 16, 5, 0}, {2, 8, 10, 7, 3, 1}, {3, 9, 7, 5, 3, 0}, {1, 6, 6, 2, 1, 0},
		// 3×3 over 16, 32 and 48 channels: fused, the channels-last
		// backward pass on AVX-512 (conv_hwc.go); the Keras CNN's conv2.
		{16, 10, 10, 5, 3, 0}, {32, 12, 10, 7, 3, 1}, {48, 8, 8, 4, 3, 0}, {32, 26, 26, 64, 3, 0}}
	for _, sh := range shapes {
		for _, fused := range []bool{false, true} {
			if fused && (sh[1]+2*sh[5]-sh[4]+1)%2 != 0 {
				continue
			}
			t.Run(fmt.Sprintf("%v_fused_%v", sh, fused), func(t *testing.T) {
				const n = 3
				rng := rand.New(rand.NewPCG(uint64(sh[0]*31+sh[3]), 5))
				build := func() (layer, []float32) {
					c := newConv2D(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5])
					c.setTrain(true)
					if fused {
						return newConvPoolReLU(c), nil
					}
					return c, nil
				}
				la, _ := build()
				lg, _ := build()
				params := randSlice(rng, la.NumParams())
				ga, gg := make([]float32, len(params)), make([]float32, len(params))
				la.Bind(params, ga)
				lg.Bind(params, gg)
				x := randSlice(rng, n*la.InSize())
				dy := randSlice(rng, n*la.OutSize())
				run := func(l layer) (y, dx []float32) {
					y, dx = make([]float32, n*l.OutSize()), make([]float32, len(x))
					l.Forward(y, x, n)
					l.Backward(dx, dy, x, y, n)
					return y, dx
				}
				ya, dxa := run(la)
				var yg, dxg []float32
				withGo(func() { yg, dxg = run(lg) })
				// Gradients are float32 sums of up to thousands of terms
				// of size ~0.3, in different orders: absolute 1e-4 covers
				// their rounding.
				for what, p := range map[string][2][]float32{"output": {yg, ya}, "input grad": {dxg, dxa}, "param grad": {gg, ga}} {
					for i := range p[0] {
						if d := math.Abs(float64(p[0][i] - p[1][i])); d > 1e-4+1e-5*math.Abs(float64(p[0][i])) {
							t.Fatalf("%s %d: asm %v, Go %v", what, i, p[1][i], p[0][i])
						}
					}
				}
			})
		}
	}
	t.Run("sgd_momentum", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(3, 4))
		const n = 1003
		p, g := randSlice(rng, n), randSlice(rng, n)
		step := func() []float32 {
			o, err := NewOptimizer(SGD, OptimizerConfig{LR: 0.05, Momentum: 0.9, WeightDecay: 1e-4, Params: n})
			if err != nil {
				t.Fatal(err)
			}
			q := append([]float32(nil), p...)
			for range 3 {
				o.Step(q, g)
			}
			return q
		}
		a := step()
		var b []float32
		withGo(func() { b = step() })
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("param %d: asm %v, Go %v", i, a[i], b[i])
			}
		}
	})
}
