package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Activation applies Fn: "relu", "tanh", "sigmoid", "linear" or one of
// the functions of pointwiseFns (elu, selu, gelu, swish …) element by
// element, or "softmax" over a vector. As a model's last layer, softmax
// and sigmoid choose its loss (see NewSequential).
type Activation struct{ Fn string }

func (a Activation) kind() string { return "activation " + a.Fn }

// activationJSON is Activation's JSON.
type activationJSON struct {
	Type string `json:"type"`
	Fn   string `json:"fn"`
}

func init() {
	register("activation", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j activationJSON) (LayerSpec, error) { return Activation{Fn: j.Fn}, nil })
	})
}

func (a Activation) encode() (any, error) { return activationJSON{Type: "activation", Fn: a.Fn}, nil }

// activations are the functions Activation takes.
var activations = append([]string{"relu", "tanh", "sigmoid", "softmax", "linear"}, pointwiseFns...)

func (a Activation) build(in Shape) (layer, Shape, error) {
	switch a.Fn {
	case "relu", "tanh", "sigmoid":
	case "softmax":
		if !in.vector() {
			return nil, Shape{}, fmt.Errorf("softmax takes a vector, the input is %v: Flatten it first", in)
		}
	case "linear":
		return &reshape{Size: in.Size()}, in, nil
	case "elu":
		return &pointwise{Size: in.Size(), Fn: a.Fn, Alpha: 1}, in, nil
	case "selu", "gelu", "gelu_tanh", "swish", "softplus", "softsign", "hard_sigmoid", "hard_sigmoid_tf":
		return &pointwise{Size: in.Size(), Fn: a.Fn}, in, nil
	default:
		return nil, Shape{}, fmt.Errorf("unknown function %q: want one of %s", a.Fn, strings.Join(activations, ", "))
	}
	return &activation{Size: in.Size(), Fn: a.Fn}, in, nil
}

// posMask is all ones if the float32 with bits b is > 0 (not NaN), else 0.
func posMask(b uint32) uint32 {
	i := int32(b)
	return uint32(-i>>31) & ^uint32(i>>31)
}

// activation applies Fn to Size floats per example: "relu", "tanh" or
// "sigmoid" element-wise, or "softmax" over the example's Size floats.
// (A linear activation is the identity, which a Sequential runs as a
// view.)
type activation struct {
	Size int
	Fn   string
}

// newReLU returns max(x, 0); newTanh returns tanh(x).
func newReLU(size int) *activation { return &activation{Size: size, Fn: "relu"} }
func newTanh(size int) *activation { return &activation{Size: size, Fn: "tanh"} }

func (l *activation) chunk(_, _ int)      {}
func (l *activation) reads() (x, y bool)  { return false, true }
func (l *activation) InSize() int         { return l.Size }
func (l *activation) OutSize() int        { return l.Size }
func (l *activation) NumParams() int      { return 0 }
func (l *activation) Bind(_, _ []float32) {}
func (l *activation) Init(_ *rand.Rand)   {}

func (l *activation) Forward(y, x []float32, n int) {
	x, y = x[:n*l.Size], y[:n*l.Size]
	switch l.Fn {
	case "tanh":
		for i, v := range x {
			y[i] = float32(math.Tanh(float64(v)))
		}
	case "sigmoid":
		for i, v := range x {
			y[i] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	case "softmax":
		for e := 0; e < n; e++ {
			softmax(y[e*l.Size:(e+1)*l.Size], x[e*l.Size:(e+1)*l.Size])
		}
	default: // relu
		i := 0
		if useAsm {
			i = len(x) &^ 7
			if i > 0 {
				reluFwd8(i, &x[0], &y[0])
			}
		}
		for ; i < len(x); i++ {
			y[i] = max(x[i], 0)
		}
	}
}

// softmax writes y = exp(x − max x) / Σ exp(x − max x), summed in float64.
func softmax(y, x []float32) {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - m))
	}
	for i, v := range x {
		y[i] = float32(math.Exp(float64(v-m)) / sum)
	}
}

func (l *activation) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil {
		return
	}
	dx, dy, y = dx[:n*l.Size], dy[:n*l.Size], y[:n*l.Size]
	switch l.Fn {
	case "tanh":
		for i, v := range y {
			dx[i] = dy[i] * (1 - v*v)
		}
	case "sigmoid":
		for i, v := range y {
			dx[i] = dy[i] * v * (1 - v)
		}
	case "softmax":
		// dx = y ⊙ (dy − Σ dy·y), the Jacobian of softmax applied to dy.
		for e := 0; e < n; e++ {
			ye, de, xe := y[e*l.Size:(e+1)*l.Size], dy[e*l.Size:(e+1)*l.Size], dx[e*l.Size:(e+1)*l.Size]
			var dot float64
			for i, v := range ye {
				dot += float64(v) * float64(de[i])
			}
			for i, v := range ye {
				xe[i] = v * float32(float64(de[i])-dot)
			}
		}
	default: // relu
		// dx = dy where y > 0, else 0, by masking bits: the sign of y is
		// random, so a branch would be mispredicted half the time.
		i := 0
		if useAsm {
			i = len(y) &^ 7
			if i > 0 {
				reluBwd8(i, &dy[0], &y[0], &dx[0])
			}
		}
		for ; i < len(y); i++ {
			dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & posMask(math.Float32bits(y[i])))
		}
	}
}
