package nn

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"

	"github.com/meshtrain/meshtrain/nn/internal/wino"
)

// Conv2D is a 2-D convolution: Filters output channels, each a
// Kernel×Kernel window over all input channels plus a bias, moved Strides
// cells at a time (0 means 1), with Valid or Same padding. Its tensors
// are weight [Filters InC KH KW] and bias [Filters], as PyTorch's Conv2d
// (with NoBias, weight alone, as Conv2d(bias=False)).
//
// The window may be taller than wide, strided differently along each
// axis and dilated (Keras's kernel_size (kh, kw), strides (sh, sw) and
// dilation_rate): KernelW, StridesW and DilationW, when not 0, are the
// width's, Kernel, Strides and Dilation then being the height's; a
// dilation d spreads the taps d cells apart, so the kernel reaches
// (k−1)·d+1 cells, and Same padding pads for that reach as TensorFlow
// does. The options at their zero values are the square, undilated,
// biased convolution, and are left out of its JSON.
type Conv2D struct {
	Filters, Kernel, Strides int
	Padding                  Padding
	Init                     Init   // of the weights (He, the zero value, Glorot or Torch)
	Name                     string // the tensors' prefix; "" for the layer's index
	// KernelInit and BiasInit, if set, draw the weights and the biases
	// instead of Init's rule (Keras's kernel_initializer and
	// bias_initializer; see Initializer).
	KernelInit, BiasInit *Initializer

	// KernelW and StridesW are the width's kernel size and stride (0:
	// Kernel's and Strides'); Dilation and DilationW the dilation along
	// the height (0 for 1) and the width (0: Dilation's).
	KernelW, StridesW, Dilation, DilationW int
	// NoBias drops the bias (Keras's use_bias false).
	NoBias bool
}

func (Conv2D) kind() string   { return "conv2d" }
func (c Conv2D) name() string { return c.Name }

func init() { register("conv2d", decodeConv2D) }

// kernel is c's window with the defaults filled in.
func (c Conv2D) kernel() kernel2D {
	sh, dh := max(c.Strides, 1), max(c.Dilation, 1)
	return kernel2D{kh: c.Kernel, kw: or(c.KernelW, c.Kernel), sh: sh, sw: or(c.StridesW, sh), dh: dh, dw: or(c.DilationW, dh)}
}

// checkOptions refuses options out of range, in the words of the spec's
// fields.
func (c Conv2D) checkOptions() error {
	if c.Filters < 1 || c.Kernel < 1 || c.Strides < 0 {
		return fmt.Errorf("%d filters of %d×%d with stride %d: want at least 1 filter of 1×1 and a stride ≥ 0 (0 for 1)", c.Filters, c.Kernel, c.Kernel, c.Strides)
	}
	if c.KernelW < 0 || c.StridesW < 0 || c.Dilation < 0 || c.DilationW < 0 {
		return fmt.Errorf("kernel width %d, stride %d, dilation %d×%d: want each ≥ 0 (0 for the height's, or 1)", c.KernelW, c.StridesW, c.Dilation, c.DilationW)
	}
	return c.kernel().check()
}

func (c Conv2D) build(in Shape) (layer, Shape, error) {
	if in.vector() {
		return nil, Shape{}, errVector
	}
	if err := c.checkOptions(); err != nil {
		return nil, Shape{}, err
	}
	k := c.kernel()
	oh, ow, pad, err := k.place(in, c.Padding)
	if err != nil {
		return nil, Shape{}, err
	}
	if err := checkInits(c.KernelInit, c.BiasInit); err != nil {
		return nil, Shape{}, err
	}
	l := newConvK(in.C, in.H, in.W, c.Filters, k, pad)
	l.WeightInit, l.KernelInit, l.BiasInit, l.NoBias = c.Init, c.KernelInit, c.BiasInit, c.NoBias
	if l.OutH != oh || l.OutW != ow {
		panic("nn: conv2D's output size disagrees with its spec's")
	}
	return l, Shape{H: oh, W: ow, C: c.Filters}, nil
}

