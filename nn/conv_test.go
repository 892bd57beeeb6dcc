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
		{"conv_2x6x5_to_3_k3_pad1", 0, func() layer { return newConv2D(2, 6, 5, 3, 3, 1) }, false, false},
		{"conv_1x7x7_to_2_k5_pad2", 1, func() layer { return newConv2D(1, 7, 7, 2, 5, 2) }, false, false},
		{"conv_3x6x6_to_5_k3_pad0", 2, func() layer { return newConv2D(3, 6, 6, 5, 3, 0) }, false, false},
		{"conv_6x14x14_to_16_k5", 3, func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, false},
		{"conv_6x14x14_to_16_k5_sparse_dy", 4, func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, true},
		{"conv_2x6x5_to_3_k3_pad1_training", 5, func() layer { c := newConv2D(2, 6, 5, 3, 3, 1); c.setTrain(true); return c }, false, false},
		{"conv_1x28x28_to_6_k5_pad2_training", 6, func() layer { c := newConv2D(1, 28, 28, 6, 5, 2); c.setTrain(true); return c }, false, false},
		{"conv2d_k1_valid", 7, spec(imageShape(5, 4, 3), Conv2D{Filters: 2, Kernel: 1}), false, false},
		{"conv2d_k3_valid", 8, spec(imageShape(7, 6, 2), Conv2D{Filters: 3, Kernel: 3}), false, false},
		{"conv2d_k3_same", 9, spec(imageShape(6, 7, 2), Conv2D{Filters: 3, Kernel: 3, Padding: Same}), false, false},
		{"conv2d_k5_same", 10, spec(imageShape(8, 8, 1), Conv2D{Filters: 4, Kernel: 5, Padding: Same}), false, false},
		{"conv2d_k4_same_uneven_padding", 11, spec(imageShape(6, 5, 2), Conv2D{Filters: 2, Kernel: 4, Padding: Same}), false, false},
		{"conv2d_k1_stride2_valid", 12, spec(imageShape(7, 6, 2), Conv2D{Filters: 3, Kernel: 1, Strides: 2}), false, false},
		{"conv2d_k3_stride2_valid", 13, spec(imageShape(9, 8, 2), Conv2D{Filters: 3, Kernel: 3, Strides: 2}), false, false},
		{"conv2d_k3_stride2_same", 14, spec(imageShape(7, 7, 3), Conv2D{Filters: 2, Kernel: 3, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same", 15, spec(imageShape(10, 9, 1), Conv2D{Filters: 3, Kernel: 5, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same_many_taps_sparse_dy", 16, spec(imageShape(10, 10, 3), Conv2D{Filters: 4, Kernel: 5, Strides: 2, Padding: Same}), false, true},
		{"conv2d_k3_many_taps_sparse_dy", 17, spec(imageShape(9, 9, 8), Conv2D{Filters: 5, Kernel: 3, Padding: Same}), false, true},
		{"conv2d_no_bias", 200, spec(imageShape(6, 7, 2), Conv2D{Filters: 3, Kernel: 3, Padding: Same, NoBias: true}), false, false},
		{"conv2d_no_bias_many_taps_sparse_dy", 201, spec(imageShape(9, 9, 8), Conv2D{Filters: 5, Kernel: 3, NoBias: true}), false, true},
		{"conv2d_k2x3_valid", 202, spec(imageShape(6, 7, 2), Conv2D{Filters: 3, Kernel: 2, KernelW: 3}), false, false},
		{"conv2d_k3x1_same", 203, spec(imageShape(5, 6, 2), Conv2D{Filters: 2, Kernel: 3, KernelW: 1, Padding: Same}), false, false},
		{"conv2d_k1x4_same_stride1x2", 204, spec(imageShape(5, 9, 2), Conv2D{Filters: 2, Kernel: 1, KernelW: 4, StridesW: 2, Padding: Same}), false, false},
		{"conv2d_k3_stride2x1_valid", 205, spec(imageShape(9, 6, 2), Conv2D{Filters: 3, Kernel: 3, Strides: 2, StridesW: 1}), false, false},
		{"conv2d_k3x5_many_taps_sparse_dy", 206, spec(imageShape(9, 10, 6), Conv2D{Filters: 4, Kernel: 3, KernelW: 5, Padding: Same}), false, true},
		{"conv2d_k3_dilation2_valid", 207, spec(imageShape(8, 9, 2), Conv2D{Filters: 3, Kernel: 3, Dilation: 2}), false, false},
		{"conv2d_k3_dilation2_same", 208, spec(imageShape(7, 8, 2), Conv2D{Filters: 2, Kernel: 3, Dilation: 2, Padding: Same}), false, false},
		{"conv2d_k2_dilation3x2_same_stride2", 209, spec(imageShape(9, 8, 2), Conv2D{Filters: 2, Kernel: 2, Strides: 2, Dilation: 3, DilationW: 2, Padding: Same}), false, false},
		{"conv2d_k3_dilation2_many_taps_sparse_dy_no_bias", 210, spec(imageShape(10, 10, 8), Conv2D{Filters: 3, Kernel: 3, Dilation: 2, Padding: Same, NoBias: true}), false, true},
		{"conv2d_k3_dilation2_training", 211, func() layer {
			l, _, _ := Conv2D{Filters: 3, Kernel: 3, Dilation: 2, KernelW: 2, Padding: Same}.build(imageShape(7, 6, 2))
			l.(*conv2D).setTrain(true)
			return l
		}, false, false},
	}...)
}

