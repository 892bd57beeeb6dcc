package nn

// fullGrad computes a stride-1, undilated convolution's input gradient
// as the full correlation of its output gradient with the flipped
// kernels, dx[ci] = Σ_{co,ky,kx} W[co,ci,ky,kx]·dy[co, y−ky, x−kx], on the
// forward pass's own offset kernels (convNN), instead of the product
// Wᵀ·dy (InC·KH·KW rows of the grid, written out and read back by
// shiftSum) that conv2D computes otherwise: the same products without
// that intermediate, which for 16 channels on a 34×34 grid outgrows L2.
// Graph turns it on for the convolutions that only batch normalizations
// take (useFull) and that Winograd's passes do not (useWino); the
// Sequential chains keep the product, so their results keep every bit.
//
// The output gradient is placed shifted by KH−1 rows and KW−1 columns in
// a plane of its own per channel (dyStride floats), zeros around it, so
// that every tap reads it at a non-negative offset: the convolution's
// dyg becomes that buffer, and its weight gradient reads the same rows
// through rowOffs.
type fullGrad struct {
	mp    int       // rows of w and xg: InC rounded as conv2D's mp
	n     int       // positions computed: the input's rows of the grid, a multiple of 16
	offs  []int     // by tap (co, ky, kx): its flipped offset in dyg
	w     []float32 // mp × OutC·KH·KW: w[ci][co,ky,kx] = W[co,ci,ky,kx]
	xg    []float32 // mp × n: the input gradient on the grid's rows
	first int       // the grid position of xg's first: row PadT
}

// useFull switches l to fullGrad when it is stride-1, undilated and
// not sparse (whose listing writes dyg itself); it allocates now, so
// that no training step does.
func (l *conv2D) useFull() {
	if l.SH != 1 || l.SW != 1 || l.DH != 1 || l.DW != 1 || l.phased || l.sparse || l.full != nil {
		return
	}
	gh := l.plane / l.gw
	l.dyOff = (l.KH-1)*l.gw + l.KW - 1
	// The weight gradient reads np positions from each channel's dyOff,
	// all zeros past its outputs: none may reach the next channel's.
	l.dyStride = max((gh+l.KH)*l.gw, l.dyOff+l.np)
	f := &fullGrad{mp: max(4, (l.InC+1)&^1), n: (l.InH*l.gw + 15) &^ 15, first: l.PadT * l.gw}
	kk := l.OutC * l.KH * l.KW
	f.offs = make([]int, kk)
	r := 0
	for co := 0; co < l.OutC; co++ {
		for ky := 0; ky < l.KH; ky++ {
			for kx := 0; kx < l.KW; kx++ {
				f.offs[r] = co*l.dyStride + (l.KH-1-ky)*l.gw + (l.KW - 1 - kx) + f.first
				r++
			}
		}
	}
	f.w = make([]float32, f.mp*kk)
	f.xg = make([]float32, f.mp*f.n)
	for i := range l.rowOffs {
		l.rowOffs[i] = l.dyOff + i*l.dyStride
	}
	l.dyg = make([]float32, len(l.rowOffs)*l.dyStride+f.first+f.n+16)
	l.full = f
}

// flip lays out l's weights for the correlation (f.w).
func (f *fullGrad) flip(l *conv2D) {
	kk, ckk, t := l.OutC*l.KH*l.KW, l.InC*l.KH*l.KW, l.KH*l.KW
	for co := 0; co < l.OutC; co++ {
		for ci := 0; ci < l.InC; ci++ {
			copy(f.w[ci*kk+co*t:ci*kk+(co+1)*t], l.w[co*ckk+ci*t:co*ckk+(ci+1)*t])
		}
	}
}

// inputGrad writes one example's input gradient dx from dyg.
func (f *fullGrad) inputGrad(l *conv2D, dx []float32) {
	convNN(f.mp, f.n, l.OutC*l.KH*l.KW, f.w, l.dyg, f.offs, f.xg)
	for ci := 0; ci < l.InC; ci++ {
		copyRows(dx[ci*l.InH*l.InW:], l.InW, f.xg[ci*f.n+l.PadL:], l.gw, l.InH, l.InW)
	}
}
