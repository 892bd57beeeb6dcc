package nn

import (
	"math"
	"math/bits"
	"math/rand/v2"
)

// layer is one stage of a feed-forward network, applied to a batch of n
// examples stored back to back (InSize or OutSize floats each, row-major
// C×H×W for images). Layers own no activations: the caller passes every
// input and output buffer. A layer with parameters holds views into the
// model's flat parameter and gradient buffers, set by Bind. The layer
// specs (Conv2D, Dense …) build them for a Sequential.
type layer interface {
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

// conv2D is a 2-D convolution with a square K×K kernel, stride S and zero
// padding: PadT rows above the input, PadL columns left of it, and below
// and right as many as the constructor was given. Weights are
// OutC×InC×K×K (PyTorch's layout), then OutC biases.
//
// It is computed on a grid: each example's input is laid out with its
// padding, GW floats a row, and the stride-1 output is computed at every
// grid position p = oy·GW+ox, including the K−1 columns past the last
// output column that wrap into the next row (junk, dropped). Kernel tap
// (ci,ky,kx) then reads the input at the fixed offset ci·plane+ky·GW+kx
// from p, so the products read shifted windows of the input through a
// table of offsets (kernConv6x16, kernConvNT3x4) instead of an im2col
// matrix, whose copies cost more than the few wasted columns. For the
// gradients, dy is placed on the same grid with zeros in the junk columns,
// which then add nothing. A stride S > 1 keeps every S-th row and column
// of the stride-1 output (and places dy there, zeros between): S² the
// products of a direct strided convolution, which the offset kernels
// cannot read; LeNet's convolutions have stride 1.
type conv2D struct {
	InC, InH, InW, OutC, K, S int
	PadT, PadL                int
	OutH, OutW                int
	WeightInit                Init
	// KernelInit and BiasInit, if set, draw the weights and the biases
	// instead of WeightInit's rule (see initParams).
	KernelInit, BiasInit *Initializer

	w, b, dw, db []float32

	gw, plane  int   // grid row width and plane size
	fh, fw     int   // rows and columns of the stride-1 output
	padded     bool  // any padding: the input gradient goes through dxg
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

	// With K ≤ 8 and many taps the weight gradient can be taken from a
	// sparse output gradient: its non-zero entries of one example are
	// listed (pos, g, ch), grouped by channel, and each adds its input's
	// K×K window, 8 floats per (ci, ky) row, times g onto its channel's
	// rows of dwp. Sparse pays where a window has many taps to amortise
	// listing it: on LeNet's conv2 (150 taps) it measured faster than the
	// dense product, on conv1 (25 taps) slower. A max-pooling after the
	// convolution leaves at most one gradient per window, a ReLU fewer.
	sparse  bool
	roffs   []int     // InC·K grid offsets of the (ci, ky) rows
	dwp     []float32 // OutC × InC·K × 8: the weight gradient by row
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

// chunker is a layer whose passes may each cover a chunk of the batch:
// before each Forward and Backward over examples first … first+n−1 of a
// batch of batch, the model calls chunk(first, batch), and the layer keeps
// what Backward needs for the whole batch. A model runs the layers it
// can chunk one chunk at a time, so that a chunk's activations are still in
// cache when the next layer reads them. Without calls, each pass is a
// whole batch.
type chunker interface{ chunk(first, batch int) }

func (l *conv2D) chunk(first, batch int) { l.cFirst, l.cBatch = first, batch }

// reads: a chunked Backward reads the grids its Forward kept.
func (l *conv2D) reads() (x, y bool) { return false, false }

// newConv2D returns a stride-1 convolution for InC×InH×InW inputs with pad
// zeros on every side.
func newConv2D(inC, inH, inW, outC, k, pad int) *conv2D {
	return newConv(inC, inH, inW, outC, k, 1, [4]int{pad, pad, pad, pad})
}

// newConv returns a convolution of stride s for InC×InH×InW inputs with
// pad[0], pad[1], pad[2], pad[3] zeros above, below, left and right. A
// kernel larger than the padded input is a programmer error (the layer
// specs check it first).
func newConv(inC, inH, inW, outC, k, s int, pad [4]int) *conv2D {
	gh, gw := inH+pad[0]+pad[1], inW+pad[2]+pad[3]
	if k < 1 || s < 1 || k > gh || k > gw {
		panic("nn: conv2D kernel larger than the padded input")
	}
	l := &conv2D{InC: inC, InH: inH, InW: inW, OutC: outC, K: k, S: s, PadT: pad[0], PadL: pad[2],
		gw: gw, fh: gh - k + 1, fw: gw - k + 1, padded: pad != [4]int{}}
	l.OutH, l.OutW = (l.fh-1)/s+1, (l.fw-1)/s+1
	ckk := inC * k * k
	l.plane = gh * gw
	// The pooling kernels read and write whole groups of 16 columns, and
	// the input gradient reads K−1 zeros past the valid positions.
	l.np = (l.fh-1)*l.gw + max((l.fw+15)&^15, l.fw+k-1)
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
	l.dwpad = make([]float32, l.ntM*l.ntT)
	l.dcolg = make([]float32, dcolPad+ckk*l.np)
	if l.padded {
		l.dxg = make([]float32, l.glen)
	}
	l.xg = make([]float32, l.glen)
	if k <= 8 && ckk >= 64 {
		l.sparse = true
		rows := inC * k
		l.roffs = make([]int, rows)
		for r := range l.roffs {
			l.roffs[r] = r/k*l.plane + r%k*l.gw
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

func (l *conv2D) InSize() int    { return l.InC * l.InH * l.InW }
func (l *conv2D) OutSize() int   { return l.OutC * l.OutH * l.OutW }
func (l *conv2D) NumParams() int { return l.OutC*l.InC*l.K*l.K + l.OutC }

// ParamShapes is PyTorch's Conv2d: weight [OutC InC K K], bias [OutC].
func (l *conv2D) ParamShapes() [][]int { return [][]int{{l.OutC, l.InC, l.K, l.K}, {l.OutC}} }

func (l *conv2D) Bind(params, grads []float32) {
	nw := l.OutC * l.InC * l.K * l.K
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *conv2D) Init(rng *rand.Rand) {
	kk := l.K * l.K
	initParams(rng, l.w, l.b, l.WeightInit, l.KernelInit, l.BiasInit, l.InC*kk, l.OutC*kk)
}

// setTrain switches the keeping of the batch's grids for Backward on or
// off; the model turns it on for training passes only, because an
// evaluation batch's grids would be large.
func (l *conv2D) setTrain(on bool) { l.train = on }

// grid writes one example's input into its grid g. The padding and slack
// are never written, so they stay zero from allocation.
func (l *conv2D) grid(g, x []float32) {
	hw := l.InH * l.InW
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
	in, out, hw := l.InSize(), l.OutSize(), l.OutH*l.OutW
	xg := l.forwardStart(x, n)
	for e := 0; e < n; e++ {
		l.forwardGrid(l.exampleGrid(xg, e), x[e*in:(e+1)*in])
		ye := y[e*out : (e+1)*out]
		for c, bc := range l.b {
			yc := ye[c*hw : (c+1)*hw]
			gc := l.yg[c*l.np:]
			if l.S == 1 && useAsm {
				_ = gc[(l.OutH-1)*l.gw+l.OutW-1]
				biasRows(&yc[0], l.OutW, &gc[0], l.gw, l.OutH, l.OutW, bc)
				continue
			}
			for oy := 0; oy < l.OutH; oy++ {
				src := gc[oy*l.S*l.gw : oy*l.S*l.gw+(l.OutW-1)*l.S+1]
				dst := yc[oy*l.OutW : (oy+1)*l.OutW]
				for ox := range dst {
					dst[ox] = src[ox*l.S] + bc
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
	convNN(l.mp, l.np, l.InC*l.K*l.K, l.wpad, g, l.offs, l.yg)
}

// sparseShare bounds the non-zero share of an example's output gradient
// for which Backward takes the weight gradient from the list of entries:
// at most one in sparseShare (a 2×2 max-pooling leaves one in four).
const sparseShare = 4

func (l *conv2D) Backward(dx, dy, x, y []float32, n int) {
	if n == 0 {
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

// listGrad lists the non-zero entries of one example's output gradient
// (grid position, value, channel), grouped by channel, adds the channel
// sums to db, and returns how many there are and whether it also placed
// the gradient on the grid dyg (as placeGrad does).
func (l *conv2D) listGrad(dy []float32) (int, bool) {
	hw, ow, gw, st := l.OutH*l.OutW, l.OutW, l.gw, l.S
	if useAsm && st == 1 {
		cnt := 0
		tail := ow - (ow-1)&^7
		// listNZ writes the grid rows in whole chunks of 8.
		_ = l.dyg[(l.OutC-1)*l.np+(l.OutH-1)*gw+(ow+7)&^7-1]
		for c := 0; c < l.OutC; c++ {
			var sum [8]float32
			dc := dy[c*hw : (c+1)*hw]
			_ = l.pos[cnt+hw+7]
			_ = l.ch[cnt+hw+7]
			_ = l.g[cnt+hw+7]
			cnt += listNZ(l.OutH, ow, &dc[0], ow, &l.dyg[c*l.np], gw, int32(c), &l.pos[cnt], &l.ch[cnt], &l.g[cnt], &maskTab[16-tail], &packLUT[0][0], &sum[0])
			l.db[c] += ((sum[0] + sum[1]) + (sum[2] + sum[3])) + ((sum[4] + sum[5]) + (sum[6] + sum[7]))
		}
		return cnt, true
	}
	pos, ch, gs := l.pos[:l.OutC*hw], l.ch[:l.OutC*hw], l.g[:l.OutC*hw]
	cnt := 0
	for c := 0; c < l.OutC; c++ {
		var s0, s1 float32 // two sums: a single one is a latency chain
		dc := dy[c*hw : (c+1)*hw]
		for oy := 0; oy < l.OutH; oy++ {
			base := int32(oy * st * gw)
			row := dc[oy*ow : (oy+1)*ow]
			for ox := 0; ox+1 < len(row); ox += 2 {
				// Written always, kept (cnt advanced) only when non-zero:
				// no branch on the data.
				v0, v1 := row[ox], row[ox+1]
				pos[cnt], ch[cnt], gs[cnt] = base+int32(ox*st), int32(c), v0
				b := math.Float32bits(v0) << 1 // ±0 alike
				cnt += int((b | -b) >> 31)
				pos[cnt], ch[cnt], gs[cnt] = base+int32((ox+1)*st), int32(c), v1
				b = math.Float32bits(v1) << 1
				cnt += int((b | -b) >> 31)
				s0 += v0
				s1 += v1
			}
			if ow%2 != 0 {
				v := row[ow-1]
				pos[cnt], ch[cnt], gs[cnt] = base+int32((ow-1)*st), int32(c), v
				b := math.Float32bits(v) << 1
				cnt += int((b | -b) >> 31)
				s0 += v
			}
		}
		l.db[c] += s0 + s1
	}
	return cnt, false
}

// gatherGrad adds the weight gradient of the cnt listed entries, for the
// example whose grid is g, to dwp.
func (l *conv2D) gatherGrad(cnt int, g []float32) {
	hiPos := (l.OutH-1)*l.S*l.gw + (l.OutW-1)*l.S
	gatherRows(cnt, l.pos, l.g, l.ch, g, l.InC*l.K, l.roffs, l.dwp, hiPos, l.OutC-1)
}

// sparseEnd adds the weight gradient gathered in dwp to dw.
func (l *conv2D) sparseEnd() {
	k, ckk, rows := l.K, l.InC*l.K*l.K, l.InC*l.K
	for c := 0; c < l.OutC; c++ {
		for r := 0; r < rows; r++ {
			dwr := l.dw[c*ckk+r*k : c*ckk+(r+1)*k]
			for kx, v := range l.dwp[(c*rows+r)*8 : (c*rows+r)*8+k] {
				dwr[kx] += v
			}
		}
	}
}

// placeGrad writes one example's output gradient onto the grid dyg, at
// the positions the outputs were computed at (the others stay zero), and
// if bias adds its channel sums to db.
func (l *conv2D) placeGrad(dy []float32, bias bool) {
	hw := l.OutH * l.OutW
	for c := 0; c < l.OutC; c++ {
		dc := dy[c*hw : (c+1)*hw]
		if l.S == 1 && useAsm && bias {
			var sum [8]float32
			_ = l.dyg[c*l.np+(l.OutH-1)*l.gw+l.OutW-1]
			copyRowsSum(&l.dyg[c*l.np], l.gw, &dc[0], l.OutW, l.OutH, l.OutW, &sum[0], &tailTab[l.OutW%8])
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
		if l.S == 1 {
			copyRows(l.dyg[c*l.np:], l.gw, dc, l.OutW, l.OutH, l.OutW)
			continue
		}
		gc := l.dyg[c*l.np : (c+1)*l.np]
		for oy := 0; oy < l.OutH; oy++ {
			row := gc[oy*l.S*l.gw : oy*l.S*l.gw+(l.OutW-1)*l.S+1]
			for ox, v := range dc[oy*l.OutW : (oy+1)*l.OutW] {
				row[ox*l.S] = v
			}
		}
	}
}

// backwardStart prepares a backward pass over n examples of x and returns
// their grids, rebuilt unless they are the last training Forward's.
func (l *conv2D) backwardStart(x []float32, n int, wantDx bool) []float32 {
	in, ckk := l.InSize(), l.InC*l.K*l.K
	xg := l.grids(n)
	if l.cBatch == 0 && (l.savedN != n || l.savedX != &x[0]) {
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
	ckk := l.InC * l.K * l.K
	// The input gradient: dcol = Wᵀ·dy on the grid, then each tap's row
	// added at its offset (the adjoint of reading shifted windows), the K
	// taps of a kernel row at once: dst[o+p] += Σ_kx dcol[r0+kx, p−kx] for
	// p < npv+K−1. Each dcol row is zero at its junk columns and its last
	// K−1 positions and more (np ≥ npv+K−1), and dcolPad zeros precede
	// the first, so reads outside a row's valid positions add zeros.
	dcol := l.dcolg[dcolPad:]
	gemmNN(ckk, l.np, l.OutC, l.wT, l.OutC, l.dyg, l.np, dcol, l.np, false)
	w := (l.fh-1)*l.gw + l.fw + l.K - 1
	dst := dx
	if l.padded {
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
	if l.padded {
		for ci := 0; ci < l.InC; ci++ {
			copyRows(dx[ci*l.InH*l.InW:], l.InW, l.dxg[ci*l.plane+l.PadT*l.gw+l.PadL:], l.gw, l.InH, l.InW)
		}
	}
}

// backwardEnd adds the weight gradient gathered in dwpad to dw.
func (l *conv2D) backwardEnd() {
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

// convPoolReLU is a conv2D followed by 2×2 max pooling and a ReLU, as one
// layer (max(m+b, 0) for m the window's maximum, the same as biasing before
// pooling because rounding is monotone): the convolution's output stays on its grid, is pooled, biased
// and rectified in one pass, and only a one-hot code per window (which
// input is the first maximum, none if the ReLU is off) is kept for the
// backward pass, which writes the gradient straight onto the grid. This
// saves the full-size activation and gradient buffers and three passes
// over them. Parameters are the conv2D's, in its layout. The weight
// gradient of a convolution with many taps is taken from the list of
// routed gradients (at most one per window, none where the ReLU is off, so
// at most a quarter of the grid), as conv2D's sparse path does.
type convPoolReLU struct {
	*conv2D
	ph, pw int
	hot    []int32  // n × OutC × ph × pw codes: bit k for window cell k
	hwc    *hwcConv // the channels-last backward pass's scratch (conv_hwc.go)
}

func newConvPoolReLU(c *conv2D) *convPoolReLU {
	if c.S != 1 || c.OutH%2 != 0 || c.OutW%2 != 0 {
		panic("nn: convPoolReLU needs a stride-1 convolution with an even output")
	}
	return &convPoolReLU{conv2D: c, ph: c.OutH / 2, pw: c.OutW / 2}
}

func (l *convPoolReLU) OutSize() int { return l.OutC * l.ph * l.pw }

// backwardSparse is Backward from the list of routed gradients.
func (l *convPoolReLU) backwardSparse(dx, dy, x []float32, n int) {
	in, out := l.InSize(), l.OutSize()
	rows := l.InC * l.K
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
	l.sparseEnd()
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
	if l.sparse && l.hwcUsable() {
		l.backwardHWC(dx, dy, x, n)
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

// pool2D is max or average pooling of Size×Size windows with stride S
// over C×H×W inputs. Window (oy, ox) covers rows oy·S−PadT … and columns
// ox·S−PadL …; cells outside the input (padding, or rows and columns past
// the input) are not part of it: a maximum is over the window's cells in
// the input, an average divides by their number (TensorFlow's 'same'
// pooling, which excludes the padding). With no padding, trailing rows and
// columns that do not fill a window are dropped. Max pooling routes the
// gradient to the first maximum of each window (row by row).
type pool2D struct {
	C, H, W, Size, S int
	PadT, PadL       int
	OutH, OutW       int
	Avg              bool

	// The 2×2 kernels keep each window's code (which cell is its first
	// maximum) from the Forward of x and n for Backward; for a batch in
	// chunks (see chunker), the whole batch's, from cFirst of cBatch.
	code           []int32
	codeX          *float32
	codeN          int
	cFirst, cBatch int
}

func (l *pool2D) chunk(first, batch int) { l.cFirst, l.cBatch = first, batch }

// reads: the 2×2 kernels' Backward reads its Forward's codes, the others
// x and y.
func (l *pool2D) reads() (x, y bool) {
	k := !(l.max2() && useAsm)
	return k, k
}

// newPool returns Size×Size pooling with stride s and padT, padL cells of
// padding above and left, giving outH×outW outputs.
func newPool(c, h, w, size, s, padT, padL, outH, outW int, avg bool) *pool2D {
	return &pool2D{C: c, H: h, W: w, Size: size, S: s, PadT: padT, PadL: padL, OutH: outH, OutW: outW, Avg: avg}
}

// newMaxPool2D returns non-overlapping s×s max pooling; newAvgPool2D
// average pooling.
func newMaxPool2D(c, h, w, s int) *pool2D { return newPool(c, h, w, s, s, 0, 0, h/s, w/s, false) }
func newAvgPool2D(c, h, w, s int) *pool2D { return newPool(c, h, w, s, s, 0, 0, h/s, w/s, true) }

func (l *pool2D) InSize() int         { return l.C * l.H * l.W }
func (l *pool2D) OutSize() int        { return l.C * l.OutH * l.OutW }
func (l *pool2D) NumParams() int      { return 0 }
func (l *pool2D) Bind(_, _ []float32) {}
func (l *pool2D) Init(_ *rand.Rand)   {}

// max2 reports whether the layer is 2×2 max pooling with stride 2 and no
// padding, which has kernels of its own.
func (l *pool2D) max2() bool {
	return !l.Avg && l.Size == 2 && l.S == 2 && l.PadT == 0 && l.PadL == 0 && l.OutH == l.H/2 && l.OutW == l.W/2
}

func (l *pool2D) Forward(y, x []float32, n int) {
	l.codeN, l.codeX = 0, nil
	if n == 0 {
		return
	}
	if l.max2() {
		if useAsm {
			l.forwardMax2Asm(y, x, n)
		} else {
			l.forwardMax2(y, x, n)
		}
		return
	}
	oh, ow := l.OutH, l.OutW
	for p := 0; p < n*l.C; p++ { // one plane per (example, channel)
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			y0, y1 := l.span(oy, l.PadT, l.H)
			for ox := 0; ox < ow; ox++ {
				x0, x1 := l.span(ox, l.PadL, l.W)
				var v float32
				if l.Avg {
					for r := y0; r < y1; r++ {
						for _, t := range xp[r*l.W+x0 : r*l.W+x1] {
							v += t
						}
					}
					v /= float32((y1 - y0) * (x1 - x0))
				} else {
					v = xp[y0*l.W+x0]
					for r := y0; r < y1; r++ {
						for _, t := range xp[r*l.W+x0 : r*l.W+x1] {
							v = max(v, t)
						}
					}
				}
				yp[oy*ow+ox] = v
			}
		}
	}
}

// span is the range [lo, hi) of input rows (or columns) of output row o,
// with pad rows of padding before the first and size rows in the input.
func (l *pool2D) span(o, pad, size int) (lo, hi int) {
	lo = o*l.S - pad
	return max(lo, 0), min(lo+l.Size, size)
}

func (l *pool2D) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil || n == 0 {
		return
	}
	if l.max2() && useAsm && (l.cBatch > 0 || l.codeN == n && l.codeX == &x[0]) {
		l.backwardMax2Asm(dx, dy, n)
		return
	}
	if l.max2() && l.H%2 == 0 && l.W%2 == 0 {
		l.backwardMax2(dx, dy, x, y, n)
		return
	}
	oh, ow := l.OutH, l.OutW
	clear(dx[:n*l.InSize()])
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		dxp := dx[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		dyp := dy[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			y0, y1 := l.span(oy, l.PadT, l.H)
			for ox := 0; ox < ow; ox++ {
				x0, x1 := l.span(ox, l.PadL, l.W)
				g := dyp[oy*ow+ox]
				if l.Avg {
					g /= float32((y1 - y0) * (x1 - x0))
					for r := y0; r < y1; r++ {
						for i := range dxp[r*l.W+x0 : r*l.W+x1] {
							dxp[r*l.W+x0+i] += g
						}
					}
					continue
				}
				m := yp[oy*ow+ox]
			find:
				for r := y0; r < y1; r++ {
					for c := x0; c < x1; c++ {
						if xp[r*l.W+c] == m {
							dxp[r*l.W+c] += g
							break find
						}
					}
				}
			}
		}
	}
}

// maxMasks returns the groups of 8 windows per pooled row for the 2×2
// kernels and their masks for the last group: its input lanes (16) and
// its output lanes (8).
func (l *pool2D) maxMasks() (groups int, lmask, smask *int32) {
	groups = (l.OutW + 7) / 8
	last := l.OutW - 8*(groups-1)
	return groups, &maskTab[16-2*last], &maskTab[16-last]
}

// forwardMax2Asm is Forward for 2×2 max pooling on the AVX2 kernel, which
// also keeps each window's code for Backward. With an even number of rows
// the planes' pooled rows follow one another, so one call pools the batch.
func (l *pool2D) forwardMax2Asm(y, x []float32, n int) {
	oh, ow := l.OutH, l.OutW
	planes := n * l.C
	code := l.codes(n)
	l.codeN, l.codeX = n, &x[0]
	if oh == 0 || ow == 0 {
		return
	}
	groups, lmask, smask := l.maxMasks()
	calls, rows := planes, oh
	if l.H%2 == 0 {
		calls, rows = 1, planes*oh
	}
	for p := 0; p < calls; p++ {
		xp, yp, cp := x[p*l.H*l.W:], y[p*oh*ow:], code[p*oh*ow:]
		_ = xp[(2*rows-1)*l.W+2*ow-1]
		_ = yp[rows*ow-1]
		_ = cp[rows*ow-1]
		// Masked moves cost more than whole ones: the rows before the
		// last run whole, each overrun landing in a row written after it.
		whole := l.wholeRows(rows, groups)
		if whole > 0 {
			maxPool2Fwd(whole, groups, &xp[0], l.W, &yp[0], ow, &cp[0], nil, nil)
		}
		if rows > whole {
			xp, yp, cp = xp[2*whole*l.W:], yp[whole*ow:], cp[whole*ow:]
			maxPool2Fwd(rows-whole, groups, &xp[0], l.W, &yp[0], ow, &cp[0], lmask, smask)
		}
	}
}

// wholeRows is how many of rows pooled rows the 2×2 kernels can run with
// whole groups: all but the last, when a row's overrun (16 floats a group
// past 2·OutW input columns, 8 past OutW outputs) stays within the next
// row, which is written after it.
func (l *pool2D) wholeRows(rows, groups int) int {
	if 16*groups-2*l.OutW > l.W || 8*groups-l.OutW > l.OutW || l.W%2 != 0 {
		return 0
	}
	return rows - 1
}

// codes returns the window codes of a pass over n examples: the batch's
// from the chunk's first example, or the pass's own.
func (l *pool2D) codes(n int) []int32 {
	per := l.C * l.OutH * l.OutW
	first, batch := l.cFirst, l.cBatch
	if batch == 0 {
		first, batch = 0, n
	}
	if cap(l.code) < batch*per {
		l.code = make([]int32, batch*per)
	}
	l.code = l.code[:batch*per]
	return l.code[first*per:]
}

// backwardMax2Asm is Backward from the codes of the last Forward. The
// kernel writes every cell of the pooled rows and columns; a trailing odd
// row or column, in no window, is cleared first.
func (l *pool2D) backwardMax2Asm(dx, dy []float32, n int) {
	oh, ow := l.OutH, l.OutW
	planes := n * l.C
	if l.H%2 != 0 || l.W%2 != 0 {
		clear(dx[:n*l.InSize()])
	}
	if oh == 0 || ow == 0 {
		return
	}
	code := l.codes(n)
	groups, lmask, smask := l.maxMasks()
	calls, rows := planes, oh
	if l.H%2 == 0 {
		calls, rows = 1, planes*oh
	}
	for p := 0; p < calls; p++ {
		dxp, dyp, cp := dx[p*l.H*l.W:], dy[p*oh*ow:], code[p*oh*ow:]
		_ = dxp[(2*rows-1)*l.W+2*ow-1]
		_ = dyp[rows*ow-1]
		_ = cp[rows*ow-1]
		// The rows before the last may overrun into the next pair of rows,
		// which is written after them (see maxPool2Bwd).
		over := rows - 1
		if 16*groups-l.W > 2*ow || l.W%2 != 0 {
			over = 0
		}
		if over > 0 {
			maxPool2Bwd(over, groups, &dxp[0], l.W, &dyp[0], ow, &cp[0], lmask, smask, true)
		}
		dxp, dyp, cp = dxp[2*over*l.W:], dyp[over*ow:], cp[over*ow:]
		maxPool2Bwd(rows-over, groups, &dxp[0], l.W, &dyp[0], ow, &cp[0], lmask, smask, false)
	}
}

// forwardMax2 is Forward for 2×2 max pooling, with the builtin max, which
// compiles to branch-free MINSS/MAXSS sequences.
func (l *pool2D) forwardMax2(y, x []float32, n int) {
	oh, ow := l.OutH, l.OutW
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
func (l *pool2D) backwardMax2(dx, dy, x, y []float32, n int) {
	oh, ow := l.OutH, l.OutW
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

// activation applies Fn to Size floats per example: "relu", "tanh" or
// "sigmoid" element-wise, or "softmax" over the example's Size floats.
// (A linear activation is the identity, which a Sequential runs as a
// view.)
type activation struct {
	Size int
	Fn   string
}

// newReLU returns max(x, 0); newTanh returns tanh(x).
func newReLU(size int) *activation { return &activation{Size: size, Fn: "relu"} }
func newTanh(size int) *activation { return &activation{Size: size, Fn: "tanh"} }

func (l *activation) chunk(_, _ int)      {}
func (l *activation) reads() (x, y bool)  { return false, true }
func (l *activation) InSize() int         { return l.Size }
func (l *activation) OutSize() int        { return l.Size }
func (l *activation) NumParams() int      { return 0 }
func (l *activation) Bind(_, _ []float32) {}
func (l *activation) Init(_ *rand.Rand)   {}

func (l *activation) Forward(y, x []float32, n int) {
	x, y = x[:n*l.Size], y[:n*l.Size]
	switch l.Fn {
	case "tanh":
		for i, v := range x {
			y[i] = float32(math.Tanh(float64(v)))
		}
	case "sigmoid":
		for i, v := range x {
			y[i] = float32(1 / (1 + math.Exp(-float64(v))))
		}
	case "softmax":
		for e := 0; e < n; e++ {
			softmax(y[e*l.Size:(e+1)*l.Size], x[e*l.Size:(e+1)*l.Size])
		}
	default: // relu
		i := 0
		if useAsm {
			i = len(x) &^ 7
			if i > 0 {
				reluFwd8(i, &x[0], &y[0])
			}
		}
		for ; i < len(x); i++ {
			y[i] = max(x[i], 0)
		}
	}
}

// softmax writes y = exp(x − max x) / Σ exp(x − max x), summed in float64.
func softmax(y, x []float32) {
	m := x[0]
	for _, v := range x {
		m = max(m, v)
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - m))
	}
	for i, v := range x {
		y[i] = float32(math.Exp(float64(v-m)) / sum)
	}
}

func (l *activation) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil {
		return
	}
	dx, dy, y = dx[:n*l.Size], dy[:n*l.Size], y[:n*l.Size]
	switch l.Fn {
	case "tanh":
		for i, v := range y {
			dx[i] = dy[i] * (1 - v*v)
		}
	case "sigmoid":
		for i, v := range y {
			dx[i] = dy[i] * v * (1 - v)
		}
	case "softmax":
		// dx = y ⊙ (dy − Σ dy·y), the Jacobian of softmax applied to dy.
		for e := 0; e < n; e++ {
			ye, de, xe := y[e*l.Size:(e+1)*l.Size], dy[e*l.Size:(e+1)*l.Size], dx[e*l.Size:(e+1)*l.Size]
			var dot float64
			for i, v := range ye {
				dot += float64(v) * float64(de[i])
			}
			for i, v := range ye {
				xe[i] = v * float32(float64(de[i])-dot)
			}
		}
	default: // relu
		// dx = dy where y > 0, else 0, by masking bits: the sign of y is
		// random, so a branch would be mispredicted half the time.
		i := 0
		if useAsm {
			i = len(y) &^ 7
			if i > 0 {
				reluBwd8(i, &dy[0], &y[0], &dx[0])
			}
		}
		for ; i < len(y); i++ {
			dx[i] = math.Float32frombits(math.Float32bits(dy[i]) & posMask(math.Float32bits(y[i])))
		}
	}
}

// reshape changes the shape of its input and not its floats: Flatten,
// Reshape and the linear activation. A Sequential runs it as a view (its
// output and gradient buffers are its input's); on its own it copies.
// Feature maps are C×H×W row-major, so flattening them orders the vector
// channel by channel, row by row, as PyTorch's flatten of NCHW does.
type reshape struct{ Size int }

func (l *reshape) InSize() int                   { return l.Size }
func (l *reshape) OutSize() int                  { return l.Size }
func (l *reshape) NumParams() int                { return 0 }
func (l *reshape) Bind(_, _ []float32)           {}
func (l *reshape) Init(_ *rand.Rand)             {}
func (l *reshape) Forward(y, x []float32, n int) { copy(y[:n*l.Size], x[:n*l.Size]) }
func (l *reshape) Backward(dx, dy, _, _ []float32, n int) {
	if dx != nil {
		copy(dx[:n*l.Size], dy[:n*l.Size])
	}
}

// dense is a fully connected layer y = x·Wᵀ + b with W stored Out×In
// (PyTorch's layout), then Out biases.
type dense struct {
	In, Out    int
	WeightInit Init
	// KernelInit and BiasInit are as conv2D's.
	KernelInit, BiasInit *Initializer

	w, b, dw, db []float32
	dyT          []float32 // Out × n scratch for the weight gradient
}

func newDense(in, out int) *dense { return &dense{In: in, Out: out} }

func (l *dense) InSize() int    { return l.In }
func (l *dense) OutSize() int   { return l.Out }
func (l *dense) NumParams() int { return l.In*l.Out + l.Out }

// ParamShapes is PyTorch's Linear: weight [Out In], bias [Out].
func (l *dense) ParamShapes() [][]int { return [][]int{{l.Out, l.In}, {l.Out}} }

func (l *dense) Bind(params, grads []float32) {
	nw := l.In * l.Out
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *dense) Init(rng *rand.Rand) {
	initParams(rng, l.w, l.b, l.WeightInit, l.KernelInit, l.BiasInit, l.In, l.Out)
}

func (l *dense) Forward(y, x []float32, n int) {
	gemmNT(n, l.Out, l.In, x, l.In, l.w, l.In, y, l.Out, false)
	for e := 0; e < n; e++ {
		ye := y[e*l.Out : (e+1)*l.Out]
		for j, bj := range l.b {
			ye[j] += bj
		}
	}
}

func (l *dense) Backward(dx, dy, x, y []float32, n int) {
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
