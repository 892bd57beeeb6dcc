package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// MaxPooling1D takes the maximum of each window of Size steps of a
// sequence (1×L×C), moved Strides steps at a time (0 means Size), channel
// by channel, with Valid or Same padding (padding is never a maximum):
// Keras's MaxPooling1D, whose pool_size defaults to 2.
type MaxPooling1D struct {
	Size, Strides int
	Padding       Padding
}

// AveragePooling1D averages each window as MaxPooling1D places them; with
// Same padding a window averages only its steps inside the input
// (TensorFlow's, which excludes the padding).
type AveragePooling1D struct {
	Size, Strides int
	Padding       Padding
}

func (MaxPooling1D) kind() string     { return "max_pooling1d" }
func (AveragePooling1D) kind() string { return "average_pooling1d" }

func init() {
	register("max_pooling1d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j poolJSON) (LayerSpec, error) {
			pad, err := parsePadding(j.Padding)
			return MaxPooling1D{Size: j.Size, Strides: j.Strides, Padding: pad}, err
		})
	})
	register("average_pooling1d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j poolJSON) (LayerSpec, error) {
			pad, err := parsePadding(j.Padding)
			return AveragePooling1D{Size: j.Size, Strides: j.Strides, Padding: pad}, err
		})
	})
}

func (m MaxPooling1D) pool() poolSpec {
	return poolSpec{m.Size, m.Strides, m.Padding, false, m.kind()}
}

func (a AveragePooling1D) pool() poolSpec {
	return poolSpec{a.Size, a.Strides, a.Padding, true, a.kind()}
}

func (m MaxPooling1D) build(in Shape) (layer, Shape, error)         { return m.pool().build1D(in) }
func (a AveragePooling1D) build(in Shape) (layer, Shape, error)     { return a.pool().build1D(in) }
func (m MaxPooling1D) bound(in Shape) (Shape, int, bool, error)     { return m.pool().bound1D(in) }
func (a AveragePooling1D) bound(in Shape) (Shape, int, bool, error) { return a.pool().bound1D(in) }
func (m MaxPooling1D) encode() (any, error)                         { return m.pool().encode(), nil }
func (a AveragePooling1D) encode() (any, error)                     { return a.pool().encode(), nil }

// geometry1D is the output length and the padding before the first
// step of p over in.
func (p poolSpec) geometry1D(in Shape) (out, before int, err error) {
	if in.vector() || in.H != 1 {
		return 0, 0, errNotSequence(in)
	}
	if p.size < 1 || p.strides < 0 || p.size > maxExample || p.strides > maxExample {
		return 0, 0, fmt.Errorf("pool size %d, stride %d: want a size from 1 and a stride from 0 (0 for the size), both at most %d", p.size, p.strides, maxExample)
	}
	if p.pad != Valid && p.pad != Same {
		return 0, 0, fmt.Errorf("padding %v: pooling takes valid or same", p.pad)
	}
	out, before, _, err = window(in.W, p.size, p.stride(), p.pad)
	if err != nil {
		return 0, 0, fmt.Errorf("pool %d over %v: %w", p.size, in, err)
	}
	return out, before, nil
}

func (p poolSpec) build1D(in Shape) (layer, Shape, error) {
	out, before, err := p.geometry1D(in)
	if err != nil {
		return nil, Shape{}, err
	}
	return &pool1D{C: in.C, L: in.W, Size: p.size, S: p.stride(), Before: before, Out: out, Avg: p.avg}, Shape{H: 1, W: out, C: in.C}, nil
}

func (p poolSpec) bound1D(in Shape) (Shape, int, bool, error) {
	out, _, err := p.geometry1D(in)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	return Shape{H: 1, W: out, C: in.C}, 0, true, nil
}

// pool1D is max or average pooling of windows of Size steps, stride S,
// over C channels of L steps (planar); window t covers steps t·S − Before
// … t·S − Before + Size − 1 that are inside the input. Max pooling routes
// the gradient to each window's first maximum.
type pool1D struct {
	C, L, Size, S, Before, Out int
	Avg                        bool
}

func (l *pool1D) InSize() int         { return l.C * l.L }
func (l *pool1D) OutSize() int        { return l.C * l.Out }
func (l *pool1D) NumParams() int      { return 0 }
func (l *pool1D) Bind(_, _ []float32) {}
func (l *pool1D) Init(_ *rand.Rand)   {}
func (l *pool1D) reads() (x, y bool)  { return true, false }

// span is window t's steps inside the input, [lo, hi).
func (l *pool1D) span(t int) (lo, hi int) {
	lo = t*l.S - l.Before
	return max(lo, 0), min(lo+l.Size, l.L)
}

// argmax is the first maximum of xs[lo:hi].
func argmax(xs []float32, lo, hi int) int {
	best := lo
	for i := lo + 1; i < hi; i++ {
		if xs[i] > xs[best] {
			best = i
		}
	}
	return best
}

func (l *pool1D) Forward(y, x []float32, n int) {
	for p := 0; p < n*l.C; p++ { // one row of steps per (example, channel)
		xp, yp := x[p*l.L:(p+1)*l.L], y[p*l.Out:(p+1)*l.Out]
		for t := range yp {
			lo, hi := l.span(t)
			if !l.Avg {
				yp[t] = xp[argmax(xp, lo, hi)]
				continue
			}
			var s float32
			for _, v := range xp[lo:hi] {
				s += v
			}
			yp[t] = s / float32(hi-lo)
		}
	}
}

func (l *pool1D) Backward(dx, dy, x, _ []float32, n int) {
	if dx == nil {
		return
	}
	clear(dx[:n*l.C*l.L])
	for p := 0; p < n*l.C; p++ {
		xp, dxp, dyp := x[p*l.L:(p+1)*l.L], dx[p*l.L:(p+1)*l.L], dy[p*l.Out:(p+1)*l.Out]
		for t, g := range dyp {
			lo, hi := l.span(t)
			if !l.Avg {
				dxp[argmax(xp, lo, hi)] += g
				continue
			}
			g /= float32(hi - lo)
			for i := lo; i < hi; i++ {
				dxp[i] += g
			}
		}
	}
}
