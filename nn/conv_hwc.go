package nn

import "unsafe"

// The backward pass of a fused 3×3 convolution → ReLU → 2×2 max-pool
// (convPoolReLU) whose input has a multiple of 16 channels, on AVX-512:
// the classic Keras MNIST CNN's conv2 (32 → 64 channels on 26×26) and most
// 3×3 convolutions after the first.
//
// Max-pooling routes at most one gradient per window and the ReLU fewer,
// so at most a quarter of the convolution's output gradient is non-zero:
// the routed entries are listed channel by channel (grid position and
// gradient, 16 windows at a time with compressing stores, listRouted16)
// and each adds its 3×3 window to the weight gradient and its channel's
// kernel to the input gradient. conv2D's sparse path does that on the
// planar grid, 8 floats per (channel, kernel row), of which a 3-wide
// kernel uses 3. Here the example's input grid is first copied channels
// last (the InC channels of a pixel contiguous; a gather per pixel and 16
// channels, chanLast), so that a tap of a window is InC contiguous
// floats. One output channel's weight gradient for 32 input channels is
// then 9 taps × 2 vectors of 16, kept in registers while its entries are
// added in order (hwcGrad32); its input gradient is the same 18 vectors
// of weights, kept in registers while each entry adds them times its
// gradient onto its window's 9 pixels of a channels-last input gradient
// (hwcScatter32), copied back to the planar layout at the end
// (chanFirst). Every multiply-add is a useful one, where the planar
// grid's wastes 5 in 8 and a dense product 3 in 4 (on the zeros).
//
// LeNet's convolutions (1 and 6 input channels, 5×5) do not take this
// path; the golden file pins their arithmetic.

// hwcConv is a convPoolReLU's scratch for the channels-last pass.
type hwcConv struct {
	pix, row int       // bytes per pixel and per grid row, channels last
	xh, dxh  []float32 // one example's input grid and its gradient, channels last
	wt, dwt  []float32 // OutC tap blocks of 9 × InC: the weights, the weight gradient
	starts   []int     // starts[c] is channel c's first listed entry
	base     []int32   // base[i·pw+j]: grid position of window (i, j)'s top-left cell
}

// hwcUsable reports whether the layer's backward pass runs channels last.
func (l *convPoolReLU) hwcUsable() bool {
	return useAsm && useAVX512 && l.KH == 3 && l.KW == 3 && l.SH == 1 && l.SW == 1 && l.DH == 1 && l.DW == 1 && l.InC%16 == 0
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
			base:   make([]int32, l.ph*l.pw),
		}
		for i := 0; i < l.ph; i++ {
			for j := 0; j < l.pw; j++ {
				l.hwc.base[i*l.pw+j] = int32(2*i*l.gw + 2*j)
			}
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
// he, pooled gradient dy) channel by channel into l.pos and l.g, sets
// starts[c] to channel c's first entry (starts[OutC] to the count) and
// adds each channel's sum to db.
func (l *convPoolReLU) listRouted(dy []float32, he []int32, starts []int) {
	win := l.ph * l.pw
	base := l.hwc.base[:win]
	cnt := 0
	for c := 0; c < l.OutC; c++ {
		starts[c] = cnt
		// The kernel writes up to 16 entries past the channel's.
		_ = l.pos[cnt+win+15]
		_ = l.g[cnt+win+15]
		d, hc := dy[c*win:(c+1)*win], he[c*win:(c+1)*win]
		var sum [16]float32
		cnt += listRouted16(win, &hc[0], &d[0], &base[0], l.gw, &l.pos[cnt], &l.g[cnt], &sum[0])
		for w := 8; w > 0; w /= 2 {
			for i := range w {
				sum[i] += sum[i+w]
			}
		}
		l.db[c] += sum[0]
	}
	starts[l.OutC] = cnt
}

// toChannelsLast writes the c planes of plane floats in src pixel by
// pixel into dst: dst[p·c + ci] = src[ci·plane + p].
func toChannelsLast(dst, src []float32, c, plane int) {
	_ = dst[plane*c-1]
	_ = src[c*plane-1]
	chanLast(plane, c, &src[0], plane, &dst[0])
}

// fromChannelsLast writes the input gradient dx (planar, InC×InH×InW) from
// its channels-last grid dxh, leaving out the padding.
func (l *convPoolReLU) fromChannelsLast(dx, dxh []float32) {
	c, hw := l.InC, l.InH*l.InW
	first := (l.PadT*l.gw + l.PadL) * c
	_ = dx[c*hw-1]
	_ = dxh[first+((l.InH-1)*l.gw+l.InW)*c-1]
	if l.gw == l.InW {
		// No padding left or right: the rows follow one another.
		chanFirst(1, hw, c, &dxh[first], hw, &dx[0], hw)
		return
	}
	chanFirst(l.InH, l.InW, c, &dxh[first], l.gw, &dx[0], hw)
}