// directConv is a convolution computed from its definition, for
// TestConv2DOptionsMatchDirect: output (o, oy, ox) is the bias plus the
// sum over taps of w[o, ci, ky, kx]·x[ci, oy·sh+ky·dh−pt, ox·sw+kx·dw−pl],
// with TensorFlow's same padding worked out here, apart from window().
func directConv(x, w, b []float32, in Shape, filters int, k kernel2D, same bool) ([]float32, Shape) {
	rh, rw := (k.kh-1)*k.dh+1, (k.kw-1)*k.dw+1
	oh, ow, pt, pl := (in.H-rh)/k.sh+1, (in.W-rw)/k.sw+1, 0, 0
	if same {
		oh, ow = (in.H+k.sh-1)/k.sh, (in.W+k.sw-1)/k.sw
		pt, pl = max((oh-1)*k.sh+rh-in.H, 0)/2, max((ow-1)*k.sw+rw-in.W, 0)/2
	}
	y := make([]float32, filters*oh*ow)
	for o := 0; o < filters; o++ {
		for oy := 0; oy < oh; oy++ {
			for ox := 0; ox < ow; ox++ {
				s := float64(0)
				if b != nil {
					s = float64(b[o])
				}
				for ci := 0; ci < in.C; ci++ {
					for ky := 0; ky < k.kh; ky++ {
						for kx := 0; kx < k.kw; kx++ {
							iy, ix := oy*k.sh+ky*k.dh-pt, ox*k.sw+kx*k.dw-pl
							if iy < 0 || ix < 0 || iy >= in.H || ix >= in.W {
								continue
							}
							s += float64(w[((o*in.C+ci)*k.kh+ky)*k.kw+kx]) * float64(x[(ci*in.H+iy)*in.W+ix])
						}
					}
				}
				y[(o*oh+oy)*ow+ox] = float32(s)
			}
		}
	}
	return y, Shape{H: oh, W: ow, C: filters}
}

// TestConv2DOptionsMatchDirect: a convolution with each option (non-square
// kernels and strides, dilation, no bias, same padding) computes its
// definition, to rounding; the gradient checks only show that Backward
// is Forward's.
func TestConv2DOptionsMatchDirect(t *testing.T) {
	for _, tc := range []struct {
		in Shape
		c  Conv2D
	}{
		{imageShape(7, 8, 2), Conv2D{Filters: 3, Kernel: 3}},
		{imageShape(7, 8, 2), Conv2D{Filters: 3, Kernel: 3, Dilation: 2}},
		{imageShape(7, 8, 2), Conv2D{Filters: 3, Kernel: 3, Dilation: 2, Padding: Same}},
		{imageShape(9, 8, 3), Conv2D{Filters: 2, Kernel: 2, Strides: 2, Dilation: 3, DilationW: 2, Padding: Same}},
		{imageShape(6, 9, 2), Conv2D{Filters: 4, Kernel: 2, KernelW: 5, StridesW: 3, Padding: Same}},
		{imageShape(10, 6, 2), Conv2D{Filters: 2, Kernel: 4, KernelW: 1, Strides: 3, StridesW: 1}},
		{imageShape(8, 8, 8), Conv2D{Filters: 5, Kernel: 3, Padding: Same, NoBias: true}},
		{imageShape(8, 8, 8), Conv2D{Filters: 5, Kernel: 3, KernelW: 2, Dilation: 2, DilationW: 3, Padding: Same, NoBias: true}},
	} {
		t.Run(fmt.Sprintf("%+v", tc.c), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			l, out, err := tc.c.build(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			params := randSlice(rng, l.NumParams())
			l.Bind(params, make([]float32, len(params)))
			const n = 2
			x := randSlice(rng, n*tc.in.Size())
			y := make([]float32, n*out.Size())
			l.Forward(y, x, n)
			k := tc.c.kernel()
			nw := tc.c.Filters * tc.in.C * k.kh * k.kw
			var b []float32
			if !tc.c.NoBias {
				b = params[nw:]
			} else if len(params) != nw {
				t.Fatalf("%d parameters without a bias, want %d", len(params), nw)
			}
			for e := 0; e < n; e++ {
				want, ws := directConv(x[e*tc.in.Size():], params[:nw], b, tc.in, tc.c.Filters, k, tc.c.Padding == Same)
				if ws != out {
					t.Fatalf("output %v, want %v", out, ws)
				}
				for i, v := range want {
					if got := y[e*out.Size()+i]; math.Abs(float64(got-v)) > 1e-5*(1+math.Abs(float64(v))) {
						t.Fatalf("example %d output %d: %v, want %v", e, i, got, v)
					}
				}
			}
		})
	}
}
