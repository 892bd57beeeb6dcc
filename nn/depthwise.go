package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// DepthwiseConv2D convolves each input channel on its own with
// Multiplier kernels (0 means 1) of Kernel×Kernel, giving InC·Multiplier
// output channels, output channel c·Multiplier+m from input channel c, as
// Keras's DepthwiseConv2D and PyTorch's Conv2d(groups=InC) do; the first
// half of MobileNet's separable convolutions. The window's options are
// Conv2D's (KernelW, Strides, StridesW, Dilation, DilationW, Padding with
// TensorFlow's same padding over the dilated reach), and so are NoBias,
// Init, KernelInit and BiasInit.
//
// Its tensors are PyTorch's Conv2d(InC, InC·Multiplier, groups=InC):
// weight [InC·Multiplier 1 KH KW] and bias [InC·Multiplier] (none with
// NoBias); Keras's depthwise_kernel [KH KW InC Multiplier] holds weight
// (c·Multiplier+m, 0, ky, kx) at (ky, kx, c, m). The initializers draw
// with Keras's fans for that kernel (fan in InC·KH·KW, fan out
// Multiplier·KH·KW); nn's own Init rules with PyTorch's (KH·KW and
// Multiplier·KH·KW).
type DepthwiseConv2D struct {
	Kernel, Strides, Multiplier            int
	Padding                                Padding
	KernelW, StridesW, Dilation, DilationW int
	NoBias                                 bool
	Init                                   Init   // of the weights (He, the zero value, Glorot or Torch)
	Name                                   string // the tensors' prefix; "" for the layer's index
	KernelInit, BiasInit                   *Initializer
}

func (DepthwiseConv2D) kind() string   { return "depthwise_conv2d" }
func (d DepthwiseConv2D) name() string { return d.Name }

// conv is d's window as a Conv2D's, whose options and checks it shares.
func (d DepthwiseConv2D) conv() Conv2D {
	return Conv2D{Filters: max(d.Multiplier, 1), Kernel: d.Kernel, Strides: d.Strides, Padding: d.Padding,
		KernelW: d.KernelW, StridesW: d.StridesW, Dilation: d.Dilation, DilationW: d.DilationW}
}

func (d DepthwiseConv2D) check(in Shape) (kernel2D, int, int, [4]int, error) {
	if in.vector() {
		return kernel2D{}, 0, 0, [4]int{}, errVector
	}
	if d.Multiplier < 0 || d.Multiplier > maxExample {
		return kernel2D{}, 0, 0, [4]int{}, fmt.Errorf("depth multiplier %d: want 1 … %d (0 for 1)", d.Multiplier, maxExample)
	}
	c := d.conv()
	if err := c.checkOptions(); err != nil {
		return kernel2D{}, 0, 0, [4]int{}, err
	}
	k := c.kernel()
	oh, ow, pad, err := k.place(in, d.Padding)
	return k, oh, ow, pad, err
}

