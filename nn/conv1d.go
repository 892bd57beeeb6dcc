package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
)

// Causal pads a sequence only before its first step, by the dilated
// kernel's span less one, so that output t depends on steps up to t and
// the output has ⌈L/stride⌉ steps (Keras's Conv1D padding "causal").
// Only Conv1D takes it.
const Causal Padding = Same + 1

// Conv1D is a 1-D convolution over a sequence (1×L×C, planar C×L; see
// Shape): Filters output channels, each a window of Kernel steps over all
// input channels (taps Dilation steps apart) plus a bias, moved Strides
// steps at a time, with Valid, Same (TensorFlow's: the odd step of
// padding after) or Causal padding. Its output is the sequence
// 1×L'×Filters.
//
// Its tensors are weight [Filters C Kernel] and bias [Filters] (none
// with NoBias), as PyTorch's Conv1d; Keras's kernel [Kernel C Filters]
// holds the same floats transposed.
type Conv1D struct {
	Filters, Kernel int
	Strides         int // 0 for 1
	Padding         Padding
	Dilation        int  // 0 for 1
	NoBias          bool // Keras's use_bias false
	Init            Init // of the weights, unless KernelInit is set
	// KernelInit and BiasInit are as Conv2D's; the fans are the channels
	// in and out, each times Kernel.
	KernelInit, BiasInit *Initializer
	Name                 string // the tensors' prefix; "" for the layer's index
}

func (Conv1D) kind() string   { return "conv1d" }
func (c Conv1D) name() string { return c.Name }

// conv1DJSON is Conv1D's JSON, every option written out.
type conv1DJSON struct {
	Type       string       `json:"type"`
	Filters    int          `json:"filters"`
	Kernel     int          `json:"kernel"`
	Strides    int          `json:"strides"`
	Padding    string       `json:"padding"`
	Dilation   int          `json:"dilation"`
	UseBias    bool         `json:"use_bias"`
	Init       string       `json:"init"`
	KernelInit *Initializer `json:"kernel_initializer,omitempty"`
	BiasInit   *Initializer `json:"bias_initializer,omitempty"`
	Name       string       `json:"name,omitempty"`
}

func init() {
	register("conv1d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j conv1DJSON) (LayerSpec, error) {
			init, err := parseInit(j.Init)
			if err != nil {
				return nil, err
			}
			pad := Causal
			if j.Padding != "causal" {
				if pad, err = parsePadding(j.Padding); err != nil {
					return nil, fmt.Errorf("%w (or causal)", err)
				}
			}
			return Conv1D{Filters: j.Filters, Kernel: j.Kernel, Strides: j.Strides, Padding: pad, Dilation: j.Dilation, NoBias: !j.UseBias,
				Init: init, KernelInit: j.KernelInit, BiasInit: j.BiasInit, Name: j.Name}, nil
		})
	})
}

func (c Conv1D) encode() (any, error) {
	init, err := initName(c.Init)
	if err != nil {
		return nil, err
	}
	return conv1DJSON{Type: c.kind(), Filters: c.Filters, Kernel: c.Kernel, Strides: max(c.Strides, 1), Padding: c.Padding.String(),
		Dilation: max(c.Dilation, 1), UseBias: !c.NoBias, Init: init, KernelInit: c.KernelInit, BiasInit: c.BiasInit, Name: c.Name}, nil
}

// errNotSequence is the error of a 1-D layer given anything but a
// sequence.
func errNotSequence(in Shape) error {
	return fmt.Errorf("the input is %v: it takes a sequence, 1×L×C (an Embedding's output, or a Reshape to [1, L, C])", in)
}

// geometry returns the output length and the padding before the first
// step, for an input of L steps.
func (c Conv1D) geometry(in Shape) (out, before int, err error) {
	if in.vector() || in.H != 1 {
		return 0, 0, errNotSequence(in)
	}
	if c.Filters < 1 || c.Kernel < 1 || c.Strides < 0 || c.Dilation < 0 || c.Filters > maxExample || c.Kernel > maxExample || c.Strides > maxExample || c.Dilation > maxExample {
		return 0, 0, fmt.Errorf("%d filters of %d steps, stride %d, dilation %d: want at least 1 filter of 1 step, and a stride and a dilation ≥ 0 (0 for 1), each at most %d", c.Filters, c.Kernel, c.Strides, c.Dilation, maxExample)
	}
	s, span := max(c.Strides, 1), (c.Kernel-1)*max(c.Dilation, 1)+1
	if c.Padding == Causal {
		return (in.W-1)/s + 1, span - 1, nil
	}
	out, before, _, err = window(in.W, span, s, c.Padding)
	if err != nil {
		return 0, 0, fmt.Errorf("a kernel spanning %d steps over %v: %w", span, in, err)
	}
	return out, before, nil
}

