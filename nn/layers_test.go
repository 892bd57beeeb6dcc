package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// project returns Σ w·y in float64: the scalar whose gradient Backward
// computes when given dy = w.
func project(w, y []float32) float64 {
	var s float64
	for i, v := range y {
		s += float64(w[i]) * float64(v)
	}
	return s
}

// spacedInputs returns n values with gaps of at least 0.05 between any two
// and none within 0.05 of zero, in random order, so that a finite-difference
// step of 1e-2 never crosses a ReLU kink or swaps a pooling maximum.
func spacedInputs(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i, p := range rng.Perm(n) {
		v := 0.05 * float32(p-n/2)
		if v >= 0 {
			v += 0.05
		}
		x[i] = v
	}
	return x
}

// spec builds the layer of a spec for inputs of shape in.
func spec(in Shape, s LayerSpec) func() layer {
	return func() layer {
		l, _, err := s.build(in)
		if err != nil {
			panic(err)
		}
		return l
	}
}

// layerCase is one case of TestLayerGradients.
type layerCase struct {
	name   string
	layer  func() layer
	spaced bool // inputs spaced for kinks
	sparse bool // a sparse output gradient
}

// moreLayerCases are TestLayerGradients's cases of the kinds whose tests
// live in their own files (batchnorm_test.go …), which append to it.
var moreLayerCases []layerCase

