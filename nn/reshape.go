package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Flatten turns an image into a vector of its H·W·C floats, in the planar
// order described at Shape. It copies nothing.
type Flatten struct{}

// Reshape gives the input the shape To, of the same size; at most one of
// To's fields may be −1, standing for whatever makes the sizes agree. The
// floats keep their order (see Shape). It copies nothing.
type Reshape struct{ To Shape }

func (Flatten) kind() string { return "flatten" }
func (Reshape) kind() string { return "reshape" }

// reshapeJSON is Reshape's JSON; Flatten's is its type alone.
type reshapeJSON struct {
	Type string `json:"type"`
	To   Shape  `json:"to"`
}

func init() {
	register("flatten", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(typeJSON) (LayerSpec, error) { return Flatten{}, nil })
	})
	register("reshape", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j reshapeJSON) (LayerSpec, error) { return Reshape{To: j.To}, nil })
	})
}

func (f Flatten) encode() (any, error) { return typeJSON{Type: f.kind()}, nil }
func (r Reshape) encode() (any, error) { return reshapeJSON{Type: r.kind(), To: r.To}, nil }

func (Flatten) build(in Shape) (layer, Shape, error) {
	return &reshape{Size: in.Size()}, Shape{C: in.Size()}, nil
}

func (r Reshape) build(in Shape) (layer, Shape, error) {
	to := r.To
	dims := []*int{&to.H, &to.W, &to.C}
	if to.vector() {
		dims = dims[2:]
	}
	known, free := 1, 0
	for _, d := range dims {
		switch {
		case *d == -1:
			free++
		case *d >= 1:
			known *= *d
		default:
			return nil, Shape{}, fmt.Errorf("target %v: want sizes ≥ 1 (one may be −1)", r.To)
		}
	}
	if free > 1 {
		return nil, Shape{}, fmt.Errorf("target %v: at most one size may be −1", r.To)
	}
	if free == 1 {
		if in.Size()%known != 0 {
			return nil, Shape{}, fmt.Errorf("%v (%d floats) does not divide into %v", in, in.Size(), r.To)
		}
		for _, d := range dims {
			if *d == -1 {
				*d = in.Size() / known
			}
		}
	}
	if to.Size() != in.Size() {
		return nil, Shape{}, fmt.Errorf("%v (%d floats) cannot become %v (%d)", in, in.Size(), to, to.Size())
	}
	return &reshape{Size: in.Size()}, to, nil
}

// reshape changes the shape of its input and not its floats: Flatten,
// Reshape and the linear activation. A Sequential runs it as a view (its
// output and gradient buffers are its input's); on its own it copies.
// Feature maps are C×H×W row-major, so flattening them orders the vector
// channel by channel, row by row, as PyTorch's flatten of NCHW does.
type reshape struct{ Size int }

func (l *reshape) InSize() int                   { return l.Size }
func (l *reshape) OutSize() int                  { return l.Size }
func (l *reshape) NumParams() int                { return 0 }
func (l *reshape) Bind(_, _ []float32)           {}
func (l *reshape) Init(_ *rand.Rand)             {}
func (l *reshape) Forward(y, x []float32, n int) { copy(y[:n*l.Size], x[:n*l.Size]) }
func (l *reshape) Backward(dx, dy, _, _ []float32, n int) {
	if dx != nil {
		copy(dx[:n*l.Size], dy[:n*l.Size])
	}
}