// bound: a convolution's weights and its grids' scratch (its taps and
// output channels times its padded input plane) grow with its options.
func (c Conv2D) bound(in Shape) (Shape, int, bool, error) {
	if in.vector() || c.Filters < 1 || c.Kernel < 1 || c.Strides < 0 {
		return Shape{}, 0, false, nil
	}
	if c.Filters > maxExample || c.Kernel > maxExample {
		return Shape{}, 0, false, fmt.Errorf("%d filters of %d×%d", c.Filters, c.Kernel, c.Kernel)
	}
	if err := c.checkOptions(); err != nil {
		return Shape{}, 0, false, nil
	}
	k := c.kernel()
	oh, ow, pad, err := k.place(in, c.Padding)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	taps := float64(in.C) * float64(k.kh) * float64(k.kw)
	plane := float64(in.H+pad[0]+pad[1]) * float64(in.W+pad[2]+pad[3])
	if scratch := (taps + float64(c.Filters) + 2) * plane; scratch > maxConvScratch {
		return Shape{}, 0, false, fmt.Errorf("%d filters of %v over %v need %.3g floats of scratch (%d at most)", c.Filters, k, in, scratch, maxConvScratch)
	}
	bias := c.Filters
	if c.NoBias {
		bias = 0
	}
	if w := taps*float64(c.Filters) + float64(bias); w > MaxParams {
		return Shape{}, 0, false, fmt.Errorf("%.3g parameters (%d at most)", w, MaxParams)
	}
	return Shape{H: oh, W: ow, C: c.Filters}, int(taps)*c.Filters + bias, true, nil
}

