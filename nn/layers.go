package nn

import (
	"math"
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
	// Init fills the bound parameters from rng (He or Glorot uniform
	// weights, zero biases), so a seed fixes the whole model.
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
)

func initUniform(rng *rand.Rand, w []float32, kind Init, fanIn, fanOut int) {
	bound := math.Sqrt(6 / float64(fanIn))
	if kind == Glorot {
		bound = math.Sqrt(6 / float64(fanIn+fanOut))
	}
	for i := range w {
		w[i] = float32((2*rng.Float64() - 1) * bound)
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
// padding Pad on every side, computed per example as an im2col matrix
// product. Weights are OutC×InC×K×K (PyTorch's layout), then OutC biases.
type Conv2D struct {
	InC, InH, InW, OutC, K, Pad int
	OutH, OutW                  int
	WeightInit                  Init

	w, b, dw, db []float32
	col, dcol    []float32 // InC·K·K × OutH·OutW scratch
	wT           []float32 // InC·K·K × OutC, transposed weights for the input gradient
}

// NewConv2D returns a convolution for InC×InH×InW inputs.
func NewConv2D(inC, inH, inW, outC, k, pad int) *Conv2D {
	l := &Conv2D{InC: inC, InH: inH, InW: inW, OutC: outC, K: k, Pad: pad,
		OutH: inH + 2*pad - k + 1, OutW: inW + 2*pad - k + 1}
	if l.OutH <= 0 || l.OutW <= 0 {
		panic("nn: Conv2D kernel larger than the padded input")
	}
	ckk := inC * k * k
	l.col = make([]float32, ckk*l.OutH*l.OutW)
	l.dcol = make([]float32, ckk*l.OutH*l.OutW)
	l.wT = make([]float32, ckk*outC)
	return l
}

func (l *Conv2D) InSize() int    { return l.InC * l.InH * l.InW }
func (l *Conv2D) OutSize() int   { return l.OutC * l.OutH * l.OutW }
func (l *Conv2D) NumParams() int { return l.OutC*l.InC*l.K*l.K + l.OutC }

func (l *Conv2D) Bind(params, grads []float32) {
	nw := l.OutC * l.InC * l.K * l.K
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *Conv2D) Init(rng *rand.Rand) {
	kk := l.K * l.K
	initUniform(rng, l.w, l.WeightInit, l.InC*kk, l.OutC*kk)
	clear(l.b)
}

// im2col writes col[(ci,ky,kx), (oy,ox)] = x[ci, oy+ky-Pad, ox+kx-Pad] (0 off the image).
func (l *Conv2D) im2col(col, x []float32) {
	hw := l.OutH * l.OutW
	r := 0
	for ci := 0; ci < l.InC; ci++ {
		xc := x[ci*l.InH*l.InW : (ci+1)*l.InH*l.InW]
		for ky := 0; ky < l.K; ky++ {
			for kx := 0; kx < l.K; kx++ {
				row := col[r*hw : (r+1)*hw]
				r++
				lo, hi := max(0, l.Pad-kx), min(l.OutW, l.InW+l.Pad-kx)
				for oy := 0; oy < l.OutH; oy++ {
					dst := row[oy*l.OutW : (oy+1)*l.OutW]
					iy := oy + ky - l.Pad
					if iy < 0 || iy >= l.InH {
						clear(dst)
						continue
					}
					clear(dst[:lo])
					src := xc[iy*l.InW+lo+kx-l.Pad:]
					copy(dst[lo:hi], src[:hi-lo])
					clear(dst[hi:])
				}
			}
		}
	}
}

// col2im adds col back onto dx, the adjoint of im2col.
func (l *Conv2D) col2im(dx, col []float32) {
	hw := l.OutH * l.OutW
	r := 0
	for ci := 0; ci < l.InC; ci++ {
		xc := dx[ci*l.InH*l.InW : (ci+1)*l.InH*l.InW]
		for ky := 0; ky < l.K; ky++ {
			for kx := 0; kx < l.K; kx++ {
				row := col[r*hw : (r+1)*hw]
				r++
				lo, hi := max(0, l.Pad-kx), min(l.OutW, l.InW+l.Pad-kx)
				for oy := 0; oy < l.OutH; oy++ {
					iy := oy + ky - l.Pad
					if iy < 0 || iy >= l.InH {
						continue
					}
					src := row[oy*l.OutW+lo : oy*l.OutW+hi]
					dst := xc[iy*l.InW+lo+kx-l.Pad:]
					dst = dst[:len(src)]
					for i, v := range src {
						dst[i] += v
					}
				}
			}
		}
	}
}

func (l *Conv2D) Forward(y, x []float32, n int) {
	in, out, hw, ckk := l.InSize(), l.OutSize(), l.OutH*l.OutW, l.InC*l.K*l.K
	for e := 0; e < n; e++ {
		l.im2col(l.col, x[e*in:(e+1)*in])
		ye := y[e*out : (e+1)*out]
		for c, bc := range l.b {
			yc := ye[c*hw : (c+1)*hw]
			for i := range yc {
				yc[i] = bc
			}
		}
		gemmNN(l.OutC, hw, ckk, l.w, ckk, l.col, hw, ye, hw, true)
	}
}

func (l *Conv2D) Backward(dx, dy, x, y []float32, n int) {
	in, out, hw, ckk := l.InSize(), l.OutSize(), l.OutH*l.OutW, l.InC*l.K*l.K
	if dx != nil {
		for c := 0; c < l.OutC; c++ {
			for r := 0; r < ckk; r++ {
				l.wT[r*l.OutC+c] = l.w[c*ckk+r]
			}
		}
	}
	for e := 0; e < n; e++ {
		dye := dy[e*out : (e+1)*out]
		for c := range l.db {
			var s float32
			for _, v := range dye[c*hw : (c+1)*hw] {
				s += v
			}
			l.db[c] += s
		}
		l.im2col(l.col, x[e*in:(e+1)*in])
		gemmNT(l.OutC, ckk, hw, dye, hw, l.col, hw, l.dw, ckk, true)
		if dx != nil {
			gemmNN(ckk, hw, l.OutC, l.wT, l.OutC, dye, hw, l.dcol, hw, false)
			dxe := dx[e*in : (e+1)*in]
			clear(dxe)
			l.col2im(dxe, l.dcol)
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
	for i, v := range y {
		if v > 0 {
			dx[i] = dy[i]
		} else {
			dx[i] = 0
		}
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

func (l *Dense) Bind(params, grads []float32) {
	nw := l.In * l.Out
	l.w, l.b = params[:nw:nw], params[nw:l.NumParams()]
	l.dw, l.db = grads[:nw:nw], grads[nw:l.NumParams()]
}

func (l *Dense) Init(rng *rand.Rand) {
	initUniform(rng, l.w, l.WeightInit, l.In, l.Out)
	clear(l.b)
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
