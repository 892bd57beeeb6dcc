package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestConvFullGrad: the input gradient as a full correlation (fullGrad,
// which Graph uses for convolutions that batch normalizations take)
// equals the product path's to rounding, and the weight and bias
// gradients, read from its shifted dyg, too; kernels square or not, even
// or odd, padded evenly, unevenly or not at all. So do the three passes
// by Winograd (useWino) where they apply: 3×3, same, at least 8 input
// channels, even sides; the other cases check that they do not.
func TestConvFullGrad(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Shape
		spec Conv2D
		wino bool
	}{
		{"k3_same_16ch", imageShape(8, 8, 16), Conv2D{Filters: 16, Kernel: 3, Padding: Same, NoBias: true}, true},
		{"k3_same_9ch_bias", imageShape(6, 10, 9), Conv2D{Filters: 7, Kernel: 3, Padding: Same}, true},
		{"k3_same_8ch_odd_side", imageShape(6, 5, 8), Conv2D{Filters: 4, Kernel: 3, Padding: Same}, false},
		{"k3_same_stride2", imageShape(8, 8, 8), Conv2D{Filters: 4, Kernel: 3, Strides: 2, Padding: Same}, false},
		{"k3_same_7ch", imageShape(8, 8, 7), Conv2D{Filters: 4, Kernel: 3, Padding: Same}, false},
		{"k3_same_odd", imageShape(7, 9, 3), Conv2D{Filters: 5, Kernel: 3, Padding: Same}, false},
		{"k3_valid", imageShape(9, 8, 2), Conv2D{Filters: 3, Kernel: 3}, false},
		{"k4_same_uneven", imageShape(6, 5, 2), Conv2D{Filters: 2, Kernel: 4, Padding: Same}, false},
		{"k2x3_same", imageShape(6, 7, 3), Conv2D{Filters: 7, Kernel: 2, KernelW: 3, Padding: Same}, false},
		{"k1", imageShape(5, 4, 3), Conv2D{Filters: 2, Kernel: 1}, false},
		{"k5_same_wide", imageShape(4, 11, 1), Conv2D{Filters: 4, Kernel: 5, Padding: Same}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(len(tc.name))))
			var ls [3]*conv2D
			var grads, dxs, ys [3][]float32
			var params []float32
			const n = 3
			x := make([]float32, n*tc.in.Size())
			for i := range x {
				x[i] = r.Float32()*2 - 1
			}
			var dy []float32
			for k := range ls {
				l, _, err := tc.spec.build(tc.in)
				if err != nil {
					t.Fatal(err)
				}
				c := l.(*conv2D)
				c.sparse = false
				if k == 1 && !c.phased {
					c.useFull()
					if c.full == nil {
						t.Fatal("useFull left the convolution as it was")
					}
				}
				if k == 2 && c.useWino() != tc.wino {
					t.Fatalf("useWino: %v, want %v", !tc.wino, tc.wino)
				}
				if k == 0 {
					params = make([]float32, c.NumParams())
					for i := range params {
						params[i] = r.Float32()*2 - 1
					}
					dy = make([]float32, n*c.OutSize())
					for i := range dy {
						dy[i] = r.Float32()*2 - 1
					}
				}
				grads[k] = make([]float32, c.NumParams())
				c.Bind(params, grads[k])
				dxs[k] = make([]float32, len(x))
				ys[k] = make([]float32, n*c.OutSize())
				c.setTrain(true)
				c.Forward(ys[k], x, n)
				c.Backward(dxs[k], dy, x, ys[k], n)
				ls[k] = c
			}
			near := func(what string, a, b []float32) {
				for i := range a {
					if d := math.Abs(float64(a[i] - b[i])); d > 1e-5*(1+math.Abs(float64(a[i]))) {
						t.Fatalf("%s[%d]: full %v, product %v", what, i, b[i], a[i])
					}
				}
			}
			for k := 1; k < len(ls); k++ {
				near("y", ys[0], ys[k])
				near("dx", dxs[0], dxs[k])
				near("grads", grads[0], grads[k])
			}
		})
	}
}
