package nn

import "math"

// The sparse weight gradient of a convolution (see conv2D's sparse).

// listGrad lists the non-zero entries of one example's output gradient
// (grid position, value, channel), grouped by channel, adds the channel
// sums to db, and returns how many there are and whether it also placed
// the gradient on the grid dyg (as placeGrad does).
func (l *conv2D) listGrad(dy []float32) (int, bool) {
	hw, ow, gw, sh, sw := l.OutH*l.OutW, l.OutW, l.gw, l.SH, l.SW
	if useAsm && sh == 1 && sw == 1 {
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
			base := int32(oy * sh * gw)
			row := dc[oy*ow : (oy+1)*ow]
			for ox := 0; ox+1 < len(row); ox += 2 {
				// Written always, kept (cnt advanced) only when non-zero:
				// no branch on the data.
				v0, v1 := row[ox], row[ox+1]
				pos[cnt], ch[cnt], gs[cnt] = base+int32(ox*sw), int32(c), v0
				b := math.Float32bits(v0) << 1 // ±0 alike
				cnt += int((b | -b) >> 31)
				pos[cnt], ch[cnt], gs[cnt] = base+int32((ox+1)*sw), int32(c), v1
				b = math.Float32bits(v1) << 1
				cnt += int((b | -b) >> 31)
				s0 += v0
				s1 += v1
			}
			if ow%2 != 0 {
				v := row[ow-1]
				pos[cnt], ch[cnt], gs[cnt] = base+int32((ow-1)*sw), int32(c), v
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
	hiPos := (l.OutH-1)*l.SH*l.gw + (l.OutW-1)*l.SW
	gatherRows(cnt, l.pos, l.g, l.ch, g, l.InC*l.KH, l.roffs, l.dwp, hiPos, l.OutC-1)
}

// sparseEnd adds the weight gradient gathered in dwp to dw.
func (l *conv2D) sparseEnd() {
	k, ckk, rows := l.KW, l.InC*l.KH*l.KW, l.InC*l.KH
	for c := 0; c < l.OutC; c++ {
		for r := 0; r < rows; r++ {
			dwr := l.dw[c*ckk+r*k : c*ckk+(r+1)*k]
			for kx, v := range l.dwp[(c*rows+r)*8 : (c*rows+r)*8+k] {
				dwr[kx] += v
			}
		}
	}
}
