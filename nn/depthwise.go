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
	l := &depthwise{C: in.C, M: m, H: in.H, W: in.W, k: k, PadT: pad[0], PadL: pad[2], OutH: oh, OutW: ow,
		NoBias: d.NoBias, WeightInit: d.Init, KernelInit: d.KernelInit, BiasInit: d.BiasInit,
		gh: in.H + pad[0] + pad[1], gw: in.W + pad[2] + pad[3]}
	l.g = make([]float32, l.gh*l.gw)
	l.dg = make([]float32, l.gh*l.gw)
	return l, Shape{H: oh, W: ow, C: in.C * m}, nil
}

// bound: the weights grow with the channels and the multiplier, the
// scratch (two padded planes) with the padding.
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
	if plane := float64(in.H+pad[0]+pad[1]) * float64(in.W+pad[2]+pad[3]); 2*plane > maxConvScratch {
		return Shape{}, 0, false, fmt.Errorf("a padded plane of %.3g floats (%d at most)", plane, maxConvScratch/2)
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

// scratch: two padded planes, whatever the batch.
func (d DepthwiseConv2D) scratch(in Shape, _ int) int64 {
	_, _, _, pad, err := d.check(in)
	if err != nil {
		return 0
	}
	return 2 * int64(in.H+pad[0]+pad[1]) * int64(in.W+pad[2]+pad[3])
}

// depthwise computes DepthwiseConv2D on C×H×W inputs: output channel
// o = c·M+m is input channel c convolved with kernel o (KH×KW, weights
// o·KH·KW …) plus bias o. Each input plane is laid out with its padding
// on a grid g of gh×gw, and output (oy, ox) sums kernel tap (ky, kx)
// times g at row oy·SH+ky·DH, column ox·SW+kx·DW: a row at a time, one
// tap at a time, so that the inner loop is a scaled add along a row. A
// depthwise kernel has few taps per output (9 for 3×3), too few for the
// grid products conv2D runs.
type depthwise struct {
	C, M, H, W int
	k          kernel2D
	PadT, PadL int
	OutH, OutW int
	NoBias     bool
	WeightInit Init
	KernelInit *Initializer
	BiasInit   *Initializer
	w, b       []float32
	dw, db     []float32
	gh, gw     int
	g, dg      []float32 // one padded input plane and its gradient
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

// plane lays input plane x out on the grid g; the padding stays zero.
func (l *depthwise) plane(x []float32) {
	for y := 0; y < l.H; y++ {
		copy(l.g[(y+l.PadT)*l.gw+l.PadL:(y+l.PadT)*l.gw+l.PadL+l.W], x[y*l.W:(y+1)*l.W])
	}
}

// row returns the grid's floats that output row oy's tap (ky, kx) reads,
// SW apart: OutW of them from the returned slice's start.
func (l *depthwise) row(g []float32, oy, ky, kx int) []float32 {
	at := (oy*l.k.sh+ky*l.k.dh)*l.gw + kx*l.k.dw
	return g[at : at+(l.OutW-1)*l.k.sw+1]
}

func (l *depthwise) Forward(y, x []float32, n int) {
	hw, ohw, t := l.H*l.W, l.OutH*l.OutW, l.taps()
	sw := l.k.sw
	for e := 0; e < n; e++ {
		for c := 0; c < l.C; c++ {
			l.plane(x[(e*l.C+c)*hw : (e*l.C+c+1)*hw])
			for m := 0; m < l.M; m++ {
				o := c*l.M + m
				var bias float32
				if l.b != nil {
					bias = l.b[o]
				}
				wo := l.w[o*t : (o+1)*t]
				yo := y[(e*l.C*l.M+o)*ohw : (e*l.C*l.M+o+1)*ohw]
				for oy := 0; oy < l.OutH; oy++ {
					yr := yo[oy*l.OutW : (oy+1)*l.OutW]
					for i := range yr {
						yr[i] = bias
					}
					for ky := 0; ky < l.k.kh; ky++ {
						for kx := 0; kx < l.k.kw; kx++ {
							wv, src := wo[ky*l.k.kw+kx], l.row(l.g, oy, ky, kx)
							if sw == 1 {
								src = src[:len(yr)]
								for i, v := range src {
									yr[i] += wv * v
								}
								continue
							}
							for i := range yr {
								yr[i] += wv * src[i*sw]
							}
						}
					}
				}
			}
		}
	}
}

func (l *depthwise) Backward(dx, dy, x, _ []float32, n int) {
	hw, ohw, t := l.H*l.W, l.OutH*l.OutW, l.taps()
	sw := l.k.sw
	for e := 0; e < n; e++ {
		for c := 0; c < l.C; c++ {
			l.plane(x[(e*l.C+c)*hw : (e*l.C+c+1)*hw])
			if dx != nil {
				clear(l.dg)
			}
			for m := 0; m < l.M; m++ {
				o := c*l.M + m
				wo, dwo := l.w[o*t:(o+1)*t], l.dw[o*t:(o+1)*t]
				do := dy[(e*l.C*l.M+o)*ohw : (e*l.C*l.M+o+1)*ohw]
				if l.db != nil {
					var s float32
					for _, v := range do {
						s += v
					}
					l.db[o] += s
				}
				for oy := 0; oy < l.OutH; oy++ {
					dr := do[oy*l.OutW : (oy+1)*l.OutW]
					for ky := 0; ky < l.k.kh; ky++ {
						for kx := 0; kx < l.k.kw; kx++ {
							tap := ky*l.k.kw + kx
							src := l.row(l.g, oy, ky, kx)
							var s float32
							for i, g := range dr {
								s += g * src[i*sw]
							}
							dwo[tap] += s
							if dx == nil {
								continue
							}
							dst, wv := l.row(l.dg, oy, ky, kx), wo[tap]
							for i, g := range dr {
								dst[i*sw] += wv * g
							}
						}
					}
				}
			}
			if dx != nil {
				dxc := dx[(e*l.C+c)*hw : (e*l.C+c+1)*hw]
				for y := 0; y < l.H; y++ {
					copy(dxc[y*l.W:(y+1)*l.W], l.dg[(y+l.PadT)*l.gw+l.PadL:])
				}
			}
		}
	}
}
