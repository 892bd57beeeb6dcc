package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// LayerNormalization normalises each example over its channels, at each
// position on its own: a vector over its C floats, a sequence at each
// step and an image at each pixel over their C channels (Keras's
// LayerNormalization on the last axis, −1): y = γ·(x − μ)/√(σ² + ε) + β,
// μ and σ² the mean and (biased) variance of the C values, in training
// and evaluation alike.
//
// Its tensors are weight (γ) [C] and bias (β) [C], those it has, as
// PyTorch's LayerNorm(C) names them (Keras's gamma and beta).
type LayerNormalization struct {
	// Epsilon is Keras's; 0 stands for its default, 1e-3 (PyTorch's is
	// 1e-5).
	Epsilon float64
	// NoCenter drops β and NoScale γ (Keras's center and scale false).
	NoCenter, NoScale bool
	// GammaInit and BetaInit draw γ and β; nil is Keras's ones and zeros.
	GammaInit, BetaInit *Initializer
	// Axis is Keras's axis when the file names it by position: 0 (or −1)
	// is the last; a positive one must be the input's last counting the
	// batch's as 0 (a vector's 1, a sequence's 2, an image's 3), which
	// TensorFlow.js writes.
	Axis int
	Name string // the tensors' prefix; "" for the layer's index
}

// defaultLNEpsilon is Keras's default epsilon for LayerNormalization.
const defaultLNEpsilon = 1e-3

func (LayerNormalization) kind() string   { return "layer_normalization" }
func (n LayerNormalization) name() string { return n.Name }

func (n LayerNormalization) epsilon() float64 {
	if n.Epsilon == 0 {
		return defaultLNEpsilon
	}
	return n.Epsilon
}

// layerNormJSON is LayerNormalization's JSON; axis is omitted when it is
// the last (0).
type layerNormJSON struct {
	Type      string       `json:"type"`
	Epsilon   float64      `json:"epsilon"`
	Center    bool         `json:"center"`
	Scale     bool         `json:"scale"`
	GammaInit *Initializer `json:"gamma_initializer,omitempty"`
	BetaInit  *Initializer `json:"beta_initializer,omitempty"`
	Axis      int          `json:"axis,omitempty"`
	Name      string       `json:"name,omitempty"`
}

func init() {
	register("layer_normalization", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j layerNormJSON) (LayerSpec, error) {
			return LayerNormalization{Epsilon: j.Epsilon, NoCenter: !j.Center, NoScale: !j.Scale, GammaInit: j.GammaInit, BetaInit: j.BetaInit, Axis: j.Axis, Name: j.Name}, nil
		})
	})
}

func (n LayerNormalization) encode() (any, error) {
	return layerNormJSON{Type: n.kind(), Epsilon: n.epsilon(), Center: !n.NoCenter, Scale: !n.NoScale,
		GammaInit: n.GammaInit, BetaInit: n.BetaInit, Axis: n.Axis, Name: n.Name}, nil
}

// lastAxis reports whether Keras's axis a is in's last.
func lastAxis(in Shape, a int) bool {
	switch {
	case a == 0 || a == -1:
		return true
	case in.vector():
		return a == 1
	case in.H == 1:
		return a == 2 || a == 3 // a sequence, or an image of one row
	}
	return a == 3
}

func (n LayerNormalization) build(in Shape) (layer, Shape, error) {
	eps := n.epsilon()
	if !(eps > 0) || math.IsInf(eps, 0) {
		return nil, Shape{}, fmt.Errorf("epsilon %v: want one > 0 (0 for Keras's 1e-3)", n.Epsilon)
	}
	if !lastAxis(in, n.Axis) {
		return nil, Shape{}, fmt.Errorf("axis %d on an input of %v is not supported: meshtrain normalises over the channels, the last axis (-1)", n.Axis, in)
	}
	if err := checkInits(n.GammaInit, n.BetaInit); err != nil {
		return nil, Shape{}, err
	}
	plane := 1
	if !in.vector() {
		plane = in.H * in.W
	}
	return &layerNorm{C: in.C, Plane: plane, Eps: eps, Center: !n.NoCenter, Scale: !n.NoScale, GammaInit: n.GammaInit, BetaInit: n.BetaInit}, in, nil
}

// layerNorm normalises C channels at each of Plane positions per
// example (planar: channel c of position p at c·Plane + p). Its
// parameters are γ then β, those it has. Backward recomputes each
// position's statistics from x.
type layerNorm struct {
	C, Plane            int
	Eps                 float64
	Center, Scale       bool
	GammaInit, BetaInit *Initializer

	gamma, beta, dgamma, dbeta []float32
	mean, inv, s1, s2          []float64 // Plane each: per position
}

func (l *layerNorm) InSize() int        { return l.C * l.Plane }
func (l *layerNorm) OutSize() int       { return l.C * l.Plane }
func (l *layerNorm) reads() (x, y bool) { return true, false }

