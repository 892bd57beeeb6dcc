package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestLayerGradients's cases of this kind (see layerCase).
func init() {
	moreLayerCases = append(moreLayerCases, []layerCase{
		{"depthwise_conv2d_k3_valid", 340, spec(imageShape(5, 6, 3), DepthwiseConv2D{Kernel: 3}), false, false},
		{"depthwise_conv2d_k3_same_multiplier2", 341, spec(imageShape(5, 4, 2), DepthwiseConv2D{Kernel: 3, Multiplier: 2, Padding: Same}), false, false},
		{"depthwise_conv2d_k3_stride2_same_no_bias", 342, spec(imageShape(7, 6, 2), DepthwiseConv2D{Kernel: 3, Strides: 2, Padding: Same, NoBias: true}), false, false},
		{"depthwise_conv2d_k2x3_stride1x2_dilation2x1_same", 343, spec(imageShape(7, 8, 2), DepthwiseConv2D{Kernel: 2, KernelW: 3, StridesW: 2, Dilation: 2, DilationW: 1, Padding: Same, Multiplier: 3}), false, false},
		{"depthwise_conv2d_k3_dilation2_valid", 344, spec(imageShape(6, 7, 1), DepthwiseConv2D{Kernel: 3, Dilation: 2}), false, false},
		{"depthwise_conv2d_k8_same_many_taps_sparse_dy", 345, spec(imageShape(9, 10, 2), DepthwiseConv2D{Kernel: 8, Padding: Same, Multiplier: 2}), false, true},
		{"depthwise_conv2d_k3_stride2_valid_no_bias_sparse_dy", 346, spec(imageShape(9, 8, 3), DepthwiseConv2D{Kernel: 3, Strides: 2, NoBias: true}), false, true},
	}...)
}

// TestDepthwiseMatchesGroupedConv: output channel c·M+m of DepthwiseConv2D
// is input channel c convolved with its own kernel, as PyTorch's
// Conv2d(groups=C) computes it: directConv of that channel alone.
func TestDepthwiseMatchesGroupedConv(t *testing.T) {
	for _, tc := range []struct {
		in Shape
		d  DepthwiseConv2D
	}{
		{imageShape(6, 7, 3), DepthwiseConv2D{Kernel: 3, Padding: Same}},
		{imageShape(6, 7, 2), DepthwiseConv2D{Kernel: 3, Multiplier: 2, Strides: 2, Padding: Same, NoBias: true}},
		{imageShape(9, 8, 2), DepthwiseConv2D{Kernel: 2, KernelW: 3, Dilation: 3, DilationW: 2, StridesW: 2, Multiplier: 3}},
	} {
		t.Run(fmt.Sprintf("%+v", tc.d), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(13, 14))
			l, out, err := tc.d.build(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			params := randSlice(rng, l.NumParams())
			l.Bind(params, make([]float32, len(params)))
			x := randSlice(rng, tc.in.Size())
			y := make([]float32, out.Size())
			l.Forward(y, x, 1)
			m := max(tc.d.Multiplier, 1)
			k := tc.d.conv().kernel()
			t2 := k.kh * k.kw
			nw := tc.in.C * m * t2
			one := Shape{H: tc.in.H, W: tc.in.W, C: 1}
			for c := 0; c < tc.in.C; c++ {
				var b []float32
				if !tc.d.NoBias {
					b = params[nw+c*m : nw+(c+1)*m]
				}
				want, ws := directConv(x[c*one.Size():(c+1)*one.Size()], params[c*m*t2:(c+1)*m*t2], b, one, m, k, tc.d.Padding == Same)
				if ws.H != out.H || ws.W != out.W || out.C != tc.in.C*m {
					t.Fatalf("output %v, want %v×%v×%d", out, ws.H, ws.W, tc.in.C*m)
				}
				for i, v := range want {
					if got := y[c*m*ws.H*ws.W+i]; math.Abs(float64(got-v)) > 1e-5*(1+math.Abs(float64(v))) {
						t.Fatalf("channel %d output %d: %v, want %v", c, i, got, v)
					}
				}
			}
		})
	}
}