func (c Conv1D) build(in Shape) (layer, Shape, error) {
	out, before, err := c.geometry(in)
	if err != nil {
		return nil, Shape{}, err
	}
	if err := checkInits(c.KernelInit, c.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	l := &conv1D{C: in.C, L: in.W, F: c.Filters, K: c.Kernel, S: max(c.Strides, 1), D: max(c.Dilation, 1), Before: before, Out: out,
		Bias: !c.NoBias, WeightInit: c.Init, KernelInit: c.KernelInit, BiasInit: c.BiasInit}
	return l, Shape{H: 1, W: out, C: c.Filters}, nil
}

// bound: the weights grow with the filters, channels and kernel; the
// scratch (the unrolled input, C·Kernel × L') and the output with them
// and the length.
func (c Conv1D) bound(in Shape) (Shape, int, bool, error) {
	out, _, err := c.geometry(in)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	taps := float64(in.C) * float64(c.Kernel)
	if w := taps*float64(c.Filters) + float64(c.Filters); w > MaxParams {
		return Shape{}, 0, false, fmt.Errorf("%d filters of %d steps over %d channels: %.3g parameters (%d at most)", c.Filters, c.Kernel, in.C, w, MaxParams)
	}
	if s := taps * float64(out); s > maxConvScratch {
		return Shape{}, 0, false, fmt.Errorf("%d steps of %d taps need %.3g floats of scratch (%d at most)", out, int(taps), s, maxConvScratch)
	}
	params := in.C * c.Kernel * c.Filters
	if !c.NoBias {
		params += c.Filters
	}
	return Shape{H: 1, W: out, C: c.Filters}, params, true, nil
}

// conv1D is Conv1D over C channels of L steps, F filters of K taps D
// steps apart, stride S, Before steps of zeros before the input (and as
// many after as the Out outputs need). Weights are F×C×K, then F biases
// when Bias.
//
// Each example's input is unrolled into cols, (C·K)×Out, row (c, k)
// holding the input step t·S + k·D − Before of channel c for each output
// t (zero outside the input), so that the output is one product W·cols,
// the weight gradient dy·colsᵀ, and the input's gradient Wᵀ·dy folded
// back onto the steps the columns came from. Backward unrolls the input
// again rather than keep a batch of cols, and transposed (Out×(C·K)), so
// that the weight gradient is an A·B product (gemmNN's register tiles)
// rather than A·Bᵀ's dot products: a text classifier's training step
// (Embedding 10000×64 on 200 ids, Conv1D 128×5, batch 32, one thread)
// went from 75–104 to 67–77 ms of CPU, A·Bᵀ having been 42% of it.
type conv1D struct {
	C, L, F, K, S, D, Before, Out int
	Bias                          bool
	WeightInit                    Init
	KernelInit, BiasInit          *Initializer

	w, b, dw, db []float32
	cols, dcols  []float32 // (C·K)×Out scratch
	wt           []float32 // (C·K)×F: the weights transposed, for dx
}

func (l *conv1D) InSize() int  { return l.C * l.L }
func (l *conv1D) OutSize() int { return l.F * l.Out }

func (l *conv1D) NumParams() int {
	if l.Bias {
		return l.F*l.C*l.K + l.F
	}
	return l.F * l.C * l.K
}

// ParamShapes is PyTorch's Conv1d: weight [F C K], bias [F].
func (l *conv1D) ParamShapes() [][]int {
	if l.Bias {
		return [][]int{{l.F, l.C, l.K}, {l.F}}
	}
	return [][]int{{l.F, l.C, l.K}}
}

func (l *conv1D) paramNames() []string { return []string{"weight", "bias"}[:len(l.ParamShapes())] }

func (l *conv1D) Bind(params, grads []float32) {
	nw := l.F * l.C * l.K
	l.w, l.dw = params[:nw:nw], grads[:nw:nw]
	if l.Bias {
		l.b, l.db = params[nw:nw+l.F:nw+l.F], grads[nw:nw+l.F:nw+l.F]
	}
}

func (l *conv1D) Init(rng *rand.Rand) {
	initParams(rng, l.w, l.b, l.WeightInit, l.KernelInit, l.BiasInit, l.C*l.K, l.F*l.K)
}

// unrollT writes example x's cols transposed: row t holds, for each
// channel c, its K taps of output t.
func (l *conv1D) unrollT(colsT, x []float32) {
	ck := l.C * l.K
	for t := 0; t < l.Out; t++ {
		row := colsT[t*ck : (t+1)*ck]
		p0 := t*l.S - l.Before
		for c := 0; c < l.C; c++ {
			xc, taps := x[c*l.L:(c+1)*l.L], row[c*l.K:(c+1)*l.K]
			if l.D == 1 && p0 >= 0 && p0+l.K <= l.L {
				copy(taps, xc[p0:p0+l.K])
				continue
			}
			for k := range taps {
				if p := p0 + k*l.D; p >= 0 && p < l.L {
					taps[k] = xc[p]
				} else {
					taps[k] = 0
				}
			}
		}
	}
}

// unroll writes example x's cols.
func (l *conv1D) unroll(cols, x []float32) {
	for c := 0; c < l.C; c++ {
		xc := x[c*l.L : (c+1)*l.L]
		for k := 0; k < l.K; k++ {
			row := cols[(c*l.K+k)*l.Out : (c*l.K+k+1)*l.Out]
			p := k*l.D - l.Before
			for t := range row {
				if p >= 0 && p < l.L {
					row[t] = xc[p]
				} else {
					row[t] = 0
				}
				p += l.S
			}
		}
	}
}

func (l *conv1D) Forward(y, x []float32, n int) {
	ck := l.C * l.K
	l.cols = grow(l.cols, ck*l.Out)
	for e := 0; e < n; e++ {
		ye := y[e*l.F*l.Out : (e+1)*l.F*l.Out]
		l.unroll(l.cols, x[e*l.C*l.L:(e+1)*l.C*l.L])
		gemmNN(l.F, l.Out, ck, l.w, ck, l.cols, l.Out, ye, l.Out, false)
		for f, b := range l.b {
			row := ye[f*l.Out : (f+1)*l.Out]
			for t := range row {
				row[t] += b
			}
		}
	}
}

func (l *conv1D) Backward(dx, dy, x, _ []float32, n int) {
	ck := l.C * l.K
	l.cols = grow(l.cols, ck*l.Out)
	if dx != nil {
		l.dcols, l.wt = grow(l.dcols, ck*l.Out), grow(l.wt, ck*l.F)
		for f := 0; f < l.F; f++ {
			for j, v := range l.w[f*ck : (f+1)*ck] {
				l.wt[j*l.F+f] = v
			}
		}
	}
	for e := 0; e < n; e++ {
		de := dy[e*l.F*l.Out : (e+1)*l.F*l.Out]
		for f := range l.db {
			var s float32
			for _, g := range de[f*l.Out : (f+1)*l.Out] {
				s += g
			}
			l.db[f] += s
		}
		l.unrollT(l.cols, x[e*l.C*l.L:(e+1)*l.C*l.L])
		gemmNN(l.F, ck, l.Out, de, l.Out, l.cols, ck, l.dw, ck, true)
		if dx == nil {
			continue
		}
		gemmNN(ck, l.Out, l.F, l.wt, l.F, de, l.Out, l.dcols, l.Out, false)
		dxe := dx[e*l.C*l.L : (e+1)*l.C*l.L]
		clear(dxe)
		for c := 0; c < l.C; c++ {
			dc := dxe[c*l.L : (c+1)*l.L]
			for k := 0; k < l.K; k++ {
				row := l.dcols[(c*l.K+k)*l.Out : (c*l.K+k+1)*l.Out]
				p := k*l.D - l.Before
				for _, g := range row {
					if p >= 0 && p < l.L {
						dc[p] += g
					}
					p += l.S
				}
			}
		}
	}
}
