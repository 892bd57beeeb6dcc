package nn

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerGradients's cases of Conv1D: each padding, a stride, a
// dilation, no bias, a kernel of one step.
func init() {
	seq := func(l, c int) Shape { return imageShape(1, l, c) }
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"conv1d_valid", 360, spec(seq(9, 3), Conv1D{Filters: 4, Kernel: 3}), false, false},
		{"conv1d_same_stride2", 361, spec(seq(10, 2), Conv1D{Filters: 3, Kernel: 4, Strides: 2, Padding: Same}), false, false},
		{"conv1d_causal_dilated", 362, spec(seq(8, 2), Conv1D{Filters: 3, Kernel: 3, Dilation: 2, Padding: Causal}), false, false},
		{"conv1d_same_dilated_no_bias", 363, spec(seq(7, 3), Conv1D{Filters: 2, Kernel: 2, Dilation: 3, Padding: Same, NoBias: true}), false, false},
		{"conv1d_pointwise", 364, spec(seq(5, 4), Conv1D{Filters: 3, Kernel: 1}), false, false},
		{"conv1d_causal_stride3", 365, spec(seq(10, 1), Conv1D{Filters: 2, Kernel: 2, Strides: 3, Padding: Causal, Init: Torch}), false, false},
	}...)
}

// TestConv1DDirect: the output is the convolution written out as a sum
// over taps, with Keras's output lengths for each padding.
func TestConv1DDirect(t *testing.T) {
	for _, tc := range []struct {
		spec    Conv1D
		l, c    int
		wantOut int
	}{
		{Conv1D{Filters: 2, Kernel: 3}, 9, 2, 7},
		{Conv1D{Filters: 2, Kernel: 4, Strides: 2, Padding: Same}, 9, 2, 5},
		{Conv1D{Filters: 3, Kernel: 3, Dilation: 2, Padding: Causal}, 8, 2, 8},
		{Conv1D{Filters: 1, Kernel: 3, Dilation: 2, Strides: 2}, 11, 1, 4},
		{Conv1D{Filters: 2, Kernel: 5, Dilation: 2, Padding: Same, NoBias: true}, 6, 3, 6},
	} {
		l, out, err := tc.spec.build(imageShape(1, tc.l, tc.c))
		if err != nil {
			t.Fatal(err)
		}
		if out != imageShape(1, tc.wantOut, tc.spec.Filters) {
			t.Fatalf("%+v over %d steps: output %v, want %d steps", tc.spec, tc.l, out, tc.wantOut)
		}
		c := l.(*conv1D)
		rng := rand.New(rand.NewPCG(1, 2))
		params := randSlice(rng, c.NumParams())
		c.Bind(params, make([]float32, len(params)))
		const n = 2
		x := randSlice(rng, n*c.InSize())
		y := make([]float32, n*c.OutSize())
		c.Forward(y, x, n)
		// Keras's padding before: same pads ⌊total/2⌋, causal the span − 1.
		span := (c.K-1)*c.D + 1
		before := 0
		switch tc.spec.Padding {
		case Same:
			before = max((tc.wantOut-1)*c.S+span-tc.l, 0) / 2
		case Causal:
			before = span - 1
		}
		for e := 0; e < n; e++ {
			for f := 0; f < c.F; f++ {
				for o := 0; o < c.Out; o++ {
					var want float64
					if c.Bias {
						want = float64(params[c.F*c.C*c.K+f])
					}
					for ch := 0; ch < c.C; ch++ {
						for k := 0; k < c.K; k++ {
							if p := o*c.S + k*c.D - before; p >= 0 && p < c.L {
								want += float64(params[(f*c.C+ch)*c.K+k]) * float64(x[e*c.InSize()+ch*c.L+p])
							}
						}
					}
					if got := y[e*c.OutSize()+f*c.Out+o]; math.Abs(float64(got)-want) > 1e-5 {
						t.Fatalf("%+v: example %d filter %d step %d: %v, want %v", tc.spec, e, f, o, got, want)
					}
				}
			}
		}
	}
}
