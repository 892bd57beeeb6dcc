package nn

import (
	"encoding/json"
	"math/rand/v2"
)

// GlobalAveragePooling2D averages each channel of an H×W×C image over
// its H·W cells, giving a vector of C (or, with KeepDims, a 1×1×C
// image: the same floats), as Keras's layer of that name does; the
// classifier head of MobileNet and ResNet. It has no tensors.
type GlobalAveragePooling2D struct{ KeepDims bool }

// GlobalMaxPooling2D takes each channel's maximum over its H·W cells,
// as GlobalAveragePooling2D places it; the gradient goes to the first
// maximum (row by row), as MaxPooling2D's does. It has no tensors.
type GlobalMaxPooling2D struct{ KeepDims bool }

func (GlobalAveragePooling2D) kind() string { return "global_average_pooling2d" }
func (GlobalMaxPooling2D) kind() string     { return "global_max_pooling2d" }

// globalPoolJSON is the global poolings' JSON; keepdims is written only
// when set.
type globalPoolJSON struct {
	Type     string `json:"type"`
	KeepDims bool   `json:"keepdims,omitempty"`
}

func init() {
	register("global_average_pooling2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j globalPoolJSON) (LayerSpec, error) { return GlobalAveragePooling2D{KeepDims: j.KeepDims}, nil })
	})
	register("global_max_pooling2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j globalPoolJSON) (LayerSpec, error) { return GlobalMaxPooling2D{KeepDims: j.KeepDims}, nil })
	})
}

func (g GlobalAveragePooling2D) encode() (any, error) {
	return globalPoolJSON{Type: g.kind(), KeepDims: g.KeepDims}, nil
}
func (g GlobalMaxPooling2D) encode() (any, error) {
	return globalPoolJSON{Type: g.kind(), KeepDims: g.KeepDims}, nil
}

func (g GlobalAveragePooling2D) build(in Shape) (layer, Shape, error) {
	return buildGlobalPool(in, g.KeepDims, false)
}
func (g GlobalMaxPooling2D) build(in Shape) (layer, Shape, error) {
	return buildGlobalPool(in, g.KeepDims, true)
}

func buildGlobalPool(in Shape, keep, max bool) (layer, Shape, error) {
	if in.vector() {
		return nil, Shape{}, errVector
	}
	out := Shape{C: in.C}
	if keep {
		out = Shape{H: 1, W: 1, C: in.C}
	}
	return &globalPool{C: in.C, Plane: in.H * in.W, Max: max}, out, nil
}

// globalPool reduces each of C planes of Plane floats to one float: its
// mean, or its maximum when Max.
type globalPool struct {
	C, Plane int
	Max      bool
}

func (l *globalPool) InSize() int         { return l.C * l.Plane }
func (l *globalPool) OutSize() int        { return l.C }
func (l *globalPool) NumParams() int      { return 0 }
func (l *globalPool) Bind(_, _ []float32) {}
func (l *globalPool) Init(_ *rand.Rand)   {}

func (l *globalPool) Forward(y, x []float32, n int) {
	inv := 1 / float32(l.Plane)
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.Plane : (p+1)*l.Plane]
		if l.Max {
			m := xp[0]
			for _, v := range xp[1:] {
				if v > m {
					m = v
				}
			}
			y[p] = m
			continue
		}
		// Four partial sums: one would be a latency chain.
		var s [4]float32
		i := 0
		for ; i+4 <= len(xp); i += 4 {
			s[0] += xp[i]
			s[1] += xp[i+1]
			s[2] += xp[i+2]
			s[3] += xp[i+3]
		}
		for ; i < len(xp); i++ {
			s[0] += xp[i]
		}
		y[p] = ((s[0] + s[1]) + (s[2] + s[3])) * inv
	}
}

func (l *globalPool) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil {
		return
	}
	inv := 1 / float32(l.Plane)
	for p := 0; p < n*l.C; p++ {
		dp := dx[p*l.Plane : (p+1)*l.Plane]
		if !l.Max {
			g := dy[p] * inv
			for i := range dp {
				dp[i] = g
			}
			continue
		}
		clear(dp)
		xp := x[p*l.Plane : (p+1)*l.Plane]
		best := 0
		for i, v := range xp {
			if v > xp[best] {
				best = i
			}
		}
		dp[best] = dy[p]
	}
}
