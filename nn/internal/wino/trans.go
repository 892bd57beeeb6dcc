package wino

// The tile transforms, 8 tiles at a time on amd64 (trans_amd64.s) and
// here otherwise; the Go versions take the same operations in the same
// order, so both give the same bits (the tests compare them). n, the
// tiles, is a multiple of 8; each kernel reads its n tiles' cells from a
// phased grid g (4 phases of pplane floats, rows pgw apart) and writes
// the 16 coordinates' planes ds floats apart, or reads them.

// inputTransform writes Bᵀ·d·B of tiles 0…n−1 of g, coordinate (u, v) of
// tile t at dst[(4u+v)·ds + t]; Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0
// −1] and cell (a, b) of tile t is g at phase (a mod 2, b mod 2), t + (a/2)
// rows + b/2.
func inputTransform(n int, g []float32, pplane, pgw int, dst []float32, ds int) {
	gridTransform(n, g, pplane, pgw, dst, ds, inputTransformAsm, inputTransformGo)
}

// gridTransform checks the operands of a transform from a phased grid
// (its reads reach at most one row and column past tile n−1, in phase
// 3) and runs the kernel, or the Go version without one.
func gridTransform(n int, g []float32, pplane, pgw int, dst []float32, ds int,
	kernel func(n int, grid *float32, pplane, pgw int, dst *float32, ds int),
	fallback func(n int, g []float32, pplane, pgw int, dst []float32, ds int)) {
	_ = g[3*pplane+pgw+n]
	_ = dst[15*ds+n-1]
	if useAsm {
		kernel(n, &g[0], pplane, pgw, &dst[0], ds)
		return
	}
	fallback(n, g, pplane, pgw, dst, ds)
}

func inputTransformGo(n int, g []float32, pplane, pgw int, dst []float32, ds int) {
	for t := 0; t < n; t++ {
		var d, tt [4][4]float32
		for a := 0; a < 4; a++ {
			for b := 0; b < 4; b++ {
				d[a][b] = g[(a%2*2+b%2)*pplane+a/2*pgw+b/2+t]
			}
			tt[a] = [4]float32{d[a][0] - d[a][2], d[a][1] + d[a][2], d[a][2] - d[a][1], d[a][1] - d[a][3]}
		}
		for v := 0; v < 4; v++ {
			dst[v*ds+t] = tt[0][v] - tt[2][v]
			dst[(4+v)*ds+t] = tt[1][v] + tt[2][v]
			dst[(8+v)*ds+t] = tt[2][v] - tt[1][v]
			dst[(12+v)*ds+t] = tt[1][v] - tt[3][v]
		}
	}
}

// outputRows writes Aᵀ·m·A of the tiles of th tile rows into the image
// y (2·th rows of w = 2·tw floats), coordinate ξ of tile t at m[ξ·ms + t],
// Aᵀ = [1 1 1 0; 0 1 −1 −1]: tile (i, j), t = i·pgw + j, gives y's rows
// 2i and 2i+1 at columns 2j and 2j+1.
func outputRows(th, tw int, m []float32, ms, pgw int, y []float32, w int) {
	// The kernel reads whole blocks of 8 tiles.
	_ = m[15*ms+(th-1)*pgw+(tw+7)&^7-1]
	_ = y[2*th*w-1]
	if useAsm && tw%4 == 0 {
		outputRowsAsm(th, tw, &m[0], ms, pgw, &y[0], w)
		return
	}
	outputRowsGo(th, tw, m, ms, pgw, y, w)
}

func outputRowsGo(th, tw int, m []float32, ms, pgw int, y []float32, w int) {
	for i := 0; i < th; i++ {
		for j := 0; j < tw; j++ {
			t := i*pgw + j
			var s [4][2]float32
			for a := 0; a < 4; a++ {
				m0, m1, m2, m3 := m[4*a*ms+t], m[(4*a+1)*ms+t], m[(4*a+2)*ms+t], m[(4*a+3)*ms+t]
				s[a] = [2]float32{m0 + m1 + m2, m1 - m2 - m3}
			}
			for b := 0; b < 2; b++ {
				y[2*i*w+2*j+b] = s[0][b] + s[1][b] + s[2][b]
				y[(2*i+1)*w+2*j+b] = s[1][b] - s[2][b] - s[3][b]
			}
		}
	}
}

// gradTransform writes A'·γ·A'ᵀ of tiles 0…n−1 of the phased output
// gradient g, coordinate (u, v) of tile t at dst[(4u+v)·ds + t]; A' is
// A = [1 0; 1 1; 1 −1; 0 −1] with its last row's sign turned (gradKernel
// turns it back), and cell (r, c) of tile t is the output gradient at
// row 2i+r, column 2j+c: the padded grid's cell (2i+r+1, 2j+c+1).
func gradTransform(n int, g []float32, pplane, pgw int, dst []float32, ds int) {
	gridTransform(n, g, pplane, pgw, dst, ds, gradTransformAsm, gradTransformGo)
}

func gradTransformGo(n int, g []float32, pplane, pgw int, dst []float32, ds int) {
	for t := 0; t < n; t++ {
		g00, g01 := g[3*pplane+t], g[2*pplane+1+t]
		g10, g11 := g[pplane+pgw+t], g[pgw+1+t]
		c := [4][2]float32{{g00, g10}, {g00 + g01, g10 + g11}, {g00 - g01, g10 - g11}, {g01, g11}}
		for v, cv := range c {
			dst[v*ds+t] = cv[0]
			dst[(4+v)*ds+t] = cv[0] + cv[1]
			dst[(8+v)*ds+t] = cv[0] - cv[1]
			dst[(12+v)*ds+t] = cv[1]
		}
	}
}

// deinterleave writes src's even-indexed floats to even and its odd ones
// to odd (phase's rows where phaseAsm does not go).
func deinterleave(even, odd, src []float32) {
	_, _ = even[:(len(src)+1)/2], odd[:len(src)/2]
	for i := 0; i+1 < len(src); i += 2 {
		even[i/2], odd[i/2] = src[i], src[i+1]
	}
	if len(src)%2 != 0 {
		even[len(src)/2] = src[len(src)-1]
	}
}
