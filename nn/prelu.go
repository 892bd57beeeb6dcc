package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
)

// PReLU is x for x > 0 and αc·x below, with one learnt slope αc per
// channel (of an image or a sequence, each of its C planes; of a
// vector, each float), as Keras's PReLU with its shared_axes spanning
// the positions (an image's [1, 2], a sequence's [1]) and as PyTorch's
// PReLU(num_parameters=C) compute it. Its one tensor is weight [C], the
// slopes (PyTorch's name and layout; Keras's alpha of shape [1, 1, C] or
// [1, C] holds the same floats).
//
// Keras's default, shared_axes None, learns a slope per value of the
// example (H·W·C of them), which PyTorch's PReLU cannot hold: SharedAxes
// must share every position, or be empty for a vector.
type PReLU struct {
	// AlphaInit draws the slopes; nil is Keras's zeros.
	AlphaInit *Initializer
	// SharedAxes is Keras's shared_axes, checked against the input: none
	// for a vector, [1] for a sequence (1×L×C), [1, 2] for an image.
	SharedAxes []int
	Name       string // the tensor's prefix; "" for the layer's index
}

func (PReLU) kind() string   { return "prelu" }
func (p PReLU) name() string { return p.Name }

// preluJSON is PReLU's JSON; shared_axes is omitted when empty.
type preluJSON struct {
	Type       string       `json:"type"`
	AlphaInit  *Initializer `json:"alpha_initializer,omitempty"`
	SharedAxes []int        `json:"shared_axes,omitempty"`
	Name       string       `json:"name,omitempty"`
}

func init() {
	register("prelu", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j preluJSON) (LayerSpec, error) {
			return PReLU{AlphaInit: j.AlphaInit, SharedAxes: j.SharedAxes, Name: j.Name}, nil
		})
	})
}

func (p PReLU) encode() (any, error) {
	return preluJSON{Type: p.kind(), AlphaInit: p.AlphaInit, SharedAxes: p.SharedAxes, Name: p.Name}, nil
}

// positionAxes are Keras's axes (the batch's being 0) of in's positions:
// none for a vector, the steps of a sequence (an image of one row, which
// Keras may also see as an image: either is accepted), an image's rows
// and columns.
func positionAxes(in Shape, axes []int) bool {
	a := slices.Sorted(slices.Values(axes))
	switch {
	case in.vector():
		return len(a) == 0
	case in.H == 1 && slices.Equal(a, []int{1}):
		return true
	}
	return slices.Equal(a, []int{1, 2})
}

func (p PReLU) build(in Shape) (layer, Shape, error) {
	if !positionAxes(in, p.SharedAxes) {
		want := "[1, 2] (an image's rows and columns)"
		switch {
		case in.vector():
			want = "none (a vector's slopes are one per float)"
		case in.H == 1:
			want = "[1] (a sequence's steps)"
		}
		axes := "none"
		if len(p.SharedAxes) > 0 {
			axes = fmt.Sprint(p.SharedAxes)
		}
		return nil, Shape{}, fmt.Errorf("shared_axes %s on an input of %v is not supported: meshtrain's PReLU learns one slope per channel (PyTorch's), so shared_axes must be %s", axes, in, want)
	}
	if err := checkInits(p.AlphaInit, nil); err != nil {
		return nil, Shape{}, fmt.Errorf("alpha: %w", err)
	}
	plane := 1
	if !in.vector() {
		plane = in.H * in.W
	}
	return &prelu{C: in.C, Plane: plane, AlphaInit: p.AlphaInit}, in, nil
}

// prelu is PReLU over C channels of Plane floats each per example
// (planar); its parameters are the C slopes.
type prelu struct {
	C, Plane  int
	AlphaInit *Initializer

	a, da []float32
}

func (l *prelu) InSize() int          { return l.C * l.Plane }
func (l *prelu) OutSize() int         { return l.C * l.Plane }
func (l *prelu) NumParams() int       { return l.C }
func (l *prelu) ParamShapes() [][]int { return [][]int{{l.C}} }
func (l *prelu) paramNames() []string { return []string{"weight"} }
func (l *prelu) reads() (x, y bool)   { return true, false }

func (l *prelu) Bind(params, grads []float32) {
	l.a, l.da = params[:l.C:l.C], grads[:l.C:l.C]
}

// Init draws the slopes from AlphaInit (zeros when nil, drawing nothing).
func (l *prelu) Init(rng *rand.Rand) {
	if l.AlphaInit == nil {
		clear(l.a)
		return
	}
	l.AlphaInit.fill(rng, l.a, l.Plane, l.Plane)
}

func (l *prelu) Forward(y, x []float32, n int) {
	for e := 0; e < n; e++ {
		for c, a := range l.a {
			o := (e*l.C + c) * l.Plane
			for i, v := range x[o : o+l.Plane] {
				if v <= 0 {
					v *= a
				}
				y[o+i] = v
			}
		}
	}
}

func (l *prelu) Backward(dx, dy, x, _ []float32, n int) {
	for c, a := range l.a {
		var da float64
		for e := 0; e < n; e++ {
			o := (e*l.C + c) * l.Plane
			for i, v := range x[o : o+l.Plane] {
				g := dy[o+i]
				if v <= 0 {
					da += float64(g) * float64(v)
					g *= a
				}
				if dx != nil {
					dx[o+i] = g
				}
			}
		}
		l.da[c] += float32(da)
	}
}