// conv2DJSON is Conv2D's JSON. The fields after Name are written only
// when they differ from the square, undilated, biased convolution's, so
// that the JSON (and digest) of such a convolution is what it was before
// they existed.
type conv2DJSON struct {
	Type       string       `json:"type"`
	Filters    int          `json:"filters"`
	Kernel     int          `json:"kernel"`
	Strides    int          `json:"strides"`
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

// unlessEqual is v, or 0 (left out) when it is def.
func unlessEqual(v, def int) int {
	if v == def {
		return 0
	}
	return v
}

func (c Conv2D) encode() (any, error) {
	init, err := initName(c.Init)
	if err != nil {
		return nil, err
	}
	k := c.kernel()
	return conv2DJSON{Type: c.kind(), Filters: c.Filters, Kernel: c.Kernel, Strides: k.sh, Padding: c.Padding.String(),
		Init: init, KernelInit: c.KernelInit, BiasInit: c.BiasInit, Name: c.Name,
		KernelW: unlessEqual(k.kw, k.kh), StridesW: unlessEqual(k.sw, k.sh), Dilation: unlessEqual(k.dh, 1), DilationW: unlessEqual(k.dw, k.dh), NoBias: c.NoBias}, nil
}

func decodeConv2D(raw json.RawMessage) (LayerSpec, error) {
	return decodeAs(raw, func(j conv2DJSON) (LayerSpec, error) {
		init, err := parseInit(j.Init)
		if err != nil {
			return nil, err
		}
		pad, err := parsePadding(j.Padding)
		if err != nil {
			return nil, err
		}
		return Conv2D{Filters: j.Filters, Kernel: j.Kernel, Strides: j.Strides, Padding: pad, Init: init, KernelInit: j.KernelInit, BiasInit: j.BiasInit, Name: j.Name,
			KernelW: j.KernelW, StridesW: j.StridesW, Dilation: j.Dilation, DilationW: j.DilationW, NoBias: j.NoBias}, nil
	})
}

// conv2D is a 2-D convolution with a KH×KW kernel whose taps are DH rows
// and DW columns apart (dilation), strides SH and SW, and zero padding:
// PadT rows above the input, PadL columns left of it, and below and right
// as many as the constructor was given. Weights are OutC×InC×KH×KW
// (PyTorch's layout), then OutC biases unless NoBias. Below, K stands for
// the kernel's reach along an axis, (K−1)·D+1, and S for either stride.
//
// It is computed on a grid: each example's input is laid out with its
// padding, GW floats a row, and the stride-1 output is computed at every
// grid position p = oy·GW+ox, including the K−1 columns past the last
// output column that wrap into the next row (junk, dropped). Kernel tap
// (ci,ky,kx) then reads the input at the fixed offset
// ci·plane+ky·DH·GW+kx·DW from p, so the products read shifted windows of the input through a
// table of offsets (kernConv6x16, kernConvNT3x4) instead of an im2col
// matrix, whose copies cost more than the few wasted columns. For the
// gradients, dy is placed on the same grid with zeros in the junk columns,
// which then add nothing. A stride S > 1 keeps every S-th row and column
// of the stride-1 output (and places dy there, zeros between): S² the
// products of a direct strided convolution, which the offset kernels
// cannot read; LeNet's convolutions have stride 1.
type conv2D struct {
	InC, InH, InW, OutC    int
	KH, KW, SH, SW, DH, DW int
	PadT, PadL             int
	OutH, OutW             int
	WeightInit             Init
	NoBias                 bool // b and db are zeros of the layer's own, not parameters
	// KernelInit and BiasInit, if set, draw the weights and the biases
	// instead of WeightInit's rule (see initParams).
	KernelInit, BiasInit *Initializer

	w, b, dw, db []float32

	gw, plane  int // grid row width and plane size
	orow, ocol int // grid distance between output rows and columns
	// A convolution of stride 2 along both axes and no dilation is
	// phased: each channel's padded input is laid out as its four
	// phases (even rows' even columns, even rows' odd columns, odd rows'
	// even, odd rows' odd), pplane floats each, pgw a row. Tap (ky, kx)
	// then reads phase (ky mod 2, kx mod 2) at (ky/2, kx/2) cells from
	// output (oy, ox), a stride-1 window: the output grid is dense
	// (ocol 1, orow pgw) and computes a quarter of the positions the
	// stride-1 grid would.
	phased      bool
	pgw, pplane int
	fh, fw      int   // rows and columns of the stride-1 output
	padded      bool  // any padding: the input gradient goes through dxg
	np          int   // grid positions computed, a multiple of 16
	glen        int   // floats per example grid, covering every read
	mp          int   // rows of wpad and yg: OutC rounded up to even, ≥ 4
	offs        []int // grid offsets of the kernel taps (padding taps 0)
	rowOffs     []int // offsets of dyg's rows
	wpad        []float32
	wT          []float32  // InC·KH·KW × OutC, transposed weights for the input gradient
	full        *fullGrad  // the input gradient as a full correlation (conv_full.go), or nil
	wino        *wino.Conv // all three passes by Winograd's F(2×2, 3×3) (conv_wino.go), or nil
	// dyg holds channel c's output gradient from dyOff+c·dyStride on
	// (dyOff 0 and dyStride np unless full).
	dyOff, dyStride int
	yg, dyg         []float32 // mp × np and len(rowOffs) × np
	dcolg, dxg      []float32

	// The weight gradient is one product per example, gathered in dwpad
	// (ntM × ntT, padded to the 3×4 tiles): channels × taps, or taps ×
	// channels when tapsMajor, whichever wastes less of the tiles.
	tapsMajor bool
	ntM, ntT  int
	dwpad     []float32

	// With KW ≤ 8, no dilation and many taps the weight gradient can be taken from a
	// sparse output gradient: its non-zero entries of one example are
	// listed (pos, g, ch), grouped by channel, and each adds its input's
	// K×K window, 8 floats per (ci, ky) row, times g onto its channel's
	// rows of dwp. Sparse pays where a window has many taps to amortise
	// listing it: on LeNet's conv2 (150 taps) it measured faster than the
	// dense product, on conv1 (25 taps) slower. A max-pooling after the
	// convolution leaves at most one gradient per window, a ReLU fewer.
	sparse  bool
	roffs   []int     // InC·KH grid offsets of the (ci, ky) rows
	dwp     []float32 // OutC × InC·KH × 8: the weight gradient by row
	pos, ch []int32
	g       []float32

	// In training mode Forward keeps the grids of the whole batch (xg, n ×
	// glen) for Backward; otherwise xg holds one example.
	train  bool
	xg     []float32
	savedN int
	savedX *float32

	// A batch in chunks (see chunker): examples cFirst … of cBatch.
	cFirst, cBatch int
	listed         bool // a chunk's weight gradient went to dwp
}

func (l *conv2D) chunk(first, batch int) { l.cFirst, l.cBatch = first, batch }

// reads: a chunked Backward reads the grids its Forward kept.
func (l *conv2D) reads() (x, y bool) { return false, false }

// newConv2D returns a stride-1 convolution for InC×InH×InW inputs with pad
// zeros on every side.
func newConv2D(inC, inH, inW, outC, k, pad int) *conv2D {
	return newConv(inC, inH, inW, outC, k, 1, [4]int{pad, pad, pad, pad})
}

// newConv returns a convolution of a square k×k kernel and stride s for
// InC×InH×InW inputs with pad[0], pad[1], pad[2], pad[3] zeros above,
// below, left and right.
func newConv(inC, inH, inW, outC, k, s int, pad [4]int) *conv2D {
	return newConvK(inC, inH, inW, outC, kernel2D{kh: k, kw: k, sh: s, sw: s, dh: 1, dw: 1}, pad)
}

// newConvK returns a convolution of kernel k for InC×InH×InW inputs with
// pad[0], pad[1], pad[2], pad[3] zeros above, below, left and right. A
// kernel reaching past the padded input is a programmer error (the layer
// specs check it first).
func newConvK(inC, inH, inW, outC int, kn kernel2D, pad [4]int) *conv2D {
	gh, gw := inH+pad[0]+pad[1], inW+pad[2]+pad[3]
	rh, rw := kn.reach()
	if kn.check() != nil || rh > gh || rw > gw {
		panic("nn: conv2D kernel larger than the padded input")
	}
	l := &conv2D{InC: inC, InH: inH, InW: inW, OutC: outC, KH: kn.kh, KW: kn.kw, SH: kn.sh, SW: kn.sw, DH: kn.dh, DW: kn.dw,
		PadT: pad[0], PadL: pad[2], gw: gw, fh: gh - rh + 1, fw: gw - rw + 1, padded: pad != [4]int{}}
	l.OutH, l.OutW = (l.fh-1)/kn.sh+1, (l.fw-1)/kn.sw+1
	ckk := inC * kn.kh * kn.kw
	l.plane = gh * gw
	l.orow, l.ocol = kn.sh*gw, kn.sw
	l.phased = kn.sh == 2 && kn.sw == 2 && kn.dh == 1 && kn.dw == 1
	// The pooling kernels read and write whole groups of 16 columns, and
	// the input gradient reads K−1 zeros past the valid positions.
	l.np = (l.fh-1)*l.gw + max((l.fw+15)&^15, l.fw+rw-1)
	l.np = (l.np + 15) &^ 15
	if l.phased {
		l.padded = true // the input gradient goes through dxg
		l.pgw, l.pplane = (gw+1)/2, (gh+1)/2*((gw+1)/2)
		l.plane = 4 * l.pplane
		l.orow, l.ocol = l.pgw, 1
		l.np = ((l.OutH-1)*l.pgw + l.OutW + 15) &^ 15
	}
	l.mp = max(4, (outC+1)&^1)
	r3, r4 := func(v int) int { return (v + 2) / 3 * 3 }, func(v int) int { return (v + 3) &^ 3 }
	l.tapsMajor = r3(ckk)*r4(outC) < r3(outC)*r4(ckk)
	l.ntM, l.ntT = r3(outC), r4(ckk)
	if l.tapsMajor {
		l.ntM, l.ntT = r3(ckk), r4(outC)
	}
	l.offs = make([]int, (ckk+11)/12*12)
	r := 0
	for ci := 0; ci < inC; ci++ {
		for ky := 0; ky < kn.kh; ky++ {
			for kx := 0; kx < kn.kw; kx++ {
				l.offs[r] = ci*l.plane + ky*kn.dh*l.gw + kx*kn.dw
				if l.phased {
					l.offs[r] = ci*l.plane + (ky%2*2+kx%2)*l.pplane + ky/2*l.pgw + kx/2
				}
				r++
			}
		}
	}
	// The sparse kernels touch 8 floats from each tap row.
	l.glen = max(inC*l.plane, l.offs[ckk-1]+l.np) + 8
	l.wpad = make([]float32, l.mp*ckk)
	l.wT = make([]float32, ckk*outC)
	l.yg = make([]float32, l.mp*l.np)
	l.rowOffs = make([]int, (outC+11)/12*12)
	for i := range l.rowOffs {
		l.rowOffs[i] = i * l.np
	}
	l.dyg = make([]float32, len(l.rowOffs)*l.np)
	l.dyStride = l.np
	l.dwpad = make([]float32, l.ntM*l.ntT)
	l.dcolg = make([]float32, dcolPad+ckk*l.np)
	if l.padded {
		l.dxg = make([]float32, l.glen)
	}
	l.xg = make([]float32, l.glen)
	if kn.kw <= 8 && kn.kh <= 8 && kn.dh == 1 && kn.dw == 1 && ckk >= 64 && !l.phased {
		l.sparse = true
		rows := inC * kn.kh
		l.roffs = make([]int, rows)
		for r := range l.roffs {
			l.roffs[r] = r/kn.kh*l.plane + r%kn.kh*l.gw
		}
		l.dwp = make([]float32, outC*rows*8)
		// listNZ writes up to 8 entries past the last.
		out := outC*l.OutH*l.OutW + 8
		l.pos, l.ch, l.g = make([]int32, out), make([]int32, out), make([]float32, out)
	}
	return l
}

// tailTab[t:t+8] selects the last t of 8 lanes.
var tailTab = [16]int32{8: -1, 9: -1, 10: -1, 11: -1, 12: -1, 13: -1, 14: -1, 15: -1}

// packLUT[m] lists the set bits of m, lowest first: the permutation that
// packs the lanes m selects to the front, for listNZ.
var packLUT = func() (t [256][8]int32) {
	for m := range t {
		k := 0
		for i := 0; i < 8; i++ {
			if m>>i&1 != 0 {
				t[m][k] = int32(i)
				k++
			}
		}
	}
	return t
}()

func (l *conv2D) InSize() int  { return l.InC * l.InH * l.InW }
func (l *conv2D) OutSize() int { return l.OutC * l.OutH * l.OutW }
func (l *conv2D) NumParams() int {
	if l.NoBias {
		return l.OutC * l.InC * l.KH * l.KW
	}
	return l.OutC*l.InC*l.KH*l.KW + l.OutC
}

// ParamShapes is PyTorch's Conv2d: weight [OutC InC KH KW], bias [OutC]
// (none with NoBias).
func (l *conv2D) ParamShapes() [][]int {
	if l.NoBias {
		return [][]int{{l.OutC, l.InC, l.KH, l.KW}}
	}
	return [][]int{{l.OutC, l.InC, l.KH, l.KW}, {l.OutC}}
}

func (l *conv2D) Bind(params, grads []float32) {
	nw := l.OutC * l.InC * l.KH * l.KW
	l.w, l.dw = params[:nw:nw], grads[:nw:nw]
	if l.NoBias {
		// A bias of zeros, whose gradient goes to scratch that
		// backwardStart clears: the kernels stay those of a biased layer.
		l.b, l.db = make([]float32, l.OutC), make([]float32, l.OutC)
		return
	}
	l.b, l.db = params[nw:l.NumParams()], grads[nw:l.NumParams()]
}

func (l *conv2D) Init(rng *rand.Rand) {
	kk := l.KH * l.KW
	b := l.b
	if l.NoBias {
		b = nil
	}
	initParams(rng, l.w, b, l.WeightInit, l.KernelInit, l.BiasInit, l.InC*kk, l.OutC*kk)
}

// setTrain switches the keeping of the batch's grids for Backward on or
// off; the model turns it on for training passes only, because an
// evaluation batch's grids would be large.
func (l *conv2D) setTrain(on bool) { l.train = on }

// grid writes one example's input into its grid g. The padding and slack
// are never written, so they stay zero from allocation.
func (l *conv2D) grid(g, x []float32) {
	hw := l.InH * l.InW
	if l.phased {
		l.phase(g, x)
		return
	}
	for ci := 0; ci < l.InC; ci++ {
		copyRows(g[ci*l.plane+l.PadT*l.gw+l.PadL:], l.gw, x[ci*hw:(ci+1)*hw], l.InW, l.InH, l.InW)
	}
}

// grids returns a buffer of n example grids whose padding and slack are
// zero. Grown buffers are new, hence zero.
func (l *conv2D) grids(n int) []float32 {
	if cap(l.xg) < n*l.glen {
		l.xg = make([]float32, n*l.glen)
	}
	return l.xg[:n*l.glen]
}

func (l *conv2D) Forward(y, x []float32, n int) {
	if l.wino != nil {
		l.winoForward(y, x, n)
		return
	}
	in, out, hw := l.InSize(), l.OutSize(), l.OutH*l.OutW
	xg := l.forwardStart(x, n)
	for e := 0; e < n; e++ {
		l.forwardGrid(l.exampleGrid(xg, e), x[e*in:(e+1)*in])
		ye := y[e*out : (e+1)*out]
		for c, bc := range l.b {
			yc := ye[c*hw : (c+1)*hw]
			gc := l.yg[c*l.np:]
			if l.ocol == 1 && useAsm {
				_ = gc[(l.OutH-1)*l.orow+l.OutW-1]
				biasRows(&yc[0], l.OutW, &gc[0], l.orow, l.OutH, l.OutW, bc)
				continue
			}
			for oy := 0; oy < l.OutH; oy++ {
				src := gc[oy*l.orow : oy*l.orow+(l.OutW-1)*l.ocol+1]
				dst := yc[oy*l.OutW : (oy+1)*l.OutW]
				for ox := range dst {
					dst[ox] = src[ox*l.ocol] + bc
				}
			}
		}
	}
}

// forwardStart prepares a forward pass over n examples of x and returns
// the grid buffer (n grids in training, else one).
func (l *conv2D) forwardStart(x []float32, n int) []float32 {
	l.savedN, l.savedX = 0, nil
	copy(l.wpad, l.w)
	if !l.train {
		return l.grids(1)
	}
	if l.cBatch > 0 {
		return l.grids(l.cBatch)[l.cFirst*l.glen:]
	}
	if n > 0 {
		l.savedN, l.savedX = n, &x[0]
	}
	return l.grids(n)
}

// exampleGrid is example e's grid in the buffer forwardStart returned.
func (l *conv2D) exampleGrid(xg []float32, e int) []float32 {
	if !l.train {
		e = 0
	}
	return xg[e*l.glen : (e+1)*l.glen]
}

// forwardGrid lays one example's input x out on g and computes its
// output without bias on the grid, into yg.
func (l *conv2D) forwardGrid(g, x []float32) {
	l.grid(g, x)
	convNN(l.mp, l.np, l.InC*l.KH*l.KW, l.wpad, g, l.offs, l.yg)
}

// sparseShare bounds the non-zero share of an example's output gradient
// for which Backward takes the weight gradient from the list of entries:
// at most one in sparseShare (a 2×2 max-pooling leaves one in four).
const sparseShare = 4

func (l *conv2D) Backward(dx, dy, x, y []float32, n int) {
	if n == 0 {
		return
	}
	if l.wino != nil {
		l.winoBackward(dx, dy, x, n)
		return
	}
	in, out := l.InSize(), l.OutSize()
	var xg []float32
	if l.cBatch == 0 || l.cFirst == 0 {
		xg = l.backwardStart(x, n, dx != nil)
		if l.sparse {
			clear(l.dwp)
		}
		l.listed = false
	}
	if l.cBatch > 0 {
		// The chunk's grids, kept by its training Forward.
		xg = l.grids(l.cBatch)[l.cFirst*l.glen:]
	}
	for e := 0; e < n; e++ {
		dye := dy[e*out : (e+1)*out]
		g := xg[e*l.glen : (e+1)*l.glen]
		var dxe []float32
		if dx != nil {
			dxe = dx[e*in : (e+1)*in]
		}
		placed := false
		if l.sparse {
			var cnt int
			cnt, placed = l.listGrad(dye)
			if cnt <= out/sparseShare {
				l.gatherGrad(cnt, g)
				l.listed = true
				if dxe != nil {
					if !placed {
						l.placeGrad(dye, false)
					}
					l.inputGrad(dxe)
				}
				continue
			}
		}
		if !placed {
			l.placeGrad(dye, !l.sparse)
		}
		l.backwardGrid(g, dxe)
	}
	if l.cBatch > 0 && l.cFirst+n < l.cBatch {
		return // more chunks to come
	}
	l.backwardEnd()
	if l.listed {
		l.sparseEnd()
	}
}

// placeGrad writes one example's output gradient onto the grid dyg, at
// the positions the outputs were computed at (the others stay zero), and
// if bias adds its channel sums to db.
func (l *conv2D) placeGrad(dy []float32, bias bool) {
	hw := l.OutH * l.OutW
	for c := 0; c < l.OutC; c++ {
		dc := dy[c*hw : (c+1)*hw]
		if l.ocol == 1 && useAsm && bias {
			var sum [8]float32
			at := l.dyOff + c*l.dyStride
			_ = l.dyg[at+(l.OutH-1)*l.orow+l.OutW-1]
			copyRowsSum(&l.dyg[at], l.orow, &dc[0], l.OutW, l.OutH, l.OutW, &sum[0], &tailTab[l.OutW%8])
			l.db[c] += ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]))
			continue
		}
		var s float32
		if bias {
			for _, v := range dc {
				s += v
			}
			l.db[c] += s
		}
		if l.ocol == 1 {
			copyRows(l.dyg[l.dyOff+c*l.dyStride:], l.orow, dc, l.OutW, l.OutH, l.OutW)
			continue
		}
		gc := l.dyg[l.dyOff+c*l.dyStride:]
		for oy := 0; oy < l.OutH; oy++ {
			row := gc[oy*l.orow : oy*l.orow+(l.OutW-1)*l.ocol+1]
			for ox, v := range dc[oy*l.OutW : (oy+1)*l.OutW] {
				row[ox*l.ocol] = v
			}
		}
	}
}