// TestLayerGradients checks every layer kind and option against central
// finite differences of Σ dy·Forward(x): all parameter gradients and all
// input gradients, and that with dx nil the parameter gradients are the
// same and added to what the buffer held. Forward is float32, so the step
// is 1e-2 (linear and piecewise linear layers are exact up to rounding;
// tanh's, sigmoid's and softmax's truncation errors are about 1e-5) and
// the tolerance 2e-3 absolute plus 2e-3 relative. Inputs of ReLU and max
// pooling are spaced 0.05 apart and away from 0, so no step crosses a kink
// or swaps a maximum. A layer a Sequential can run in chunks (chunker) is
// also run one example at a time as the model runs it, which must give
// the same outputs, bit for bit, and the same gradients. A case with a
// sparse output gradient (7 in 8 entries zero, as after a max-pooling)
// takes a convolution's listed path.
func TestLayerGradients(t *testing.T) {
	img := func(h, w, c int) Shape { return Shape{H: h, W: w, C: c} }
	vec := func(n int) Shape { return Shape{C: n} }
	cases := []layerCase{
		{"conv_2x6x5_to_3_k3_pad1", func() layer { return newConv2D(2, 6, 5, 3, 3, 1) }, false, false},
		{"conv_1x7x7_to_2_k5_pad2", func() layer { return newConv2D(1, 7, 7, 2, 5, 2) }, false, false},
		{"conv_3x6x6_to_5_k3_pad0", func() layer { return newConv2D(3, 6, 6, 5, 3, 0) }, false, false},
		{"conv_6x14x14_to_16_k5", func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, false},
		{"conv_6x14x14_to_16_k5_sparse_dy", func() layer { return newConv2D(6, 14, 14, 16, 5, 0) }, false, true},
		{"conv_2x6x5_to_3_k3_pad1_training", func() layer { c := newConv2D(2, 6, 5, 3, 3, 1); c.setTrain(true); return c }, false, false},
		{"conv_1x28x28_to_6_k5_pad2_training", func() layer { c := newConv2D(1, 28, 28, 6, 5, 2); c.setTrain(true); return c }, false, false},
		{"conv2d_k1_valid", spec(img(5, 4, 3), Conv2D{Filters: 2, Kernel: 1}), false, false},
		{"conv2d_k3_valid", spec(img(7, 6, 2), Conv2D{Filters: 3, Kernel: 3}), false, false},
		{"conv2d_k3_same", spec(img(6, 7, 2), Conv2D{Filters: 3, Kernel: 3, Padding: Same}), false, false},
		{"conv2d_k5_same", spec(img(8, 8, 1), Conv2D{Filters: 4, Kernel: 5, Padding: Same}), false, false},
		{"conv2d_k4_same_uneven_padding", spec(img(6, 5, 2), Conv2D{Filters: 2, Kernel: 4, Padding: Same}), false, false},
		{"conv2d_k1_stride2_valid", spec(img(7, 6, 2), Conv2D{Filters: 3, Kernel: 1, Strides: 2}), false, false},
		{"conv2d_k3_stride2_valid", spec(img(9, 8, 2), Conv2D{Filters: 3, Kernel: 3, Strides: 2}), false, false},
		{"conv2d_k3_stride2_same", spec(img(7, 7, 3), Conv2D{Filters: 2, Kernel: 3, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same", spec(img(10, 9, 1), Conv2D{Filters: 3, Kernel: 5, Strides: 2, Padding: Same}), false, false},
		{"conv2d_k5_stride2_same_many_taps_sparse_dy", spec(img(10, 10, 3), Conv2D{Filters: 4, Kernel: 5, Strides: 2, Padding: Same}), false, true},
		{"conv2d_k3_many_taps_sparse_dy", spec(img(9, 9, 8), Conv2D{Filters: 5, Kernel: 3, Padding: Same}), false, true},
		{"maxpool_2x4x4_s2", func() layer { return newMaxPool2D(2, 4, 4, 2) }, true, false},
		{"maxpool_1x5x5_s2_drops_edge", func() layer { return newMaxPool2D(1, 5, 5, 2) }, true, false},
		{"max_pooling2d_2_valid", spec(img(28, 28, 2), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_valid_odd", spec(img(7, 9, 2), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_valid_narrow", spec(img(6, 4, 3), MaxPooling2D{Size: 2}), true, false},
		{"max_pooling2d_2_same_odd", spec(img(5, 7, 2), MaxPooling2D{Size: 2, Padding: Same}), true, false},
		{"max_pooling2d_3_stride2_valid", spec(img(7, 8, 2), MaxPooling2D{Size: 3, Strides: 2}), true, false},
		{"max_pooling2d_3_stride1_same", spec(img(5, 6, 2), MaxPooling2D{Size: 3, Strides: 1, Padding: Same}), true, false},
		{"avgpool_2x4x6_s2", func() layer { return newAvgPool2D(2, 4, 6, 2) }, false, false},
		{"avgpool_1x6x6_s3", func() layer { return newAvgPool2D(1, 6, 6, 3) }, false, false},
		{"average_pooling2d_2_valid", spec(img(6, 8, 2), AveragePooling2D{Size: 2}), false, false},
		{"average_pooling2d_2_stride1_valid", spec(img(5, 5, 2), AveragePooling2D{Size: 2, Strides: 1}), false, false},
		{"average_pooling2d_3_stride2_same", spec(img(7, 6, 2), AveragePooling2D{Size: 3, Strides: 2, Padding: Same}), false, false},
		{"relu_10", func() layer { return newReLU(10) }, true, false},
		{"relu_37", spec(vec(37), Activation{"relu"}), true, false},
		{"tanh_10", func() layer { return newTanh(10) }, false, false},
		{"sigmoid_image", spec(img(3, 4, 2), Activation{"sigmoid"}), false, false},
		{"softmax_12", spec(vec(12), Activation{"softmax"}), false, false},
		{"linear_12", spec(vec(12), Activation{"linear"}), false, false},
		{"flatten_3x2x2", spec(img(3, 2, 2), Flatten{}), false, false},
		{"reshape_12_to_2x3x2", spec(vec(12), Reshape{To: Shape{H: 2, W: -1, C: 2}}), false, false},
		{"dropout_0.3_fixed_mask", func() layer {
			d := newDropout(20, 0.3)
			d.setTrain(true)
			d.setStep(dropoutKey(7, 3, 1, 2, 5), 4)
			return d
		}, false, false},
		{"dropout_evaluation", spec(vec(20), Dropout{Rate: 0.5}), false, false},
		{"dense_7_to_5", func() layer { return newDense(7, 5) }, false, false},
		{"dense_20_to_17", func() layer { return newDense(20, 17) }, false, false},
		{"dense_3_to_1", func() layer { return newDense(3, 1) }, false, false},
		{"dense_40_to_12_glorot", func() layer { d := newDense(40, 12); d.WeightInit = Glorot; return d }, false, false},
		{"dense_spec_9_to_4", spec(vec(9), Dense{Units: 4, Init: Torch}), false, false},
	}
	cases = append(cases, moreLayerCases...)
	const (
		n   = 3
		eps = 1e-2
		tol = 2e-3
	)
	for ci, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 7))
			l := tc.layer()
			params := make([]float32, l.NumParams())
			grads := make([]float32, l.NumParams())
			l.Bind(params, grads)
			l.Init(rng)
			for i := range params { // non-zero biases too
				params[i] += 0.1 * float32(rng.NormFloat64())
			}
			x := randSlice(rng, n*l.InSize())
			if tc.spaced {
				x = spacedInputs(rng, n*l.InSize())
			}
			w := randSlice(rng, n*l.OutSize())
			if tc.sparse {
				for i := range w {
					if rng.IntN(8) != 0 {
						w[i] = 0
					}
				}
			}
			y := make([]float32, n*l.OutSize())
			loss := func() float64 {
				l.Forward(y, x, n)
				return project(w, y)
			}
			loss()
			dx := make([]float32, len(x))
			for i := range dx {
				dx[i] = float32(math.NaN()) // must be overwritten
			}
			l.Backward(dx, w, x, y, n)
			check := func(what string, i int, v *float32, analytic float64) {
				t.Helper()
				old := *v
				*v = old + eps
				up := loss()
				*v = old - eps
				down := loss()
				*v = old
				num := (up - down) / (2 * eps)
				if math.Abs(num-analytic) > tol*(1+math.Abs(num)) {
					t.Errorf("%s[%d]: backward %.6g, finite difference %.6g", what, i, analytic, num)
				}
			}
			for i := range params {
				check("param grad", i, &params[i], float64(grads[i]))
			}
			for i := range x {
				check("input grad", i, &x[i], float64(dx[i]))
			}
			// With dx nil the parameter gradients are the same, and they are
			// added to what the buffer held.
			again := make([]float32, len(grads))
			for i := range again {
				again[i] = 1
			}
			l.Bind(params, again)
			l.Forward(y, x, n)
			l.Backward(nil, w, x, y, n)
			for i := range again {
				if want := 1 + float64(grads[i]); math.Abs(float64(again[i])-want) > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("param grad %d with dx=nil added to 1: %v, want %v", i, again[i], want)
				}
			}
			ch, ok := l.(chunker)
			if !ok {
				return
			}
			// One example at a time, as a Sequential runs its first layers
			// (training): the same outputs, and gradients to rounding.
			if c, ok := l.(*conv2D); ok {
				c.setTrain(true)
			}
			l.Forward(y, x, n)
			yc, dxc := make([]float32, len(y)), make([]float32, len(x))
			chunked := make([]float32, len(grads))
			l.Bind(params, chunked)
			in, out := l.InSize(), l.OutSize()
			for e := 0; e < n; e++ {
				ch.chunk(e, n)
				l.Forward(yc[e*out:], x[e*in:], 1)
			}
			for e := 0; e < n; e++ {
				ch.chunk(e, n)
				l.Backward(dxc[e*in:], w[e*out:], x[e*in:], yc[e*out:], 1)
			}
			ch.chunk(0, 0)
			for i := range y {
				if math.Float32bits(y[i]) != math.Float32bits(yc[i]) {
					t.Fatalf("output %d in chunks: %v, whole batch %v", i, yc[i], y[i])
				}
			}
			near := func(what string, a, b []float32) {
				t.Helper()
				for i := range a {
					if math.Abs(float64(a[i]-b[i])) > 1e-5*(1+math.Abs(float64(a[i]))) {
						t.Fatalf("%s %d in chunks: %v, whole batch %v", what, i, b[i], a[i])
					}
				}
			}
			near("param grad", grads, chunked)
			near("input grad", dx, dxc)
		})
	}
}

