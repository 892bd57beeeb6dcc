package nn

import (
	"math"
	"math/bits"
	"unsafe"
)

// The backward pass of a fused 3×3 convolution → ReLU → 2×2 max-pool
// (convPoolReLU) whose input has a multiple of 16 channels, on AVX-512:
// the classic Keras MNIST CNN's conv2 (32 → 64 channels on 26×26) and most
// 3×3 convolutions after the first.
//
// Max-pooling routes at most one gradient per window and the ReLU fewer,
// so at most a quarter of the convolution's output gradient is non-zero:
// the routed entries are listed (grid position, gradient, channel) and
// each adds its 3×3 window to the weight gradient and its channel's
// kernel to the input gradient. conv2D's sparse path does that on the
// planar grid, 8 floats per (channel, kernel row), of which a 3-wide
// kernel uses 3. Here the example's input grid is first copied channels
// last (pixel by pixel, the InC channels of a pixel contiguous), so that a
// tap of a window is InC contiguous floats: one output channel's weight
// gradient for 32 input channels is 9 taps × 2 vectors of 16, all kept
// in registers while its entries are added in order (hwcGrad32), and its
// input gradient the same 18 vectors of weights, kept in registers while
// each entry adds them, times its gradient, onto the window's 9 pixels of a
// channels-last input gradient (hwcScatter32), which is copied back to the
// planar layout at the end. Every multiply-add is a useful one, against
// 3 in 8 on the planar grid and 4 in 4 wasted on the dense product of the
// zeros.
//
// LeNet's convolutions (1 and 6 input channels, 5×5) do not take this
// path; the golden file pins their arithmetic.

// hwcConv is a convPoolReLU's scratch for the channels-last pass.
type hwcConv struct {
	pix, row int       // bytes per pixel and per grid row, channels last
	xh, dxh  []float32 // one example's input grid and its gradient, channels last
	wt, dwt  []float32 // OutC tap blocks of 9 × InC: the weights, the weight gradient
	starts   []int     // starts[c] is channel c's first listed entry
}

// hwcUsable reports whether the layer's backward pass runs channels last.
func (l *convPoolReLU) hwcUsable() bool {
	return useAsm && useAVX512 && l.K == 3 && l.S == 1 && l.InC%16 == 0
}

// alignedFloats returns n zero floats starting on a 64-byte boundary, so
// that the kernels' 16-float loads of a pixel's channels stay within a
// cache line.
func alignedFloats(n int) []float32 {
	b := make([]float32, n+15)
	off := (16 - int(uintptr(unsafe.Pointer(&b[0]))&63)/4) & 15
	return b[off : off+n : off+n]
}

func (l *convPoolReLU) hwcScratch() *hwcConv {
	if l.hwc == nil {
		c := l.InC
		l.hwc = &hwcConv{
			pix: 4 * c, row: 4 * c * l.gw,
			xh: alignedFloats(l.plane * c), dxh: alignedFloats(l.plane * c),
			wt: alignedFloats(l.OutC * 9 * c), dwt: alignedFloats(l.OutC * 9 * c),
			starts: make([]int, l.OutC+1),
		}
	}
	return l.hwc
}

