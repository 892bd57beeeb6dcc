package nn

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// Layer is one stage of a feed-forward network, applied to a batch of n
// examples stored back to back (InSize or OutSize floats each, row-major
// C×H×W for images). Layers own no activations: the caller passes every
// input and output buffer. A layer with parameters holds views into the
// model's flat parameter and gradient buffers, set by Bind.
type Layer interface {
	InSize() int    // floats per example in
	OutSize() int   // floats per example out
	NumParams() int // parameters, weights first then biases
	// Bind points the layer's weights at params and their gradients at
	// grads, both of length NumParams().
	Bind(params, grads []float32)
	// Init fills the bound parameters from rng (see the Init kinds), so a
	// seed fixes the whole model.
	Init(rng *rand.Rand)
	// Forward writes y (n×OutSize) from x (n×InSize).
	Forward(y, x []float32, n int)
	// Backward adds the parameter gradients of Σ dy·y(x) over the batch to
	// the bound gradient buffer and, unless dx is nil, overwrites dx
	// (n×InSize) with the gradient with respect to x. x and y are the
	// buffers of the matching Forward call.
	Backward(dx, dy, x, y []float32, n int)
}

// Init selects a weight initialisation.
type Init int

const (
	// He draws U(±√(6/fan_in)), for weights followed by a ReLU.
	He Init = iota
	// Glorot draws U(±√(6/(fan_in+fan_out))), for the output layer.
	Glorot
	// Torch draws weights and biases from U(±1/√fan_in): He (Kaiming)
	// uniform with negative slope √5, PyTorch's default for Conv2d and
	// Linear, which the anchors' recipe was tuned with.
	Torch
)

// initLayer fills a layer's weights and biases.
func initLayer(rng *rand.Rand, w, b []float32, kind Init, fanIn, fanOut int) {
	var bound float64
	switch kind {
	case He:
		bound = math.Sqrt(6 / float64(fanIn))
	case Glorot:
		bound = math.Sqrt(6 / float64(fanIn+fanOut))
	case Torch:
		bound = 1 / math.Sqrt(float64(fanIn))
	}
	for i := range w {
		w[i] = float32((2*rng.Float64() - 1) * bound)
	}
	for i := range b {
		if kind == Torch {
			b[i] = float32((2*rng.Float64() - 1) * bound)
		} else {
			b[i] = 0
		}
	}
}

// grow returns buf if it holds n floats, else a new slice of n floats.
// Scratch that depends on the batch size grows once, during warm-up.
func grow(buf []float32, n int) []float32 {
	if cap(buf) >= n {
		return buf[:n]
	}
	return make([]float32, n)
}

// Conv2D is a stride-1 2-D convolution with a square K×K kernel and zero
// padding Pad on every side. Weights are OutC×InC×K×K (PyTorch's layout),
// then OutC biases.
//
// It is computed on a grid: each example's input is laid out with its
// padding, GW = InW+2·Pad floats a row, and the output is computed at every
// grid position p = oy·GW+ox, including the K−1 columns past OutW that
// wrap into the next row (junk, dropped). Kernel tap (ci,ky,kx) then reads
// the input at the fixed offset ci·plane+ky·GW+kx from p, so the products
// read shifted windows of the input through a table of offsets
// (kernConv6x16, kernConvNT3x4) instead of an im2col matrix, whose copies
// cost more than the few wasted columns. For the gradients, dy is placed on
// the same grid with zeros in the junk columns, which then add nothing.
type Conv2D struct {
	InC, InH, InW, OutC, K, Pad int
	OutH, OutW                  int
	WeightInit                  Init

	w, b, dw, db []float32

	gw, plane  int   // grid row width and plane size
	np         int   // grid positions computed, a multiple of 16
	glen       int   // floats per example grid, covering every read
	mp         int   // rows of wpad and yg: OutC rounded up to even, ≥ 4
	offs       []int // grid offsets of the kernel taps (padding taps 0)
	rowOffs    []int // offsets of dyg's rows
	wpad       []float32
	wT         []float32 // InC·K·K × OutC, transposed weights for the input gradient
	yg, dyg    []float32 // mp × np and len(rowOffs) × np
	dcolg, dxg []float32

	// The weight gradient is one product per example, gathered in dwpad
	// (ntM × ntT, padded to the 3×4 tiles): channels × taps, or taps ×
	// channels when tapsMajor, whichever wastes less of the tiles.
	tapsMajor bool
	ntM, ntT  int
	dwpad     []float32

	// In training mode Forward keeps the grids of the whole batch (xg, n ×
	// glen) for Backward; otherwise xg holds one example.
	train  bool
	xg     []float32
	savedN int
	savedX *float32
}

