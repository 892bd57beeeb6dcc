package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// Rescaling computes x·Scale + Offset, element by element, as Keras's
// layer of that name does (Rescaling(1/255) turns pixels into [0, 1]).
// Its kind is "rescaling": a model whose first layer is one takes raw
// values. It has no tensors.
type Rescaling struct{ Scale, Offset float64 }

// Normalization computes (x − mean)/max(√variance, 1e-7) per channel,
// the channel being an image's last axis (C) or a vector's element, as
// Keras's Normalization with axis −1 computes it, with the mean and
// variance stored in the spec (Keras's mean and variance options): one
// value for every channel or one per channel. With Invert it computes
// the inverse, mean + x·max(√variance, 1e-7). Its kind is
// "normalization": a model whose first layer is one takes raw values. It
// has no tensors (Keras's adapted mean and variance are given here as
// options, not learned).
type Normalization struct {
	Mean, Variance []float64
	Invert         bool
}

// normEpsilon is Keras's backend.epsilon(), the floor of the standard
// deviation Normalization divides by.
const normEpsilon = 1e-7

func (Rescaling) kind() string     { return "rescaling" }
func (Normalization) kind() string { return "normalization" }

// rescalingJSON and normalizationJSON are the specs' JSON.
type rescalingJSON struct {
	Type   string  `json:"type"`
	Scale  float64 `json:"scale"`
	Offset float64 `json:"offset"`
}

type normalizationJSON struct {
	Type     string    `json:"type"`
	Mean     []float64 `json:"mean"`
	Variance []float64 `json:"variance"`
	Invert   bool      `json:"invert,omitempty"`
}

func init() {
	register("rescaling", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j rescalingJSON) (LayerSpec, error) { return Rescaling{Scale: j.Scale, Offset: j.Offset}, nil })
	})
	register("normalization", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j normalizationJSON) (LayerSpec, error) {
			return Normalization{Mean: j.Mean, Variance: j.Variance, Invert: j.Invert}, nil
		})
	})
}

func (r Rescaling) encode() (any, error) {
	return rescalingJSON{Type: r.kind(), Scale: r.Scale, Offset: r.Offset}, nil
}

func (n Normalization) encode() (any, error) {
	return normalizationJSON{Type: n.kind(), Mean: n.Mean, Variance: n.Variance, Invert: n.Invert}, nil
}

// finite reports whether every v is a finite float32.
func finite(vs ...float64) bool {
	for _, v := range vs {
		if math.IsNaN(v) || math.Abs(v) > math.MaxFloat32 {
			return false
		}
	}
	return true
}

func (r Rescaling) build(in Shape) (layer, Shape, error) {
	if !finite(r.Scale, r.Offset) {
		return nil, Shape{}, fmt.Errorf("scale %v, offset %v: want finite float32s", r.Scale, r.Offset)
	}
	return &affine{C: 1, Plane: in.Size(), scale: []float32{float32(r.Scale)}, offset: []float32{float32(r.Offset)}}, in, nil
}

// check reports whether n's statistics fit an input of c channels.
func (n Normalization) check(c int) error {
	if len(n.Mean) != len(n.Variance) || len(n.Mean) != 1 && len(n.Mean) != c {
		return fmt.Errorf("%d means and %d variances for %d channels: want one of each, or one per channel", len(n.Mean), len(n.Variance), c)
	}
	if !finite(n.Mean...) || !finite(n.Variance...) {
		return fmt.Errorf("mean %v, variance %v: want finite float32s", n.Mean, n.Variance)
	}
	for _, v := range n.Variance {
		if v < 0 {
			return fmt.Errorf("variance %v: want none below 0", n.Variance)
		}
	}
	return nil
}

// bound: the statistics must fit the input's channels before the layer
// copies them.
func (n Normalization) bound(in Shape) (Shape, int, bool, error) {
	return in, 0, n.check(in.C) == nil, nil
}

func (n Normalization) build(in Shape) (layer, Shape, error) {
	if err := n.check(in.C); err != nil {
		return nil, Shape{}, err
	}
	plane := 1
	if !in.vector() {
		plane = in.H * in.W
	}
	l := &affine{C: in.C, Plane: plane, mean: make([]float32, in.C), std: make([]float32, in.C), invert: n.Invert}
	for c := range l.mean {
		k := c % len(n.Mean)
		l.mean[c] = float32(n.Mean[k])
		l.std[c] = max(float32(math.Sqrt(float64(float32(n.Variance[k])))), normEpsilon)
	}
	return l, in, nil
}

// affine maps each of C planes of Plane floats by its channel's own
// affine function: x·scale + offset (Rescaling, one channel), or
// Normalization's (x − mean)/std, or mean + x·std when inverted, in
// float32 in Keras's order of operations.
type affine struct {
	C, Plane      int
	scale, offset []float32
	mean, std     []float32
	invert        bool
}

func (l *affine) InSize() int         { return l.C * l.Plane }
func (l *affine) OutSize() int        { return l.C * l.Plane }
func (l *affine) NumParams() int      { return 0 }
func (l *affine) Bind(_, _ []float32) {}
func (l *affine) Init(_ *rand.Rand)   {}

func (l *affine) Forward(y, x []float32, n int) {
	for p := 0; p < n*l.C; p++ {
		c := p % l.C
		xp, yp := x[p*l.Plane:(p+1)*l.Plane], y[p*l.Plane:(p+1)*l.Plane]
		switch {
		case l.scale != nil:
			s, o := l.scale[c], l.offset[c]
			for i, v := range xp {
				yp[i] = v*s + o
			}
		case l.invert:
			m, d := l.mean[c], l.std[c]
			for i, v := range xp {
				yp[i] = m + v*d
			}
		default:
			m, d := l.mean[c], l.std[c]
			for i, v := range xp {
				yp[i] = (v - m) / d
			}
		}
	}
}

func (l *affine) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	for p := 0; p < n*l.C; p++ {
		c := p % l.C
		gp, dp := dy[p*l.Plane:(p+1)*l.Plane], dx[p*l.Plane:(p+1)*l.Plane]
		switch {
		case l.scale != nil:
			s := l.scale[c]
			for i, g := range gp {
				dp[i] = g * s
			}
		case l.invert:
			d := l.std[c]
			for i, g := range gp {
				dp[i] = g * d
			}
		default:
			d := l.std[c]
			for i, g := range gp {
				dp[i] = g / d
			}
		}
	}
}