func (l *layerNorm) NumParams() int {
	return l.C * (btoi(l.Scale) + btoi(l.Center))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (l *layerNorm) paramNames() []string {
	var n []string
	if l.Scale {
		n = append(n, "weight")
	}
	if l.Center {
		n = append(n, "bias")
	}
	return n
}

// ParamShapes is PyTorch's LayerNorm's: weight [C], bias [C].
func (l *layerNorm) ParamShapes() [][]int {
	var s [][]int
	for range l.paramNames() {
		s = append(s, []int{l.C})
	}
	return s
}

func (l *layerNorm) Bind(params, grads []float32) {
	off := 0
	if l.Scale {
		l.gamma, l.dgamma = params[:l.C:l.C], grads[:l.C:l.C]
		off = l.C
	}
	if l.Center {
		l.beta, l.dbeta = params[off:off+l.C:off+l.C], grads[off:off+l.C:off+l.C]
	}
}

// Init sets γ and β from their initializers, ones and zeros by default.
func (l *layerNorm) Init(rng *rand.Rand) {
	if l.gamma != nil {
		if l.GammaInit != nil {
			l.GammaInit.fill(rng, l.gamma, l.C, l.C)
		} else {
			for i := range l.gamma {
				l.gamma[i] = 1
			}
		}
	}
	if l.beta != nil {
		if l.BetaInit != nil {
			l.BetaInit.fill(rng, l.beta, l.C, l.C)
		} else {
			clear(l.beta)
		}
	}
}

// stats sets mean and inv, 1/√(σ² + ε), of each position of example xe.
func (l *layerNorm) stats(xe []float32) {
	l.mean, l.inv = growF64(l.mean, l.Plane), growF64(l.inv, l.Plane)
	clear(l.mean)
	clear(l.inv)
	for c := 0; c < l.C; c++ {
		for p, v := range xe[c*l.Plane : (c+1)*l.Plane] {
			l.mean[p] += float64(v)
		}
	}
	for p := range l.mean {
		l.mean[p] /= float64(l.C)
	}
	for c := 0; c < l.C; c++ {
		for p, v := range xe[c*l.Plane : (c+1)*l.Plane] {
			d := float64(v) - l.mean[p]
			l.inv[p] += d * d
		}
	}
	for p, s := range l.inv {
		l.inv[p] = 1 / math.Sqrt(s/float64(l.C)+l.Eps)
	}
}

// growF64 is grow for float64 scratch.
func growF64(buf []float64, n int) []float64 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float64, n)
}

func (l *layerNorm) Forward(y, x []float32, n int) {
	size := l.C * l.Plane
	for e := 0; e < n; e++ {
		xe, ye := x[e*size:(e+1)*size], y[e*size:(e+1)*size]
		l.stats(xe)
		for c := 0; c < l.C; c++ {
			g, b := 1.0, 0.0
			if l.gamma != nil {
				g = float64(l.gamma[c])
			}
			if l.beta != nil {
				b = float64(l.beta[c])
			}
			o := c * l.Plane
			for p, v := range xe[o : o+l.Plane] {
				ye[o+p] = float32(g*(float64(v)-l.mean[p])*l.inv[p] + b)
			}
		}
	}
}

// Backward: with x̂ the normalised input and g = γ·dy, dx = inv·(g −
// mean(g) − x̂·mean(g·x̂)) over each position's channels; dγ += dy·x̂ and
// dβ += dy.
func (l *layerNorm) Backward(dx, dy, x, _ []float32, n int) {
	size := l.C * l.Plane
	for e := 0; e < n; e++ {
		xe, de := x[e*size:(e+1)*size], dy[e*size:(e+1)*size]
		l.stats(xe)
		l.s1, l.s2 = growF64(l.s1, l.Plane), growF64(l.s2, l.Plane)
		clear(l.s1)
		clear(l.s2)
		for c := 0; c < l.C; c++ {
			g := 1.0
			if l.gamma != nil {
				g = float64(l.gamma[c])
			}
			o := c * l.Plane
			var dg, db float64
			for p, v := range xe[o : o+l.Plane] {
				xh := (float64(v) - l.mean[p]) * l.inv[p]
				d := float64(de[o+p])
				dg += d * xh
				db += d
				l.s1[p] += g * d
				l.s2[p] += g * d * xh
			}
			if l.dgamma != nil {
				l.dgamma[c] += float32(dg)
			}
			if l.dbeta != nil {
				l.dbeta[c] += float32(db)
			}
		}
		if dx == nil {
			continue
		}
		dxe := dx[e*size : (e+1)*size]
		for c := 0; c < l.C; c++ {
			g := 1.0
			if l.gamma != nil {
				g = float64(l.gamma[c])
			}
			o := c * l.Plane
			for p, v := range xe[o : o+l.Plane] {
				xh := (float64(v) - l.mean[p]) * l.inv[p]
				gd := g * float64(de[o+p])
				dxe[o+p] = float32(l.inv[p] * (gd - l.s1[p]/float64(l.C) - xh*l.s2[p]/float64(l.C)))
			}
		}
	}
}