// NewConv2D returns a convolution for InC×InH×InW inputs.
func NewConv2D(inC, inH, inW, outC, k, pad int) *Conv2D {
	l := &Conv2D{InC: inC, InH: inH, InW: inW, OutC: outC, K: k, Pad: pad,
		OutH: inH + 2*pad - k + 1, OutW: inW + 2*pad - k + 1}
	if l.OutH <= 0 || l.OutW <= 0 {
		panic("nn: Conv2D kernel larger than the padded input")
	}
	ckk := inC * k * k
	l.gw = inW + 2*pad
	l.plane = (inH + 2*pad) * l.gw
	// The pooling kernels read and write whole groups of 16 columns, and
	// the input gradient reads K−1 zeros past the valid positions.
	l.np = (l.OutH-1)*l.gw + max((l.OutW+15)&^15, l.OutW+k-1)
	l.np = (l.np + 15) &^ 15
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
		for ky := 0; ky < k; ky++ {
			for kx := 0; kx < k; kx++ {
				l.offs[r] = ci*l.plane + ky*l.gw + kx
				r++
			}
		}
	}
	// The sparse kernels of convPoolReLU touch 8 floats from each tap row.
	l.glen = max(inC*l.plane, l.offs[ckk-1]+l.np) + 8
	l.wpad = make([]float32, l.mp*ckk)
	l.wT = make([]float32, ckk*outC)
	l.yg = make([]float32, l.mp*l.np)
	l.rowOffs = make([]int, (outC+11)/12*12)
	for i := range l.rowOffs {
		l.rowOffs[i] = i * l.np
	}
	l.dyg = make([]float32, len(l.rowOffs)*l.np)
	l.dwpad = make([]float32, l.ntM*l.ntT)
	l.dcolg = make([]float32, dcolPad+ckk*l.np)
	if pad > 0 {
		l.dxg = make([]float32, l.glen)
	}
	l.xg = make([]float32, l.glen)
	return l
}

func (l *Conv2D) InSize() int    { return l.InC * l.InH * l.InW }
func (l *Conv2D) OutSize() int   { return l.OutC * l.OutH * l.OutW }
func (l *Conv2D) NumParams() int { return l.OutC*l.InC*l.K*l.K + l.OutC }

// ParamShapes is PyTorch's Conv2d: weight [OutC InC K K], bias [OutC].
func (l *Conv2D) ParamShapes() [][]int { return [][]int{{l.OutC, l.InC, l.K, l.K}, {l.OutC}} }

func (l *Conv2D) Bind(params, grads []float32) {
	nw := l.OutC * l.InC * l.K * l.K
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *Conv2D) Init(rng *rand.Rand) {
	kk := l.K * l.K
	initLayer(rng, l.w, l.b, l.WeightInit, l.InC*kk, l.OutC*kk)
}

// setTrain switches the keeping of the batch's grids for Backward on or
// off; the model turns it on for training passes only, because an
// evaluation batch's grids would be large.
func (l *Conv2D) setTrain(on bool) { l.train = on }

// grid writes one example's input into its grid g. The padding and slack
// are never written, so they stay zero from allocation.
func (l *Conv2D) grid(g, x []float32) {
	hw := l.InH * l.InW
	for ci := 0; ci < l.InC; ci++ {
		copyRows(g[ci*l.plane+l.Pad*l.gw+l.Pad:], l.gw, x[ci*hw:(ci+1)*hw], l.InW, l.InH, l.InW)
	}
}

// grids returns a buffer of n example grids whose padding and slack are
// zero. Grown buffers are new, hence zero.
func (l *Conv2D) grids(n int) []float32 {
	if cap(l.xg) < n*l.glen {
		l.xg = make([]float32, n*l.glen)
	}
	return l.xg[:n*l.glen]
}

