package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
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
	seed   uint64 // of the case's random parameters and inputs
	layer  func() layer
	spaced bool // inputs spaced for kinks
	sparse bool // a sparse output gradient
}

// moreLayerCases are TestLayerGradients's cases: each kind's test file
// (conv_test.go, batchnorm_test.go …) appends its own.
var moreLayerCases []layerCase

// imageShape and vectorShape are the shapes of the cases' inputs.
func imageShape(h, w, c int) Shape { return Shape{H: h, W: w, C: c} }
func vectorShape(n int) Shape      { return Shape{C: n} }

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
	cases := slices.Clone(moreLayerCases)

	const (
		n   = 3
		eps = 1e-2
		tol = 2e-3
	)
	slices.SortFunc(cases, func(a, b layerCase) int { return strings.Compare(a.name, b.name) })
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(tc.seed, 7))
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