func (d DepthwiseConv2D) build(in Shape) (layer, Shape, error) {
	k, oh, ow, pad, err := d.check(in)
	if err != nil {
		return nil, Shape{}, err
	}
	if err := checkInits(d.KernelInit, d.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	m := max(d.Multiplier, 1)
	l := newDepthwise(in.C, m, in.H, in.W, k, pad)
	l.NoBias, l.WeightInit, l.KernelInit, l.BiasInit = d.NoBias, d.Init, d.KernelInit, d.BiasInit
	l.unit.NoBias = d.NoBias // its backward pass clears the scratch bias gradient
	if l.OutH != oh || l.OutW != ow {
		panic("nn: depthwise's output size disagrees with its spec's")
	}
	return l, Shape{H: oh, W: ow, C: in.C * m}, nil
}

// bound: the weights grow with the channels and the multiplier, the
// unit's scratch (its taps and multiplier times the padded plane) with
// the kernel and the padding.
func (d DepthwiseConv2D) bound(in Shape) (Shape, int, bool, error) {
	k, oh, ow, pad, err := d.check(in)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	m := max(d.Multiplier, 1)
	out := float64(in.C) * float64(m)
	if out > maxExample {
		return Shape{}, 0, false, fmt.Errorf("%d channels times a depth multiplier of %d", in.C, m)
	}
	plane := float64(in.H+pad[0]+pad[1]) * float64(in.W+pad[2]+pad[3])
	if scratch := (float64(k.kh)*float64(k.kw) + float64(m) + 3) * plane; scratch > maxConvScratch {
		return Shape{}, 0, false, fmt.Errorf("a kernel of %v and a depth multiplier of %d over %v need %.3g floats of scratch (%d at most)", k, m, in, scratch, maxConvScratch)
	}
	w := out * float64(k.kh) * float64(k.kw)
	if !d.NoBias {
		w += out
	}
	if w > MaxParams {
		return Shape{}, 0, false, fmt.Errorf("%.3g parameters (%d at most)", w, MaxParams)
	}
	return Shape{H: oh, W: ow, C: int(out)}, int(w), true, nil
}

// depthwiseJSON is DepthwiseConv2D's JSON, the window's options as
// Conv2D writes them.
type depthwiseJSON struct {
	Type       string       `json:"type"`
	Kernel     int          `json:"kernel"`
	Strides    int          `json:"strides"`
	Multiplier int          `json:"multiplier"`
	Padding    string       `json:"padding"`
	Init       string       `json:"init"`
	KernelInit *Initializer `json:"kernel_initializer,omitempty"`
	BiasInit   *Initializer `json:"bias_initializer,omitempty"`
	Name       string       `json:"name,omitempty"`
	KernelW    int          `json:"kernel_w,omitempty"`
	StridesW   int          `json:"strides_w,omitempty"`
	Dilation   int          `json:"dilation,omitempty"`
	DilationW  int          `json:"dilation_w,omitempty"`
	NoBias     bool         `json:"no_bias,omitempty"`
}

func init() {
	register("depthwise_conv2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j depthwiseJSON) (LayerSpec, error) {
			init, err := parseInit(j.Init)
			if err != nil {
				return nil, err
			}
			pad, err := parsePadding(j.Padding)
			if err != nil {
				return nil, err
			}
			return DepthwiseConv2D{Kernel: j.Kernel, Strides: j.Strides, Multiplier: j.Multiplier, Padding: pad,
				KernelW: j.KernelW, StridesW: j.StridesW, Dilation: j.Dilation, DilationW: j.DilationW, NoBias: j.NoBias,
				Init: init, Name: j.Name, KernelInit: j.KernelInit, BiasInit: j.BiasInit}, nil
		})
	})
}

func (d DepthwiseConv2D) encode() (any, error) {
	init, err := initName(d.Init)
	if err != nil {
		return nil, err
	}
	k := d.conv().kernel()
	return depthwiseJSON{Type: d.kind(), Kernel: d.Kernel, Strides: k.sh, Multiplier: max(d.Multiplier, 1), Padding: d.Padding.String(),
		Init: init, KernelInit: d.KernelInit, BiasInit: d.BiasInit, Name: d.Name,
		KernelW: unlessEqual(k.kw, k.kh), StridesW: unlessEqual(k.sw, k.sh), Dilation: unlessEqual(k.dh, 1), DilationW: unlessEqual(k.dw, k.dh), NoBias: d.NoBias}, nil
}

// scratch: the unit's, a convolution of one input channel (one grid,
// whatever the batch).
func (d DepthwiseConv2D) scratch(in Shape, _ int) int64 {
	k, _, _, pad, err := d.check(in)
	if err != nil {
		return 0
	}
	plane := int64(in.H+pad[0]+pad[1]) * int64(in.W+pad[2]+pad[3])
	return (int64(k.kh*k.kw) + int64(max(d.Multiplier, 1)) + 3) * plane
}