// backwardStart prepares a backward pass over n examples of x and returns
// their grids, rebuilt unless they are the last training Forward's.
func (l *conv2D) backwardStart(x []float32, n int, wantDx bool) []float32 {
	in, ckk := l.InSize(), l.InC*l.KH*l.KW
	xg := l.grids(n)
	if l.NoBias {
		clear(l.db)
	}
	if l.cBatch == 0 && (l.savedN != n || l.savedX != &x[0]) {
		for e := 0; e < n; e++ {
			l.grid(xg[e*l.glen:(e+1)*l.glen], x[e*in:(e+1)*in])
		}
	}
	if wantDx && l.full != nil {
		l.full.flip(l)
	} else if wantDx {
		for c := 0; c < l.OutC; c++ {
			for r := 0; r < ckk; r++ {
				l.wT[r*l.OutC+c] = l.w[c*ckk+r]
			}
		}
	}
	clear(l.dwpad)
	return xg
}

// backwardGrid does one example's backward pass from the output gradient
// on the grid (dyg, zero in the junk columns): it adds the weight
// gradient into dwpad and, unless dx is nil, writes the input gradient.
func (l *conv2D) backwardGrid(g, dx []float32) {
	// dW += dy·(shifted windows of the input)ᵀ.
	if l.tapsMajor {
		convNT(l.ntM, l.ntT, l.np, g, l.offs, l.dyg, l.rowOffs, l.dwpad, l.ntT)
	} else {
		convNT(l.ntM, l.ntT, l.np, l.dyg, l.rowOffs, g, l.offs, l.dwpad, l.ntT)
	}
	if dx != nil {
		l.inputGrad(dx)
	}
}

