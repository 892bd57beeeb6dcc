package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// ZeroPadding2D adds Top rows of zeros above each channel of an image,
// Bottom below, Left columns left of it and Right right of it, as
// Keras's layer of that name does ((top, bottom), (left, right)). It has
// no tensors.
type ZeroPadding2D struct{ Top, Bottom, Left, Right int }

// Cropping2D drops Top rows from the top of each channel of an image,
// Bottom from the bottom, Left columns from the left and Right from the
// right, as Keras's layer of that name does. It has no tensors.
type Cropping2D struct{ Top, Bottom, Left, Right int }

func (ZeroPadding2D) kind() string { return "zero_padding2d" }
func (Cropping2D) kind() string    { return "cropping2d" }

// frameJSON is ZeroPadding2D's and Cropping2D's JSON.
type frameJSON struct {
	Type   string `json:"type"`
	Top    int    `json:"top"`
	Bottom int    `json:"bottom"`
	Left   int    `json:"left"`
	Right  int    `json:"right"`
}

func init() {
	register("zero_padding2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j frameJSON) (LayerSpec, error) {
			return ZeroPadding2D{Top: j.Top, Bottom: j.Bottom, Left: j.Left, Right: j.Right}, nil
		})
	})
	register("cropping2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j frameJSON) (LayerSpec, error) {
			return Cropping2D{Top: j.Top, Bottom: j.Bottom, Left: j.Left, Right: j.Right}, nil
		})
	})
}

func (z ZeroPadding2D) encode() (any, error) {
	return frameJSON{Type: z.kind(), Top: z.Top, Bottom: z.Bottom, Left: z.Left, Right: z.Right}, nil
}
func (c Cropping2D) encode() (any, error) {
	return frameJSON{Type: c.kind(), Top: c.Top, Bottom: c.Bottom, Left: c.Left, Right: c.Right}, nil
}

// frame returns the layer's output shape for in, or why it has none.
// Padding is positive, cropping negative.
func frame(in Shape, t, b, l, r int, crop bool) (Shape, error) {
	if in.vector() {
		return Shape{}, errVector
	}
	for _, v := range []int{t, b, l, r} {
		if v < 0 || v > maxExample {
			return Shape{}, fmt.Errorf("(%d, %d) rows and (%d, %d) columns: want each in 0 … %d", t, b, l, r, maxExample)
		}
	}
	if crop {
		if t+b >= in.H || l+r >= in.W {
			return Shape{}, fmt.Errorf("cropping (%d, %d) rows and (%d, %d) columns of %v leaves nothing", t, b, l, r, in)
		}
		return Shape{H: in.H - t - b, W: in.W - l - r, C: in.C}, nil
	}
	return Shape{H: in.H + t + b, W: in.W + l + r, C: in.C}, nil
}

func (z ZeroPadding2D) build(in Shape) (layer, Shape, error) {
	out, err := frame(in, z.Top, z.Bottom, z.Left, z.Right, false)
	if err != nil {
		return nil, Shape{}, err
	}
	return &frame2D{C: in.C, H: in.H, W: in.W, OH: out.H, OW: out.W, T: z.Top, L: z.Left}, out, nil
}

func (c Cropping2D) build(in Shape) (layer, Shape, error) {
	out, err := frame(in, c.Top, c.Bottom, c.Left, c.Right, true)
	if err != nil {
		return nil, Shape{}, err
	}
	return &frame2D{C: in.C, H: in.H, W: in.W, OH: out.H, OW: out.W, T: -c.Top, L: -c.Left}, out, nil
}

// bound: a padding grows the output with its options; it is refused
// before the output's size is multiplied out.
func (z ZeroPadding2D) bound(in Shape) (Shape, int, bool, error) {
	out, err := frame(in, z.Top, z.Bottom, z.Left, z.Right, false)
	return out, 0, err == nil, nil
}

func (c Cropping2D) bound(in Shape) (Shape, int, bool, error) {
	out, err := frame(in, c.Top, c.Bottom, c.Left, c.Right, true)
	return out, 0, err == nil, nil
}

// frame2D places each C×H×W input's planes in an OH×OW frame, input cell
// (y, x) at (y+T, x+L): zeros around it when T, L ≥ 0 and the frame is
// larger (padding), the cells outside the frame dropped when T, L ≤ 0
// (cropping).
type frame2D struct {
	C, H, W, OH, OW int
	T, L            int
}

func (l *frame2D) InSize() int         { return l.C * l.H * l.W }
func (l *frame2D) OutSize() int        { return l.C * l.OH * l.OW }
func (l *frame2D) NumParams() int      { return 0 }
func (l *frame2D) Bind(_, _ []float32) {}
func (l *frame2D) Init(_ *rand.Rand)   {}

// overlap is the input rows and columns that land in the frame: rows
// y0 … y1−1 and columns x0 … x1−1.
func (l *frame2D) overlap() (y0, y1, x0, x1 int) {
	return max(0, -l.T), min(l.H, l.OH-l.T), max(0, -l.L), min(l.W, l.OW-l.L)
}

// move copies between one input plane and one output plane: the input's
// overlap onto the frame, or (back) the frame's cells back to the input.
func (l *frame2D) move(in, out []float32, back bool) {
	y0, y1, x0, x1 := l.overlap()
	for y := y0; y < y1; y++ {
		src := in[y*l.W+x0 : y*l.W+x1]
		dst := out[(y+l.T)*l.OW+x0+l.L : (y+l.T)*l.OW+x1+l.L]
		if back {
			copy(src, dst)
		} else {
			copy(dst, src)
		}
	}
}

func (l *frame2D) Forward(y, x []float32, n int) {
	ip, op := l.H*l.W, l.OH*l.OW
	for p := 0; p < n*l.C; p++ {
		out := y[p*op : (p+1)*op]
		if l.T > 0 || l.L > 0 || l.OH > l.H || l.OW > l.W {
			clear(out)
		}
		l.move(x[p*ip:(p+1)*ip], out, false)
	}
}

func (l *frame2D) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	ip, op := l.H*l.W, l.OH*l.OW
	for p := 0; p < n*l.C; p++ {
		in := dx[p*ip : (p+1)*ip]
		if l.T < 0 || l.L < 0 || l.OH < l.H || l.OW < l.W {
			clear(in)
		}
		l.move(in, dy[p*op:(p+1)*op], true)
	}
}