func TestLayerShapes(t *testing.T) {
	for _, tc := range []struct {
		l           layer
		in, out, np int
	}{
		{newConv2D(1, 28, 28, 6, 5, 2), 784, 6 * 28 * 28, 156},
		{newConv2D(6, 14, 14, 16, 5, 0), 6 * 14 * 14, 16 * 10 * 10, 2416},
		{newMaxPool2D(6, 28, 28, 2), 6 * 28 * 28, 6 * 14 * 14, 0},
		{newAvgPool2D(1, 5, 5, 2), 25, 4, 0},
		{newDense(400, 120), 400, 120, 48120},
	} {
		if tc.l.InSize() != tc.in || tc.l.OutSize() != tc.out || tc.l.NumParams() != tc.np {
			t.Errorf("%T: in %d out %d params %d, want %d %d %d", tc.l, tc.l.InSize(), tc.l.OutSize(), tc.l.NumParams(), tc.in, tc.out, tc.np)
		}
	}
}

// TestSoftmaxCrossEntropy checks the loss against a direct float64
// evaluation, the gradient against finite differences, and stability for
// logits far beyond float32 exp's range.
func TestSoftmaxCrossEntropy(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n, k = 4, 10
	z := randSlice(rng, n*k)
	labels := []int32{0, 9, 3, 3}
	d := make([]float32, n*k)
	loss, _ := SoftmaxCrossEntropy(z, labels, n, k, d, 1)
	var want float64
	for e := 0; e < n; e++ {
		var s float64
		for j := 0; j < k; j++ {
			s += math.Exp(float64(z[e*k+j]))
		}
		want += -math.Log(math.Exp(float64(z[e*k+int(labels[e])])) / s)
	}
	if math.Abs(loss-want) > 1e-9*want {
		t.Fatalf("loss %v, want %v", loss, want)
	}
	const eps = 1e-2
	for i := range z {
		old := z[i]
		z[i] = old + eps
		up, _ := SoftmaxCrossEntropy(z, labels, n, k, nil, 1)
		z[i] = old - eps
		down, _ := SoftmaxCrossEntropy(z, labels, n, k, nil, 1)
		z[i] = old
		if num := (up - down) / (2 * eps); math.Abs(num-float64(d[i])) > 1e-4 {
			t.Errorf("dlogit %d: %v, finite difference %v", i, d[i], num)
		}
	}
	big := []float32{1e4, -1e4, 0, 3e4}
	l, c := SoftmaxCrossEntropy(big, []int32{0, 0}, 2, 2, d[:4], 0.5)
	if math.IsNaN(l) || math.IsInf(l, 0) || math.Abs(l-(0+3e4)) > 1e-6 || c != 1 {
		t.Fatalf("large logits: loss %v correct %d, want 30000 and 1", l, c)
	}
	for _, g := range d[:4] {
		if math.IsNaN(float64(g)) {
			t.Fatalf("large logits: NaN gradient %v", d[:4])
		}
	}
}

