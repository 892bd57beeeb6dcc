package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// UpSampling2D repeats each row of an image SizeH times and each column
// SizeW times (nearest-neighbour interpolation), as Keras's layer of that
// name does with interpolation "nearest"; a size of 0 means 2, Keras's
// default. It has no tensors.
type UpSampling2D struct{ SizeH, SizeW int }

func (UpSampling2D) kind() string { return "up_sampling2d" }

// upSamplingJSON is UpSampling2D's JSON, both sizes written out.
type upSamplingJSON struct {
	Type  string `json:"type"`
	SizeH int    `json:"size_h"`
	SizeW int    `json:"size_w"`
}

func init() {
	register("up_sampling2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j upSamplingJSON) (LayerSpec, error) {
			return UpSampling2D{SizeH: j.SizeH, SizeW: j.SizeW}, nil
		})
	})
}

// sizes are the factors with 0 read as 2.
func (u UpSampling2D) sizes() (int, int) {
	h, w := u.SizeH, u.SizeW
	if h == 0 {
		h = 2
	}
	if w == 0 {
		w = 2
	}
	return h, w
}

func (u UpSampling2D) encode() (any, error) {
	h, w := u.sizes()
	return upSamplingJSON{Type: u.kind(), SizeH: h, SizeW: w}, nil
}

func (u UpSampling2D) build(in Shape) (layer, Shape, error) {
	out, err := u.shape(in)
	if err != nil {
		return nil, Shape{}, err
	}
	h, w := u.sizes()
	return &upSample{C: in.C, H: in.H, W: in.W, SH: h, SW: w}, out, nil
}

// shape is the output shape for in, or why there is none.
func (u UpSampling2D) shape(in Shape) (Shape, error) {
	if in.vector() {
		return Shape{}, errVector
	}
	h, w := u.sizes()
	if h < 1 || w < 1 || h > maxExample || w > maxExample {
		return Shape{}, fmt.Errorf("size (%d, %d): want factors of 1 … %d (0 for 2)", u.SizeH, u.SizeW, maxExample)
	}
	return Shape{H: in.H * h, W: in.W * w, C: in.C}, nil
}

// bound: the output grows with the factors; they are refused before it
// is sized.
func (u UpSampling2D) bound(in Shape) (Shape, int, bool, error) {
	out, err := u.shape(in)
	return out, 0, err == nil, nil
}

// upSample repeats each cell of C×H×W inputs as an SH×SW block.
type upSample struct{ C, H, W, SH, SW int }

func (l *upSample) InSize() int         { return l.C * l.H * l.W }
func (l *upSample) OutSize() int        { return l.C * l.H * l.SH * l.W * l.SW }
func (l *upSample) NumParams() int      { return 0 }
func (l *upSample) Bind(_, _ []float32) {}
func (l *upSample) Init(_ *rand.Rand)   {}

func (l *upSample) Forward(y, x []float32, n int) {
	ow := l.W * l.SW
	for p := 0; p < n*l.C*l.H; p++ { // one input row per (example, channel, row)
		xr := x[p*l.W : (p+1)*l.W]
		first := y[p*l.SH*ow : (p*l.SH+1)*ow]
		for i, v := range xr {
			for k := range first[i*l.SW : (i+1)*l.SW] {
				first[i*l.SW+k] = v
			}
		}
		for r := 1; r < l.SH; r++ {
			copy(y[(p*l.SH+r)*ow:(p*l.SH+r+1)*ow], first)
		}
	}
}

func (l *upSample) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	ow := l.W * l.SW
	for p := 0; p < n*l.C*l.H; p++ {
		dr := dx[p*l.W : (p+1)*l.W]
		clear(dr)
		for r := 0; r < l.SH; r++ {
			gr := dy[(p*l.SH+r)*ow : (p*l.SH+r+1)*ow]
			for i := range dr {
				var s float32
				for _, g := range gr[i*l.SW : (i+1)*l.SW] {
					s += g
				}
				dr[i] += s
			}
		}
	}
}
