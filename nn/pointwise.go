package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// The element-wise functions beyond relu, tanh and sigmoid, as
// Activation's Fn names them, computed as Keras 3 computes them
// (keras/src/activations/activations.py) in float64 per value:
//
//	elu           x > 0 ? x : eˣ − 1 (α = 1)
//	selu          1.0507009873554805 · (x > 0 ? x : 1.6732632423543772 · (eˣ − 1))
//	gelu          x·Φ(x) = ½x(1 + erf(x/√2)), Keras's default (approximate=False)
//	gelu_tanh     ½x(1 + tanh(√(2/π)(x + 0.044715x³))), the approximation
//	              (Keras's approximate=True, TF.js's gelu_new)
//	swish         x·σ(x) (Keras's silu is the same function)
//	softplus      log(1 + eˣ)
//	softsign      x / (1 + |x|)
//	hard_sigmoid  clip(x/6 + ½, 0, 1) = relu6(x + 3)/6: Keras 3's and
//	              PyTorch's Hardsigmoid
//	hard_sigmoid_tf  clip(0.2x + ½, 0, 1): tf.keras 2's and TensorFlow.js's,
//	              which Keras 3 replaced (package nn/keras picks by the
//	              file's Keras version)
//
// LeakyReLU and ELU are layers of their own, with their α.
var pointwiseFns = []string{"elu", "selu", "gelu", "gelu_tanh", "swish", "softplus", "softsign", "hard_sigmoid", "hard_sigmoid_tf"}

// SELU's constants (Klambauer et al., as Keras writes them).
const (
	seluAlpha = 1.6732632423543772848170429916717
	seluScale = 1.0507009873554804934193349852946
)

// pointwise applies Fn to each of Size floats per example; Alpha is
// leaky_relu's slope and elu's α. Backward reads x (and not y).
type pointwise struct {
	Size  int
	Fn    string
	Alpha float64
}

func (l *pointwise) InSize() int         { return l.Size }
func (l *pointwise) OutSize() int        { return l.Size }
func (l *pointwise) NumParams() int      { return 0 }
func (l *pointwise) Bind(_, _ []float32) {}
func (l *pointwise) Init(_ *rand.Rand)   {}
func (l *pointwise) reads() (x, y bool)  { return true, false }

// f returns the function at v and its derivative there.
func (l *pointwise) f(v float64) (y, dy float64) {
	switch l.Fn {
	case "leaky_relu":
		if v > 0 {
			return v, 1
		}
		return l.Alpha * v, l.Alpha
	case "elu", "selu":
		a, s := l.Alpha, 1.0
		if l.Fn == "selu" {
			a, s = seluAlpha, seluScale
		}
		if v > 0 {
			return s * v, s
		}
		e := math.Exp(v)
		return s * a * (e - 1), s * a * e
	case "gelu":
		cdf := 0.5 * (1 + math.Erf(v/math.Sqrt2))
		return v * cdf, cdf + v*math.Exp(-v*v/2)/math.Sqrt(2*math.Pi)
	case "gelu_tanh":
		const c, k = 0.7978845608028654, 0.044715 // √(2/π)
		t := math.Tanh(c * (v + k*v*v*v))
		return 0.5 * v * (1 + t), 0.5*(1+t) + 0.5*v*(1-t*t)*c*(1+3*k*v*v)
	case "swish":
		s := sigmoid64(v)
		return v * s, s + v*s*(1-s)
	case "softplus":
		return max(v, 0) + math.Log1p(math.Exp(-math.Abs(v))), sigmoid64(v)
	case "softsign":
		d := 1 + math.Abs(v)
		return v / d, 1 / (d * d)
	case "hard_sigmoid", "hard_sigmoid_tf":
		slope, half := 1.0/6, 3.0
		if l.Fn == "hard_sigmoid_tf" {
			slope, half = 0.2, 2.5
		}
		switch {
		case v <= -half:
			return 0, 0
		case v >= half:
			return 1, 0
		}
		return slope*v + 0.5, slope
	}
	panic("nn: pointwise function " + l.Fn)
}

// sigmoid64 is 1/(1 + e⁻ˣ) without overflow.
func sigmoid64(v float64) float64 {
	if v >= 0 {
		return 1 / (1 + math.Exp(-v))
	}
	e := math.Exp(v)
	return e / (1 + e)
}

func (l *pointwise) Forward(y, x []float32, n int) {
	for i, v := range x[:n*l.Size] {
		f, _ := l.f(float64(v))
		y[i] = float32(f)
	}
}

func (l *pointwise) Backward(dx, dy, x, _ []float32, n int) {
	if dx == nil {
		return
	}
	for i, v := range x[:n*l.Size] {
		_, d := l.f(float64(v))
		dx[i] = float32(d * float64(dy[i]))
	}
}

// LeakyReLU is x for x > 0 and Alpha·x below (Keras's LeakyReLU, whose
// alpha, negative_slope in Keras 3, is 0.3 by default; PyTorch's
// LeakyReLU). It has no parameters.
type LeakyReLU struct{ Alpha float64 }

// ELU is x for x > 0 and Alpha·(eˣ − 1) below (Keras's ELU layer, alpha
// 1 by default; PyTorch's ELU). It has no parameters.
type ELU struct{ Alpha float64 }

func (LeakyReLU) kind() string { return "leaky_relu" }
func (ELU) kind() string       { return "elu" }

// alphaJSON is LeakyReLU's and ELU's JSON.
type alphaJSON struct {
	Type  string  `json:"type"`
	Alpha float64 `json:"alpha"`
}

func init() {
	register("leaky_relu", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j alphaJSON) (LayerSpec, error) { return LeakyReLU{Alpha: j.Alpha}, nil })
	})
	register("elu", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j alphaJSON) (LayerSpec, error) { return ELU{Alpha: j.Alpha}, nil })
	})
}

func (r LeakyReLU) encode() (any, error) { return alphaJSON{Type: r.kind(), Alpha: r.Alpha}, nil }
func (e ELU) encode() (any, error)       { return alphaJSON{Type: e.kind(), Alpha: e.Alpha}, nil }

func (r LeakyReLU) build(in Shape) (layer, Shape, error) {
	return buildAlpha(in, "leaky_relu", r.Alpha)
}
func (e ELU) build(in Shape) (layer, Shape, error) { return buildAlpha(in, "elu", e.Alpha) }

func buildAlpha(in Shape, fn string, alpha float64) (layer, Shape, error) {
	if math.IsNaN(alpha) || math.IsInf(alpha, 0) {
		return nil, Shape{}, fmt.Errorf("alpha %v: want a finite number", alpha)
	}
	return &pointwise{Size: in.Size(), Fn: fn, Alpha: alpha}, in, nil
}