func (l *Conv2D) Forward(y, x []float32, n int) {
	in, out, hw := l.InSize(), l.OutSize(), l.OutH*l.OutW
	xg := l.forwardStart(x, n)
	for e := 0; e < n; e++ {
		l.forwardGrid(l.exampleGrid(xg, e), x[e*in:(e+1)*in])
		ye := y[e*out : (e+1)*out]
		for c, bc := range l.b {
			yc := ye[c*hw : (c+1)*hw]
			gc := l.yg[c*l.np:]
			for oy := 0; oy < l.OutH; oy++ {
				src := gc[oy*l.gw : oy*l.gw+l.OutW]
				dst := yc[oy*l.OutW : (oy+1)*l.OutW]
				for i, v := range src {
					dst[i] = v + bc
				}
			}
		}
	}
}

// forwardStart prepares a forward pass over n examples of x and returns
// the grid buffer (n grids in training, else one).
func (l *Conv2D) forwardStart(x []float32, n int) []float32 {
	l.savedN, l.savedX = 0, nil
	copy(l.wpad, l.w)
	if !l.train {
		return l.grids(1)
	}
	if n > 0 {
		l.savedN, l.savedX = n, &x[0]
	}
	return l.grids(n)
}

// exampleGrid is example e's grid in the buffer forwardStart returned.
func (l *Conv2D) exampleGrid(xg []float32, e int) []float32 {
	if !l.train {
		e = 0
	}
	return xg[e*l.glen : (e+1)*l.glen]
}

// forwardGrid lays one example's input x out on g and computes its
// output without bias on the grid, into yg.
func (l *Conv2D) forwardGrid(g, x []float32) {
	l.grid(g, x)
	convNN(l.mp, l.np, l.InC*l.K*l.K, l.wpad, g, l.offs, l.yg)
}

func (l *Conv2D) Backward(dx, dy, x, y []float32, n int) {
	if n == 0 {
		return
	}
	in, out, hw := l.InSize(), l.OutSize(), l.OutH*l.OutW
	for c := range l.db {
		var s float32
		for e := 0; e < n; e++ {
			for _, v := range dy[e*out+c*hw : e*out+(c+1)*hw] {
				s += v
			}
		}
		l.db[c] += s
	}
	xg := l.backwardStart(x, n, dx != nil)
	for e := 0; e < n; e++ {
		for c := 0; c < l.OutC; c++ {
			copyRows(l.dyg[c*l.np:], l.gw, dy[e*out+c*hw:], l.OutW, l.OutH, l.OutW)
		}
		var dxe []float32
		if dx != nil {
			dxe = dx[e*in : (e+1)*in]
		}
		l.backwardGrid(xg[e*l.glen:(e+1)*l.glen], dxe)
	}
	l.backwardEnd()
}