// depthwise computes DepthwiseConv2D on C×H×W inputs: output channel
// o = c·M+m is input channel c convolved with kernel o (KH×KW, weights
// o·KH·KW …) plus bias o. Each input channel, with its M kernels, is a
// convolution of one input channel and M output channels, whose weights
// and biases are consecutive in the layer's: one conv2D (unit), pointed
// at channel c's weights in turn, computes them all on its grid with the
// offset kernels (see conv2D), sharing its scratch.
type depthwise struct {
	C, M, H, W int
	OutH, OutW int
	NoBias     bool
	WeightInit Init
	KernelInit *Initializer
	BiasInit   *Initializer
	k          kernel2D
	w, b       []float32
	dw, db     []float32
	unit       *conv2D
	zeros      []float32 // the unit's bias and its gradient without NoBias's
}

func newDepthwise(c, m, h, w int, k kernel2D, pad [4]int) *depthwise {
	u := newConvK(1, h, w, m, k, pad)
	return &depthwise{C: c, M: m, H: h, W: w, OutH: u.OutH, OutW: u.OutW, k: k, unit: u, zeros: make([]float32, 2*m)}
}

func (l *depthwise) InSize() int  { return l.C * l.H * l.W }
func (l *depthwise) OutSize() int { return l.C * l.M * l.OutH * l.OutW }
func (l *depthwise) taps() int    { return l.k.kh * l.k.kw }

func (l *depthwise) NumParams() int {
	if l.NoBias {
		return l.C * l.M * l.taps()
	}
	return l.C * l.M * (l.taps() + 1)
}

// ParamShapes is PyTorch's Conv2d(groups=C): weight [C·M 1 KH KW], bias
// [C·M].
func (l *depthwise) ParamShapes() [][]int {
	w := []int{l.C * l.M, 1, l.k.kh, l.k.kw}
	if l.NoBias {
		return [][]int{w}
	}
	return [][]int{w, {l.C * l.M}}
}

func (l *depthwise) Bind(params, grads []float32) {
	nw := l.C * l.M * l.taps()
	l.w, l.dw = params[:nw:nw], grads[:nw:nw]
	if l.NoBias {
		l.b, l.db = nil, nil
		return
	}
	l.b, l.db = params[nw:l.NumParams()], grads[nw:l.NumParams()]
}

func (l *depthwise) Init(rng *rand.Rand) {
	t := l.taps()
	if l.KernelInit != nil || l.BiasInit != nil {
		// Keras's fans for the depthwise kernel [KH KW C M].
		initParams(rng, l.w, l.b, l.WeightInit, l.KernelInit, l.BiasInit, l.C*t, l.M*t)
		return
	}
	initParams(rng, l.w, l.b, l.WeightInit, nil, nil, t, l.M*t)
}

// channel points the unit at input channel c's kernels and biases.
func (l *depthwise) channel(c int) {
	u, mt := l.unit, l.M*l.taps()
	u.w, u.dw = l.w[c*mt:(c+1)*mt], l.dw[c*mt:(c+1)*mt]
	if l.NoBias {
		// Zeros, and a gradient the unit's backward pass clears.
		u.b, u.db = l.zeros[:l.M], l.zeros[l.M:]
		clear(u.b)
		return
	}
	u.b, u.db = l.b[c*l.M:(c+1)*l.M], l.db[c*l.M:(c+1)*l.M]
}

func (l *depthwise) Forward(y, x []float32, n int) {
	hw, out := l.H*l.W, l.M*l.OutH*l.OutW
	for c := 0; c < l.C; c++ {
		l.channel(c)
		for e := 0; e < n; e++ {
			l.unit.Forward(y[(e*l.C+c)*out:(e*l.C+c+1)*out], x[(e*l.C+c)*hw:(e*l.C+c+1)*hw], 1)
		}
	}
}

func (l *depthwise) Backward(dx, dy, x, y []float32, n int) {
	hw, out := l.H*l.W, l.M*l.OutH*l.OutW
	for c := 0; c < l.C; c++ {
		l.channel(c)
		for e := 0; e < n; e++ {
			var dxe []float32
			if dx != nil {
				dxe = dx[(e*l.C+c)*hw : (e*l.C+c+1)*hw]
			}
			l.unit.Backward(dxe, dy[(e*l.C+c)*out:(e*l.C+c+1)*out], x[(e*l.C+c)*hw:(e*l.C+c+1)*hw], y[(e*l.C+c)*out:(e*l.C+c+1)*out], 1)
		}
	}
}
