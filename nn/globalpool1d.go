package nn

import (
	"encoding/json"
	"math/rand/v2"
)

// GlobalMaxPooling1D takes the maximum of each channel of a sequence
// (1×L×C) over its L steps, giving a vector of C: Keras's
// GlobalMaxPooling1D (keepdims false). The gradient goes to each
// channel's first maximum.
type GlobalMaxPooling1D struct{}

// GlobalAveragePooling1D averages each channel of a sequence over its
// steps: Keras's GlobalAveragePooling1D (keepdims false, no mask).
type GlobalAveragePooling1D struct{}

func (GlobalMaxPooling1D) kind() string     { return "global_max_pooling1d" }
func (GlobalAveragePooling1D) kind() string { return "global_average_pooling1d" }

func init() {
	register("global_max_pooling1d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(typeJSON) (LayerSpec, error) { return GlobalMaxPooling1D{}, nil })
	})
	register("global_average_pooling1d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(typeJSON) (LayerSpec, error) { return GlobalAveragePooling1D{}, nil })
	})
}

func (g GlobalMaxPooling1D) encode() (any, error)     { return typeJSON{Type: g.kind()}, nil }
func (g GlobalAveragePooling1D) encode() (any, error) { return typeJSON{Type: g.kind()}, nil }

func (GlobalMaxPooling1D) build(in Shape) (layer, Shape, error)     { return buildGlobal1D(in, false) }
func (GlobalAveragePooling1D) build(in Shape) (layer, Shape, error) { return buildGlobal1D(in, true) }

func buildGlobal1D(in Shape, avg bool) (layer, Shape, error) {
	if in.vector() || in.H != 1 {
		return nil, Shape{}, errNotSequence(in)
	}
	return &globalPool1D{C: in.C, L: in.W, Avg: avg}, Shape{C: in.C}, nil
}

// globalPool1D pools each of C rows of L steps (planar) to one float.
type globalPool1D struct {
	C, L int
	Avg  bool
}

func (l *globalPool1D) InSize() int         { return l.C * l.L }
func (l *globalPool1D) OutSize() int        { return l.C }
func (l *globalPool1D) NumParams() int      { return 0 }
func (l *globalPool1D) Bind(_, _ []float32) {}
func (l *globalPool1D) Init(_ *rand.Rand)   {}
func (l *globalPool1D) reads() (x, y bool)  { return true, false }

func (l *globalPool1D) Forward(y, x []float32, n int) {
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.L : (p+1)*l.L]
		if !l.Avg {
			y[p] = xp[argmax(xp, 0, l.L)]
			continue
		}
		var s float64
		for _, v := range xp {
			s += float64(v)
		}
		y[p] = float32(s / float64(l.L))
	}
}

func (l *globalPool1D) Backward(dx, dy, x, _ []float32, n int) {
	if dx == nil {
		return
	}
	for p, g := range dy[:n*l.C] {
		xp, dxp := x[p*l.L:(p+1)*l.L], dx[p*l.L:(p+1)*l.L]
		if l.Avg {
			g /= float32(l.L)
			for i := range dxp {
				dxp[i] = g
			}
			continue
		}
		clear(dxp)
		dxp[argmax(xp, 0, l.L)] = g
	}
}