// backwardHWC is Backward on the channels-last kernels.
func (l *convPoolReLU) backwardHWC(dx, dy, x []float32, n int) {
	in, out := l.InSize(), l.OutSize()
	xg := l.backwardStart(x, n, false)
	h := l.hwcScratch()
	c, taps := l.InC, 9*l.InC
	for co := 0; co < l.OutC; co++ {
		wc, tc := l.w[co*taps:(co+1)*taps], h.wt[co*taps:(co+1)*taps]
		for ci := 0; ci < c; ci++ {
			for t, v := range wc[ci*9 : ci*9+9] {
				tc[t*c+ci] = v
			}
		}
	}
	clear(h.dwt)
	// The kernels read the 3×3 window of every listed position, the last
	// of which is the last window's last cell: check the grids once.
	hiPos := (2*l.ph-1)*l.gw + 2*l.pw - 1
	_ = h.xh[(hiPos+2*l.gw+2)*c+c-1]
	_ = h.dxh[(hiPos+2*l.gw+2)*c+c-1]
	for e := 0; e < n; e++ {
		dye := dy[e*out : (e+1)*out]
		l.listRouted(dye, l.hot[e*out:(e+1)*out], h.starts)
		toChannelsLast(h.xh, xg[e*l.glen:e*l.glen+c*l.plane], c, l.plane)
		for co := 0; co < l.OutC; co++ {
			s, t := h.starts[co], h.starts[co+1]
			if s == t {
				continue
			}
			for cb := 0; cb < c; cb += 32 {
				acc := &h.dwt[co*taps+cb]
				if c-cb >= 32 {
					hwcGrad32(t-s, &l.pos[s], &l.g[s], &h.xh[cb], h.pix, h.row, acc)
				} else {
					hwcGrad16(t-s, &l.pos[s], &l.g[s], &h.xh[cb], h.pix, h.row, acc)
				}
			}
		}
		if dx == nil {
			continue
		}
		clear(h.dxh)
		for co := 0; co < l.OutC; co++ {
			s, t := h.starts[co], h.starts[co+1]
			if s == t {
				continue
			}
			for cb := 0; cb < c; cb += 32 {
				w := &h.wt[co*taps+cb]
				if c-cb >= 32 {
					hwcScatter32(t-s, &l.pos[s], &l.g[s], &h.dxh[cb], h.pix, h.row, w)
				} else {
					hwcScatter16(t-s, &l.pos[s], &l.g[s], &h.dxh[cb], h.pix, h.row, w)
				}
			}
		}
		l.fromChannelsLast(dx[e*in:(e+1)*in], h.dxh)
	}
	for co := 0; co < l.OutC; co++ {
		dwc, tc := l.dw[co*taps:(co+1)*taps], h.dwt[co*taps:(co+1)*taps]
		for ci := 0; ci < c; ci++ {
			for t := range dwc[ci*9 : ci*9+9] {
				dwc[ci*9+t] += tc[t*c+ci]
			}
		}
	}
}

// listRouted lists one example's routed gradients (its windows' codes
// he, pooled gradient dy) channel by channel into l.pos, l.g and l.ch,
// sets starts[c] to channel c's first entry (starts[OutC] to the count)
// and adds each channel's sum to db.
func (l *convPoolReLU) listRouted(dy []float32, he []int32, starts []int) {
	gw := l.gw
	cnt := 0
	pos, gs := l.pos[:l.OutC*l.ph*l.pw], l.g[:l.OutC*l.ph*l.pw]
	for c := 0; c < l.OutC; c++ {
		starts[c] = cnt
		var s0, s1 float32 // two sums: a single one is a latency chain
		for i := 0; i < l.ph; i++ {
			hr := he[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
			dr := dy[(c*l.ph+i)*l.pw : (c*l.ph+i+1)*l.pw]
			for j, h := range hr {
				// Written always, kept (cnt advanced) only for a routed
				// gradient: no branch on the random codes.
				cell := bits.TrailingZeros32(uint32(h)) & 3
				pos[cnt] = int32((2*i+cell>>1)*gw + 2*j + cell&1)
				gs[cnt] = dr[j]
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
	starts[l.OutC] = cnt
}

// toChannelsLast writes the c planes of plane floats in src pixel by
// pixel into dst: dst[p·c + ci] = src[ci·plane + p].
func toChannelsLast(dst, src []float32, c, plane int) {
	_ = dst[plane*c-1]
	_ = src[c*plane-1]
	for p0 := 0; p0 < plane; p0 += 8 {
		p1 := min(p0+8, plane)
		for ci := 0; ci < c; ci++ {
			row := src[ci*plane+p0 : ci*plane+p1]
			for i, v := range row {
				dst[(p0+i)*c+ci] = v
			}
		}
	}
}

// fromChannelsLast writes the input gradient dx (planar, InC×InH×InW) from
// its channels-last grid dxh, leaving out the padding.
func (l *convPoolReLU) fromChannelsLast(dx, dxh []float32) {
	c, hw := l.InC, l.InH*l.InW
	_ = dx[c*hw-1]
	for y := 0; y < l.InH; y++ {
		for x := 0; x < l.InW; x++ {
			px := dxh[((y+l.PadT)*l.gw+x+l.PadL)*c:][:c]
			for ci, v := range px {
				dx[ci*hw+y*l.InW+x] = v
			}
		}
	}
}