// backwardStart prepares a backward pass over n examples of x and returns
// their grids, rebuilt unless they are the last training Forward's.
func (l *Conv2D) backwardStart(x []float32, n int, wantDx bool) []float32 {
	in, ckk := l.InSize(), l.InC*l.K*l.K
	xg := l.grids(n)
	if l.savedN != n || l.savedX != &x[0] {
		for e := 0; e < n; e++ {
			l.grid(xg[e*l.glen:(e+1)*l.glen], x[e*in:(e+1)*in])
		}
	}
	if wantDx {
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
func (l *Conv2D) backwardGrid(g, dx []float32) {
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
func (l *Conv2D) inputGrad(dx []float32) {
	ckk := l.InC * l.K * l.K
	// The input gradient: dcol = Wᵀ·dy on the grid, then each tap's row
	// added at its offset (the adjoint of reading shifted windows), the K
	// taps of a kernel row at once: dst[o+p] += Σ_kx dcol[r0+kx, p−kx] for
	// p < npv+K−1. Each dcol row is zero at its junk columns and its last
	// K−1 positions and more (np ≥ npv+K−1), and dcolPad zeros precede
	// the first, so reads outside a row's valid positions add zeros.
	dcol := l.dcolg[dcolPad:]
	gemmNN(ckk, l.np, l.OutC, l.wT, l.OutC, l.dyg, l.np, dcol, l.np, false)
	w := (l.OutH-1)*l.gw + l.OutW + l.K - 1
	dst := dx
	if l.Pad > 0 {
		dst = l.dxg
	}
	clear(dst)
	if l.K > dcolPad+1 || !useAsm {
		npv := w - l.K + 1
		for r0 := 0; r0 < ckk; r0 += l.K {
			addRows(dst[l.offs[r0]:], 1, dcol[r0*l.np:], l.np, l.K, npv)
		}
	} else {
		_ = l.dcolg[dcolPad+(ckk-1)*l.np+w-1]
		for r0 := 0; r0 < ckk; r0 += l.K {
			_ = dst[l.offs[r0]+w-1]
			shiftSum(&dst[l.offs[r0]], &l.dcolg[dcolPad+r0*l.np], l.np, l.K, w)
		}
	}
	if l.Pad > 0 {
		for ci := 0; ci < l.InC; ci++ {
			copyRows(dx[ci*l.InH*l.InW:], l.InW, l.dxg[ci*l.plane+l.Pad*l.gw+l.Pad:], l.gw, l.InH, l.InW)
		}
	}
}

// backwardEnd adds the weight gradient gathered in dwpad to dw.
func (l *Conv2D) backwardEnd() {
	ckk := l.InC * l.K * l.K
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

// convPoolReLU is a Conv2D followed by 2×2 max pooling and a ReLU, as one
// layer (max(m+b, 0) for m the window's maximum, the same as biasing before
// pooling because rounding is monotone): the convolution's output stays on its grid, is pooled, biased
// and rectified in one pass, and only a one-hot code per window (which
// input is the first maximum, none if the ReLU is off) is kept for the
// backward pass, which writes the gradient straight onto the grid. This
// saves the full-size activation and gradient buffers and three passes
// over them. Parameters are the Conv2D's, in its layout.
type convPoolReLU struct {
	*Conv2D
	ph, pw int
	hot    []int32 // n × OutC × ph × pw codes: bit k for window cell k

	// With K ≤ 8 the weight gradient is sparse: the routed gradients of
	// one example (at most one per window, none where the ReLU is off, so
	// at most a quarter of the grid) are listed (pos, g, ch), grouped by
	// channel, and each adds its input's K×K window, 8 floats per (ci, ky)
	// row, times g onto its channel's rows of dwp.
	sparse  bool
	roffs   []int     // InC·K grid offsets of the (ci, ky) rows
	dwp     []float32 // OutC × InC·K × 8: the weight gradient by row
	pos, ch []int32
	g       []float32
}

func newConvPoolReLU(c *Conv2D) *convPoolReLU {
	if c.OutH%2 != 0 || c.OutW%2 != 0 {
		panic("nn: convPoolReLU needs an even convolution output")
	}
	// Sparse pays where a window has many taps to amortise listing it: on
	// LeNet's conv2 (150 taps) it measured faster than the dense product,
	// on conv1 (25 taps) slower.
	l := &convPoolReLU{Conv2D: c, ph: c.OutH / 2, pw: c.OutW / 2, sparse: c.K <= 8 && c.InC*c.K*c.K >= 64}
	if l.sparse {
		rows := c.InC * c.K
		l.roffs = make([]int, rows)
		for r := range l.roffs {
			l.roffs[r] = r/c.K*c.plane + r%c.K*c.gw
		}
		l.dwp = make([]float32, c.OutC*rows*8)
		win := c.OutC * l.ph * l.pw
		l.pos, l.ch, l.g = make([]int32, win), make([]int32, win), make([]float32, win)
	}
	return l
}

func (l *convPoolReLU) OutSize() int { return l.OutC * l.ph * l.pw }

// backwardSparse is Backward from the list of routed gradients.
func (l *convPoolReLU) backwardSparse(dx, dy, x []float32, n int) {
	in, out, k, ckk := l.InSize(), l.OutSize(), l.K, l.InC*l.K*l.K
	rows := l.InC * k
	xg := l.backwardStart(x, n, dx != nil)
	clear(l.dwp)
	gw := l.gw
	for e := 0; e < n; e++ {
		dye := dy[e*out : (e+1)*out]
		he := l.hot[e*out : (e+1)*out]
		cnt := 0
		for c := 0; c < l.OutC; c++ {
			var s0, s1 float32 // two sums: a single one is a latency chain
			for i := 0; i < l.ph; i++ {
				hr := he[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
				dr := dye[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
				for j, h := range hr {
					// Written always, kept (cnt advanced) only for a routed
					// gradient: no branch on the random codes.
					cell := bits.TrailingZeros32(uint32(h)) & 3
					l.pos[cnt] = int32((2*i+cell>>1)*gw + 2*j + cell&1)
					l.ch[cnt] = int32(c)
					l.g[cnt] = dr[j]
					keep := uint32(-h) >> 31
					v := math.Float32frombits(math.Float32bits(dr[j]) & -keep)
					if j&1 == 0 {
						s0 += v
					} else {
						s1 += v
					}
					cnt += int(keep)
				}
			}
			l.db[c] += s0 + s1
		}
		// Positions are at most those of the last window's last cell.
		gatherRows(cnt, l.pos, l.g, l.ch, xg[e*l.glen:(e+1)*l.glen], rows, l.roffs, l.dwp, (2*l.ph-1)*gw+2*l.pw-1, l.OutC-1)
		if dx != nil {
			// The input gradient is dense: scattering the kernels of the
			// routed gradients measured slower, its overlapping 8-float
			// read-modify-writes defeating store forwarding.
			l.spread(dye, he, false)
			l.inputGrad(dx[e*in : (e+1)*in])
		}
	}
	for c := 0; c < l.OutC; c++ {
		for r := 0; r < rows; r++ {
			dwr := l.dw[c*ckk+r*k : c*ckk+(r+1)*k]
			for kx, v := range l.dwp[(c*rows+r)*8 : (c*rows+r)*8+k] {
				dwr[kx] += v
			}
		}
	}
}

// groups is the number of 8-window groups per pooled row for the pooling
// kernels, and the lane mask of the last.
func (l *convPoolReLU) groups() (int, *int32) {
	g := (l.pw + 7) / 8
	return g, &maskTab[16-(l.pw-8*(g-1))]
}

func (l *convPoolReLU) Forward(y, x []float32, n int) {
	in, out := l.InSize(), l.OutSize()
	xg := l.forwardStart(x, n)
	if len(l.hot) < n*out {
		l.hot = make([]int32, n*out)
	}
	gw := l.gw
	groups, mask := l.groups()
	for e := 0; e < n; e++ {
		l.forwardGrid(l.exampleGrid(xg, e), x[e*in:(e+1)*in])
		ye := y[e*out : (e+1)*out]
		he := l.hot[e*out : (e+1)*out]
		if useAsm {
			for c, bc := range l.b {
				_ = l.yg[c*l.np+(2*l.ph-1)*gw+16*groups-1]
				_ = ye[(c+1)*l.ph*l.pw-1]
				poolFwd8(l.ph, groups, &l.yg[c*l.np], gw, bc, &ye[c*l.ph*l.pw], l.pw, &he[c*l.ph*l.pw], mask)
			}
			continue
		}
		for c, bc := range l.b {
			gc := l.yg[c*l.np : (c+1)*l.np]
			for i := 0; i < l.ph; i++ {
				r0 := gc[2*i*gw : 2*i*gw+2*l.pw]
				r1 := gc[(2*i+1)*gw : (2*i+1)*gw+2*l.pw]
				yr := ye[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
				hr := he[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
				for j := range yr {
					v00, v01, v10, v11 := r0[2*j], r0[2*j+1], r1[2*j], r1[2*j+1]
					m := max(max(v00, v01), max(v10, v11))
					v := max(m+bc, 0)
					mb := math.Float32bits(m)
					e0 := eqMask(math.Float32bits(v00), mb)
					e1 := eqMask(math.Float32bits(v01), mb) &^ e0
					e2 := eqMask(math.Float32bits(v10), mb) &^ (e0 | e1)
					e3 := ^(e0 | e1 | e2)
					h := e0&1 | e1&2 | e2&4 | e3&8
					yr[j] = v
					hr[j] = int32(h & posMask(math.Float32bits(v)))
				}
			}
		}
	}
}

func (l *convPoolReLU) Backward(dx, dy, x, y []float32, n int) {
	if n == 0 {
		return
	}
	if l.sparse {
		l.backwardSparse(dx, dy, x, n)
		return
	}
	in, out := l.InSize(), l.OutSize()
	xg := l.backwardStart(x, n, dx != nil)
	for e := 0; e < n; e++ {
		l.spread(dy[e*out:(e+1)*out], l.hot[e*out:(e+1)*out], true)
		var dxe []float32
		if dx != nil {
			dxe = dx[e*in : (e+1)*in]
		}
		l.backwardGrid(xg[e*l.glen:(e+1)*l.glen], dxe)
	}
	l.backwardEnd()
}

// spread writes one example's gradient onto the grid dyg from the pooled
// gradient dy and the window codes, and adds the bias gradient if db.
func (l *convPoolReLU) spread(dy []float32, hot []int32, db bool) {
	gw := l.gw
	if useAsm {
		groups, mask := l.groups()
		for c := 0; c < l.OutC; c++ {
			var sum [8]float32
			_ = l.dyg[c*l.np+(2*l.ph-1)*gw+16*groups-1]
			_ = dy[(c+1)*l.ph*l.pw-1]
			poolBwd8(l.ph, groups, &l.dyg[c*l.np], gw, &dy[c*l.ph*l.pw], l.pw, &hot[c*l.ph*l.pw], mask, &sum[0])
			if db {
				var s float32
				for _, v := range sum {
					s += v
				}
				l.db[c] += s
			}
		}
		return
	}
	for c := 0; c < l.OutC; c++ {
		gc := l.dyg[c*l.np : (c+1)*l.np]
		var s float32
		for i := 0; i < l.ph; i++ {
			d0 := gc[2*i*gw : 2*i*gw+2*l.pw]
			d1 := gc[(2*i+1)*gw : (2*i+1)*gw+2*l.pw]
			dr := dy[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
			hr := hot[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
			for j, h := range hr {
				g := math.Float32bits(dr[j])
				hb := uint32(h)
				d0[2*j] = math.Float32frombits(g & -(hb & 1))
				d0[2*j+1] = math.Float32frombits(g & -(hb >> 1 & 1))
				d1[2*j] = math.Float32frombits(g & -(hb >> 2 & 1))
				d1[2*j+1] = math.Float32frombits(g & -(hb >> 3 & 1))
				s += math.Float32frombits(g & -((hb | hb>>1 | hb>>2 | hb>>3) & 1))
			}
		}
		if db {
			l.db[c] += s
		}
	}
}

// Pool2D is a non-overlapping S×S pooling window with stride S over C×H×W
// inputs (trailing rows and columns that do not fill a window are dropped).
// Max pooling routes the gradient to the first maximum of each window.
type Pool2D struct {
	C, H, W, S int
	Avg        bool
}

// NewMaxPool2D returns S×S max pooling; NewAvgPool2D average pooling.
func NewMaxPool2D(c, h, w, s int) *Pool2D { return &Pool2D{C: c, H: h, W: w, S: s} }
func NewAvgPool2D(c, h, w, s int) *Pool2D { return &Pool2D{C: c, H: h, W: w, S: s, Avg: true} }

func (l *Pool2D) InSize() int         { return l.C * l.H * l.W }
func (l *Pool2D) OutSize() int        { return l.C * (l.H / l.S) * (l.W / l.S) }
func (l *Pool2D) NumParams() int      { return 0 }
func (l *Pool2D) Bind(_, _ []float32) {}
func (l *Pool2D) Init(_ *rand.Rand)   {}
func (l *Pool2D) outHW() (int, int)   { return l.H / l.S, l.W / l.S }

func (l *Pool2D) Forward(y, x []float32, n int) {
	oh, ow := l.outHW()
	if l.S == 2 && !l.Avg {
		l.forwardMax2(y, x, n)
		return
	}
	s := l.S
	inv := 1 / float32(s*s)
	for p := 0; p < n*l.C; p++ { // one plane per (example, channel)
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			for ox := 0; ox < ow; ox++ {
				base := oy*s*l.W + ox*s
				var v float32
				if l.Avg {
					for ky := 0; ky < s; ky++ {
						for _, t := range xp[base+ky*l.W : base+ky*l.W+s] {
							v += t
						}
					}
					v *= inv
				} else {
					v = xp[base]
					for ky := 0; ky < s; ky++ {
						for _, t := range xp[base+ky*l.W : base+ky*l.W+s] {
							if t > v {
								v = t
							}
						}
					}
				}
				yp[oy*ow+ox] = v
			}
		}
	}
}

func (l *Pool2D) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil {
		return
	}
	oh, ow := l.outHW()
	if l.S == 2 && !l.Avg && l.H%2 == 0 && l.W%2 == 0 {
		l.backwardMax2(dx, dy, x, y, n)
		return
	}
	s := l.S
	inv := 1 / float32(s*s)
	clear(dx[:n*l.InSize()])
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		dxp := dx[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		dyp := dy[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			for ox := 0; ox < ow; ox++ {
				base := oy*s*l.W + ox*s
				g := dyp[oy*ow+ox]
				if l.Avg {
					g *= inv
					for ky := 0; ky < s; ky++ {
						for kx := 0; kx < s; kx++ {
							dxp[base+ky*l.W+kx] += g
						}
					}
					continue
				}
				m := yp[oy*ow+ox]
			find:
				for ky := 0; ky < s; ky++ {
					for kx := 0; kx < s; kx++ {
						if xp[base+ky*l.W+kx] == m {
							dxp[base+ky*l.W+kx] += g
							break find
						}
					}
				}
			}
		}
	}
}

// forwardMax2 is Forward for 2×2 max pooling, with the builtin max, which
// compiles to branch-free MINSS/MAXSS sequences.
func (l *Pool2D) forwardMax2(y, x []float32, n int) {
	oh, ow := l.outHW()
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			r0 := xp[2*oy*l.W : 2*oy*l.W+2*ow]
			r1 := xp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			yr := yp[oy*ow : (oy+1)*ow]
			for ox := range yr {
				yr[ox] = max(max(r0[2*ox], r0[2*ox+1]), max(r1[2*ox], r1[2*ox+1]))
			}
		}
	}
}

// backwardMax2 is Backward for 2×2 max pooling over even sizes: every
// input belongs to exactly one window, so each window writes its four
// gradients (dy at the first maximum, 0 elsewhere) without clearing dx
// first. The choice is made with bit masks rather than branches, which a
// random argmax would mispredict.
func (l *Pool2D) backwardMax2(dx, dy, x, y []float32, n int) {
	oh, ow := l.outHW()
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		dxp := dx[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		dyp := dy[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			r0 := xp[2*oy*l.W : 2*oy*l.W+2*ow]
			r1 := xp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			d0 := dxp[2*oy*l.W : 2*oy*l.W+2*ow]
			d1 := dxp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			yr := yp[oy*ow : (oy+1)*ow]
			dyr := dyp[oy*ow : (oy+1)*ow]
			for ox, m := range yr {
				mb := math.Float32bits(m)
				g := math.Float32bits(dyr[ox])
				e0 := eqMask(math.Float32bits(r0[2*ox]), mb)
				e1 := eqMask(math.Float32bits(r0[2*ox+1]), mb) &^ e0
				e2 := eqMask(math.Float32bits(r1[2*ox]), mb) &^ (e0 | e1)
				e3 := ^(e0 | e1 | e2)
				d0[2*ox] = math.Float32frombits(g & e0)
				d0[2*ox+1] = math.Float32frombits(g & e1)
				d1[2*ox] = math.Float32frombits(g & e2)
				d1[2*ox+1] = math.Float32frombits(g & e3)
			}
		}
	}
}

// eqMask is all ones if a == b and 0 otherwise, without a branch.
func eqMask(a, b uint32) uint32 {
	d := a ^ b
	return ^uint32(int32(d|-d) >> 31)
}

// posMask is all ones if the float32 with bits b is > 0 (not NaN), else 0.
func posMask(b uint32) uint32 {
	i := int32(b)
	return uint32(-i>>31) & ^uint32(i>>31)
}

// Activation applies ReLU or Tanh element-wise to Size floats per example.
type Activation struct {
	Size int
	Tanh bool // false: ReLU
}

// NewReLU returns max(x, 0); NewTanh returns tanh(x).
func NewReLU(size int) *Activation { return &Activation{Size: size} }
func NewTanh(size int) *Activation { return &Activation{Size: size, Tanh: true} }

func (l *Activation) InSize() int         { return l.Size }
func (l *Activation) OutSize() int        { return l.Size }
func (l *Activation) NumParams() int      { return 0 }
func (l *Activation) Bind(_, _ []float32) {}
func (l *Activation) Init(_ *rand.Rand)   {}

func (l *Activation) Forward(y, x []float32, n int) {
	x, y = x[:n*l.Size], y[:n*l.Size]
	if l.Tanh {
		for i, v := range x {
			y[i] = float32(math.Tanh(float64(v)))
		}
		return
	}
	for i, v := range x {
		y[i] = max(v, 0)
	}
}

func (l *Activation) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil {
		return
	}
	dx, dy, y = dx[:n*l.Size], dy[:n*l.Size], y[:n*l.Size]
	if l.Tanh {
		for i, v := range y {
			dx[i] = dy[i] * (1 - v*v)
		}
		return
	}
	// dx = dy where y > 0, else 0, by masking bits: the sign of y is
	// random, so a branch would be mispredicted half the time.
	dy = dy[:len(y)]
	dx = dx[:len(y)]
	for i, v := range y {
		dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & posMask(math.Float32bits(v)))
	}
}

// Flatten turns C×H×W feature maps into vectors; the row-major layout is
// already flat, so it is a copy that documents the change of view.
type Flatten struct{ Size int }

func NewFlatten(size int) *Flatten { return &Flatten{Size: size} }

func (l *Flatten) InSize() int                   { return l.Size }
func (l *Flatten) OutSize() int                  { return l.Size }
func (l *Flatten) NumParams() int                { return 0 }
func (l *Flatten) Bind(_, _ []float32)           {}
func (l *Flatten) Init(_ *rand.Rand)             {}
func (l *Flatten) Forward(y, x []float32, n int) { copy(y[:n*l.Size], x[:n*l.Size]) }
func (l *Flatten) Backward(dx, dy, _, _ []float32, n int) {
	if dx != nil {
		copy(dx[:n*l.Size], dy[:n*l.Size])
	}
}

// Dense is a fully connected layer y = x·Wᵀ + b with W stored Out×In
// (PyTorch's layout), then Out biases.
type Dense struct {
	In, Out    int
	WeightInit Init

	w, b, dw, db []float32
	dyT          []float32 // Out × n scratch for the weight gradient
}

func NewDense(in, out int) *Dense { return &Dense{In: in, Out: out} }

func (l *Dense) InSize() int    { return l.In }
func (l *Dense) OutSize() int   { return l.Out }
func (l *Dense) NumParams() int { return l.In*l.Out + l.Out }

// ParamShapes is PyTorch's Linear: weight [Out In], bias [Out].
func (l *Dense) ParamShapes() [][]int { return [][]int{{l.Out, l.In}, {l.Out}} }

func (l *Dense) Bind(params, grads []float32) {
	nw := l.In * l.Out
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *Dense) Init(rng *rand.Rand) {
	initLayer(rng, l.w, l.b, l.WeightInit, l.In, l.Out)
}

func (l *Dense) Forward(y, x []float32, n int) {
	gemmNT(n, l.Out, l.In, x, l.In, l.w, l.In, y, l.Out, false)
	for e := 0; e < n; e++ {
		ye := y[e*l.Out : (e+1)*l.Out]
		for j, bj := range l.b {
			ye[j] += bj
		}
	}
}

func (l *Dense) Backward(dx, dy, x, y []float32, n int) {
	l.dyT = grow(l.dyT, l.Out*n)
	for e := 0; e < n; e++ {
		dye := dy[e*l.Out : (e+1)*l.Out]
		for j, g := range dye {
			l.db[j] += g
			l.dyT[j*n+e] = g
		}
	}
	gemmNN(l.Out, l.In, n, l.dyT, n, x, l.In, l.dw, l.In, true)
	if dx != nil {
		gemmNN(n, l.In, l.Out, dy, l.Out, l.w, l.In, dx, l.In, false)
	}
}