// dcolPad is the zeros before dcolg's first row, which shiftSum reads
// for the first row's first positions.
const dcolPad = 8

// inputGrad writes one example's input gradient dx from dyg.
func (l *conv2D) inputGrad(dx []float32) {
	if l.full != nil {
		l.full.inputGrad(l, dx)
		return
	}
	ckk := l.InC * l.KH * l.KW
	// The input gradient: dcol = Wᵀ·dy on the grid, then each tap's row
	// added at its offset (the adjoint of reading shifted windows), the KW
	// taps of a kernel row at once: dst[o+p] += Σ_kx dcol[r0+kx, p−kx·DW]
	// for p < npv+K−1. Each dcol row is zero at its junk columns and its
	// last K−1 positions and more (np ≥ npv+K−1), and dcolPad zeros
	// precede the first, so reads outside a row's valid positions add
	// zeros.
	dcol := l.dcolg[dcolPad:]
	gemmNN(ckk, l.np, l.OutC, l.wT, l.OutC, l.dyg, l.np, dcol, l.np, false)
	w := (l.fh-1)*l.gw + l.fw + (l.KW-1)*l.DW
	dst := dx
	if l.padded {
		dst = l.dxg
	}
	clear(dst)
	if l.phased {
		// Each tap's row at its own offset: a kernel row's taps are in
		// two phases.
		npv := (l.OutH-1)*l.orow + l.OutW
		for r := 0; r < ckk; r++ {
			addRows(dst[l.offs[r]:], 0, dcol[r*l.np:], l.np, 1, npv)
		}
	} else if l.KW > dcolPad+1 || l.DW != 1 || !useAsm {
		npv := (l.fh-1)*l.gw + l.fw
		for r0 := 0; r0 < ckk; r0 += l.KW {
			addRows(dst[l.offs[r0]:], l.DW, dcol[r0*l.np:], l.np, l.KW, npv)
		}
	} else {
		_ = l.dcolg[dcolPad+(ckk-1)*l.np+w-1]
		for r0 := 0; r0 < ckk; r0 += l.KW {
			_ = dst[l.offs[r0]+w-1]
			shiftSum(&dst[l.offs[r0]], &l.dcolg[dcolPad+r0*l.np], l.np, l.KW, w)
		}
	}
	if l.phased {
		l.unphase(dx, l.dxg)
	} else if l.padded {
		for ci := 0; ci < l.InC; ci++ {
			copyRows(dx[ci*l.InH*l.InW:], l.InW, l.dxg[ci*l.plane+l.PadT*l.gw+l.PadL:], l.gw, l.InH, l.InW)
		}
	}
}

// backwardEnd adds the weight gradient gathered in dwpad to dw.
func (l *conv2D) backwardEnd() {
	ckk := l.InC * l.KH * l.KW
	for c := 0; c < l.OutC; c++ {
		dwc := l.dw[c*ckk : (c+1)*ckk]
		if l.tapsMajor {
			for r := range dwc {
				dwc[r] += l.dwpad[r*l.ntT+c]
			}
			continue
		}
		for r, v := range l.dwpad[c*l.ntT : c*l.ntT+ckk] {
			dwc[r] += v
		}
	}
}

// plain reports whether the convolution has a square, undilated kernel
// and stride 1: the convolutions the fused conv → ReLU → max-pool layer
// takes.
func (l *conv2D) plain() bool {
	return l.KH == l.KW && l.SH == 1 && l.SW == 1 && l.DH == 1 && l.DW == 1
}
