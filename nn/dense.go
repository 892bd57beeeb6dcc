package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Dense is a fully connected layer of Units outputs over a vector input
// (Flatten an image first): y = x·Wᵀ + b, with tensors weight [Units In]
// and bias [Units], as PyTorch's Linear.
type Dense struct {
	Units int
	Init  Init   // of the weights (He, the zero value, Glorot or Torch)
	Name  string // the tensors' prefix; "" for the layer's index
	// KernelInit and BiasInit are as Conv2D's.
	KernelInit, BiasInit *Initializer
}

func (Dense) kind() string   { return "dense" }
func (d Dense) name() string { return d.Name }

// denseJSON is Dense's JSON.
type denseJSON struct {
	Type       string       `json:"type"`
	Units      int          `json:"units"`
	Init       string       `json:"init"`
	KernelInit *Initializer `json:"kernel_initializer,omitempty"`
	BiasInit   *Initializer `json:"bias_initializer,omitempty"`
	Name       string       `json:"name,omitempty"`
}

func init() {
	register("dense", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j denseJSON) (LayerSpec, error) {
			init, err := parseInit(j.Init)
			if err != nil {
				return nil, err
			}
			return Dense{Units: j.Units, Init: init, KernelInit: j.KernelInit, BiasInit: j.BiasInit, Name: j.Name}, nil
		})
	})
}

func (d Dense) encode() (any, error) {
	init, err := initName(d.Init)
	if err != nil {
		return nil, err
	}
	return denseJSON{Type: d.kind(), Units: d.Units, Init: init, KernelInit: d.KernelInit, BiasInit: d.BiasInit, Name: d.Name}, nil
}

func (d Dense) build(in Shape) (layer, Shape, error) {
	if !in.vector() {
		return nil, Shape{}, fmt.Errorf("the input is an image, %v: put a Flatten before it", in)
	}
	if d.Units < 1 {
		return nil, Shape{}, fmt.Errorf("%d units: want at least 1", d.Units)
	}
	if err := checkInits(d.KernelInit, d.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	l := newDense(in.C, d.Units)
	l.WeightInit, l.KernelInit, l.BiasInit = d.Init, d.KernelInit, d.BiasInit
	return l, Shape{C: d.Units}, nil
}

// bound: the weights grow with the units and the inputs.
func (d Dense) bound(in Shape) (Shape, int, bool, error) {
	if !in.vector() || d.Units < 1 {
		return Shape{}, 0, false, nil
	}
	if w := float64(in.C)*float64(d.Units) + float64(d.Units); d.Units > maxExample || w > MaxParams {
		return Shape{}, 0, false, fmt.Errorf("%d units over %d inputs: %.3g parameters (%d at most)", d.Units, in.C, w, MaxParams)
	}
	return Shape{C: d.Units}, in.C*d.Units + d.Units, true, nil
}

// dense is a fully connected layer y = x·Wᵀ + b with W stored Out×In
// (PyTorch's layout), then Out biases.
type dense struct {
	In, Out    int
	WeightInit Init
	// KernelInit and BiasInit are as conv2D's.
	KernelInit, BiasInit *Initializer

	w, b, dw, db []float32
	dyT          []float32 // Out × n scratch for the weight gradient
}

func newDense(in, out int) *dense { return &dense{In: in, Out: out} }

func (l *dense) InSize() int    { return l.In }
func (l *dense) OutSize() int   { return l.Out }
func (l *dense) NumParams() int { return l.In*l.Out + l.Out }

// ParamShapes is PyTorch's Linear: weight [Out In], bias [Out].
func (l *dense) ParamShapes() [][]int { return [][]int{{l.Out, l.In}, {l.Out}} }

func (l *dense) Bind(params, grads []float32) {
	nw := l.In * l.Out
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *dense) Init(rng *rand.Rand) {
	initParams(rng, l.w, l.b, l.WeightInit, l.KernelInit, l.BiasInit, l.In, l.Out)
}

func (l *dense) Forward(y, x []float32, n int) {
	gemmNT(n, l.Out, l.In, x, l.In, l.w, l.In, y, l.Out, false)
	for e := 0; e < n; e++ {
		ye := y[e*l.Out : (e+1)*l.Out]
		for j, bj := range l.b {
			ye[j] += bj
		}
	}
}

func (l *dense) Backward(dx, dy, x, y []float32, n int) {
	l.dyT = grow(l.dyT, l.Out*n)
	for e := 0; e < n; e++ {
		dye := dy[e*l.Out : (e+1)*l.Out]
		for j, g := range dye {
			l.db[j] += g
			l.dyT[j*n+e] = g
		}
	}
	gemmNN(l.Out, l.In, n, l.dyT, n, x, l.In, l.dw, l.In, true)
	if dx != nil {
		gemmNN(n, l.In, l.Out, dy, l.Out, l.w, l.In, dx, l.In, false)
	}
}
