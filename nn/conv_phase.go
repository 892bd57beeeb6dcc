package nn

// The phased grid of a stride-2 convolution (see conv2D's phased).

// phase writes one example's input x into its phased grid g: cell
// (gy, gx) of channel ci's padded input goes to phase (gy mod 2, gx mod
// 2) at row gy/2, column gx/2. The padding is never written, so it stays
// zero from allocation.
func (l *conv2D) phase(g, x []float32) {
	hw := l.InH * l.InW
	for ci := 0; ci < l.InC; ci++ {
		for iy := 0; iy < l.InH; iy++ {
			gy := iy + l.PadT
			base := ci*l.plane + gy%2*2*l.pplane + gy/2*l.pgw
			for ix, v := range x[ci*hw+iy*l.InW : ci*hw+(iy+1)*l.InW] {
				gx := ix + l.PadL
				g[base+gx%2*l.pplane+gx/2] = v
			}
		}
	}
}

// unphase writes dx, C×InH×InW, from the phased grid g (the inverse of
// grid's layout).
func (l *conv2D) unphase(dx, g []float32) {
	hw := l.InH * l.InW
	for ci := 0; ci < l.InC; ci++ {
		for iy := 0; iy < l.InH; iy++ {
			gy := iy + l.PadT
			base := ci*l.plane + gy%2*2*l.pplane + gy/2*l.pgw
			row := dx[ci*hw+iy*l.InW : ci*hw+(iy+1)*l.InW]
			for ix := range row {
				gx := ix + l.PadL
				row[ix] = g[base+gx%2*l.pplane+gx/2]
			}
		}
	}
}
