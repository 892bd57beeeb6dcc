package nn

import (
	"math"
	"math/bits"
)

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
	if !c.plain() || c.OutH%2 != 0 || c.OutW%2 != 0 {
		panic("nn: convPoolReLU needs a stride-1 convolution with an even output")
	}
	return &convPoolReLU{conv2D: c, ph: c.OutH / 2, pw: c.OutW / 2}
}

func (l *convPoolReLU) OutSize() int { return l.OutC * l.ph * l.pw }

// backwardSparse is Backward from the list of routed gradients.
func (l *convPoolReLU) backwardSparse(dx, dy, x []float32, n int) {
	in, out := l.InSize(), l.OutSize()
	rows := l.InC * l.KH
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