func TestBinaryLogistic(t *testing.T) {
	z := []float32{0.3, -1.2, 2.5, 0, 40, -40, 800}
	for _, labels := range [][]float32{{1, -1, -1, 1, 1, 1, -1}, {1, 0, 0, 1, 1, 1, 0}} {
		t.Run(fmt.Sprint(labels), func(t *testing.T) {
			n := len(z)
			dz := make([]float32, n)
			loss, correct := BinaryLogistic(z, labels, n, dz, 1)
			var want float64
			wantCorrect := 0
			for i := range z {
				y := 1.0
				if labels[i] <= 0 {
					y = -1
				}
				m := y * float64(z[i])
				if m > 0 {
					wantCorrect++
				}
				if m > -30 {
					want += math.Log(1 + math.Exp(-m))
				} else {
					want += -m // log(1+e^-m) = -m + log(1+e^m), e^m negligible
				}
			}
			if math.Abs(loss-want) > 1e-9*want || correct != wantCorrect {
				t.Fatalf("loss %v correct %d, want %v %d", loss, correct, want, wantCorrect)
			}
			const eps = 1e-3
			for i := range z[:5] {
				old := z[i]
				z[i] = old + eps
				up, _ := BinaryLogistic(z, labels, n, nil, 1)
				z[i] = old - eps
				down, _ := BinaryLogistic(z, labels, n, nil, 1)
				z[i] = old
				if num := (up - down) / (2 * eps); math.Abs(num-float64(dz[i])) > 1e-4 {
					t.Errorf("dz %d: %v, finite difference %v", i, dz[i], num)
				}
			}
			for i, g := range dz {
				if math.IsNaN(float64(g)) || math.Abs(float64(g)) > 1 {
					t.Errorf("dz %d = %v for z = %v", i, g, z[i])
				}
			}
		})
	}
}

// TestConvPoolReLUMatchesLayers: the fused layer computes what conv2D,
// 2×2 MaxPool2D and ReLU compute in turn, output bit for bit and
// gradients up to the order of summation. (A finite-difference check of
// the fused layer alone would cross pooling and ReLU kinks at almost every
// parameter, which moves all outputs; the layers it matches are checked
// in TestLayerGradients and LeNet as a whole in TestModelGradients.)
func TestConvPoolReLUMatchesLayers(t *testing.T) {
	for _, train := range []bool{false, true} {
		for _, sh := range [][6]int{{1, 28, 28, 6, 5, 2}, {6, 14, 14, 16, 5, 0}, {2, 8, 10, 7, 3, 1}} {
			t.Run(fmt.Sprintf("%v_train_%v", sh, train), func(t *testing.T) {
				const n = 4
				rng := rand.New(rand.NewPCG(uint64(sh[0]*100+sh[1]), 3))
				conv := newConv2D(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5])
				fused := newConvPoolReLU(newConv2D(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]))
				pool := newMaxPool2D(conv.OutC, conv.OutH, conv.OutW, 2)
				relu := newReLU(pool.OutSize())
				params := randSlice(rng, conv.NumParams())
				g1, g2 := make([]float32, len(params)), make([]float32, len(params))
				conv.Bind(params, g1)
				fused.Bind(params, g2)
				conv.setTrain(train)
				fused.setTrain(train)
				x := randSlice(rng, n*conv.InSize())
				y1, y2, y3 := make([]float32, n*conv.OutSize()), make([]float32, n*pool.OutSize()), make([]float32, n*relu.OutSize())
				conv.Forward(y1, x, n)
				pool.Forward(y2, y1, n)
				relu.Forward(y3, y2, n)
				yf := make([]float32, n*fused.OutSize())
				fused.Forward(yf, x, n)
				for i := range y3 {
					if math.Float32bits(y3[i]) != math.Float32bits(yf[i]) {
						t.Fatalf("output %d: fused %v, layers %v", i, yf[i], y3[i])
					}
				}
				dy := randSlice(rng, len(y3))
				d2, d1 := make([]float32, len(y2)), make([]float32, len(y1))
				dx1, dx2 := make([]float32, len(x)), make([]float32, len(x))
				relu.Backward(d2, dy, y2, y3, n)
				pool.Backward(d1, d2, y1, y2, n)
				conv.Backward(dx1, d1, x, y1, n)
				fused.Backward(dx2, dy, x, yf, n)
				near := func(what string, a, b []float32) {
					t.Helper()
					for i := range a {
						if math.Abs(float64(a[i]-b[i])) > 1e-5*(1+math.Abs(float64(a[i]))) {
							t.Fatalf("%s %d: fused %v, layers %v", what, i, b[i], a[i])
						}
					}
				}
				near("param grad", g1, g2)
				near("input grad", dx1, dx2)
			})
		}
	}
}
