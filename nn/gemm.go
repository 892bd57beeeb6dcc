package nn

// The two matrix products every layer is built from. Both take row-major
// operands with explicit strides so that layers can point them at views of
// larger buffers without copying, and both either overwrite C or add to it:
//
//	gemmNN: C (m×n) (+)= A (m×k) · B (k×n)
//	gemmNT: C (m×n) (+)= A (m×k) · Bᵀ, with B stored n×k
//
// On amd64 with AVX2 and FMA they run on the assembly micro-kernels of
// gemm_amd64.s: 6×16 and 4×16 register tiles for NN (masked at the right
// edge, an overlapping tile through a stack buffer at the bottom edge) and
// 3×4 tiles of dot products for NT; with AVX-512, 6×64 tiles for NN (the same
// bits) and, for k > ntWideK, 4×6 tiles of 16-lane dot products for NT
// (gemm_wide.go). The Go loops are the portable path. Every product sums in a
// fixed order, so results are reproducible run to run.
// Shapes are programmer errors: slices too short panic on the bounds checks.

// maskTab[16-w:32-w] selects the first w of 16 columns for the masked kernels.
var maskTab = [32]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// gemmNN computes C = A·B (acc false) or C += A·B (acc true).
func gemmNN(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !acc {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	// Bounds checks up front; the kernels index without them.
	_ = a[(m-1)*lda+k-1]
	_ = b[(k-1)*ldb+n-1]
	_ = c[(m-1)*ldc+n-1]
	if !useAsm {
		gemmNNGo(m, n, k, a, lda, b, ldb, c, ldc, acc)
		return
	}
	// A B too large for the core's L2 cache goes in panels of columns,
	// each read once for all the rows of A (a dense layer's 9216 inputs
	// × 128 outputs). Every element is still one kernel's sum over all of
	// k, so the blocking does not change a bit.
	if nb := max(64, gemmPanel/k&^63); n > nb {
		for j0 := 0; j0 < n; j0 += nb {
			gemmNNAsm(m, min(nb, n-j0), k, a, lda, b[j0:], ldb, c[j0:], ldc, acc)
		}
		return
	}
	gemmNNAsm(m, n, k, a, lda, b, ldb, c, ldc, acc)
}

// gemmPanel is the floats of B (k rows × columns) gemmNN works on at a
// time: 256 KiB, an eighth of the L2 cache of a core here.
const gemmPanel = 64 << 10

// gemmNNAsm is gemmNN on the kernels.
func gemmNNAsm(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	i := 0
	for ; i+6 <= m; i += 6 {
		j := 0
		if useAVX512 {
			for ; j+64 <= n; j += 64 {
				kernNN6x64(k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, acc)
			}
		}
		for ; j < n; j += 16 {
			if w := n - j; w >= 16 {
				kernNN6x16(k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, acc)
			} else {
				kernNN4x16m(k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, &maskTab[16-w], acc)
				kernNN1x16m(k, &a[(i+4)*lda], &b[j], ldb, &c[(i+4)*ldc+j], &maskTab[16-w], acc)
				kernNN1x16m(k, &a[(i+5)*lda], &b[j], ldb, &c[(i+5)*ldc+j], &maskTab[16-w], acc)
			}
		}
	}
	for ; i+4 <= m; i += 4 {
		for j := 0; j < n; j += 16 {
			if w := n - j; w >= 16 {
				kernNN4x16(k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, acc)
			} else {
				kernNN4x16m(k, &a[i*lda], lda, &b[j], ldb, &c[i*ldc+j], ldc, &maskTab[16-w], acc)
			}
		}
	}
	if i == m {
		return
	}
	if m < 4 {
		for ; i < m; i++ {
			for j := 0; j < n; j += 16 {
				kernNN1x16m(k, &a[i*lda], &b[j], ldb, &c[i*ldc+j], &maskTab[16-min(16, n-j)], acc)
			}
		}
		return
	}
	// The last m-i rows: compute the overlapping tile of rows m-4..m-1 into
	// a buffer and keep only the rows not done above.
	var tmp [4 * 16]float32
	i0 := m - 4
	for j := 0; j < n; j += 16 {
		w := min(16, n-j)
		kernNN4x16m(k, &a[i0*lda], lda, &b[j], ldb, &tmp[0], 16, &maskTab[16-w], false)
		for r := i - i0; r < 4; r++ {
			row := c[(i0+r)*ldc+j : (i0+r)*ldc+j+w]
			t := tmp[r*16 : r*16+w]
			if acc {
				for q := range row {
					row[q] += t[q]
				}
			} else {
				copy(row, t)
			}
		}
	}
}

// gemmNNGo is the portable gemmNN: row by row, an axpy per element of A.
func gemmNNGo(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for i := 0; i < m; i++ {
		ci := c[i*ldc : i*ldc+n]
		if !acc {
			clear(ci)
		}
		ai := a[i*lda : i*lda+k]
		for p, av := range ai {
			bp := b[p*ldb : p*ldb+n]
			for j, bv := range bp {
				ci[j] += av * bv
			}
		}
	}
}

// gemmNT computes C = A·Bᵀ (acc false) or C += A·Bᵀ (acc true), B stored n×k.
func gemmNT(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !acc {
			for i := 0; i < m; i++ {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	_ = a[(m-1)*lda+k-1]
	_ = b[(n-1)*ldb+k-1]
	_ = c[(m-1)*ldc+n-1]
	if useAsm && useAVX512 && k > ntWideK && m >= 4 && n >= 6 {
		gemmNTWide(m, n, k, a, lda, b, ldb, c, ldc, acc)
		return
	}
	if !useAsm || n < 4 || k < 8 {
		gemmNTGo(m, n, k, a, lda, b, ldb, c, ldc, acc)
		return
	}
	i := 0
	if k >= 8 {
		for ; i+3 <= m; i += 3 {
			nt3Rows(n, k, a[i*lda:], lda, b, ldb, c[i*ldc:], ldc, acc)
		}
	}
	for ; i < m; i++ {
		ai := a[i*lda : i*lda+k]
		ci := c[i*ldc : i*ldc+n]
		j := 0
		for ; j+4 <= n; j += 4 {
			dot4(ai, b[j*ldb:], ldb, ci[j:j+4], acc)
		}
		if j < n {
			// Overlapping last four columns into a buffer; keep the new ones.
			var tmp [4]float32
			dot4(ai, b[(n-4)*ldb:], ldb, tmp[:], false)
			for q := j; q < n; q++ {
				if acc {
					ci[q] += tmp[q-(n-4)]
				} else {
					ci[q] = tmp[q-(n-4)]
				}
			}
		}
	}
}

// nt3Rows computes three rows of C = A·Bᵀ (k ≥ 8, n ≥ 4) with the 3×4
// kernel: the right edge through an overlapping tile in a buffer, the
// k mod 8 tail in Go.
func nt3Rows(n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	k8 := k &^ 7
	for j := 0; j < n; j += 4 {
		j0 := min(j, n-4) // the last tile overlaps the one before
		var tmp [12]float32
		kernNT3x4(k8, &a[0], lda, &b[j0*ldb], ldb, &tmp[0], 4, false)
		for r := 0; r < 3; r++ {
			ar := a[r*lda : r*lda+k]
			for q := j; q < j0+4; q++ {
				v := tmp[r*4+q-j0]
				if k8 < k {
					bq := b[q*ldb+k8 : q*ldb+k]
					for p, av := range ar[k8:] {
						v += av * bq[p]
					}
				}
				if acc {
					c[r*ldc+q] += v
				} else {
					c[r*ldc+q] = v
				}
			}
		}
	}
}

// dot4 sets or adds c[j] = a · b[j*ldb : j*ldb+len(a)] for j < 4.
func dot4(a, b []float32, ldb int, c []float32, acc bool) {
	k := len(a)
	k8 := k &^ 7
	_ = b[3*ldb+k-1]
	kernNT1x4(k8, &a[0], &b[0], ldb, &c[0], acc)
	if k8 == k {
		return
	}
	for j := 0; j < 4; j++ {
		bj := b[j*ldb+k8 : j*ldb+k]
		var s float32
		for p, av := range a[k8:] {
			s += av * bj[p]
		}
		c[j] += s
	}
}

// gemmNTGo is the portable gemmNT: one dot product per element of C.
func gemmNTGo(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for i := 0; i < m; i++ {
		ai := a[i*lda : i*lda+k]
		for j := 0; j < n; j++ {
			bj := b[j*ldb : j*ldb+k]
			var s float32
			for p, av := range ai {
				s += av * bj[p]
			}
			if acc {
				c[i*ldc+j] += s
			} else {
				c[i*ldc+j] = s
			}
		}
	}
}

// copyRows copies rows rows of w floats from src (rows lds apart) to dst
// (rows ldd apart); addRows adds them instead.
func copyRows(dst []float32, ldd int, src []float32, lds, rows, w int) {
	moveRows(dst, ldd, src, lds, rows, w, false)
}
func addRows(dst []float32, ldd int, src []float32, lds, rows, w int) {
	moveRows(dst, ldd, src, lds, rows, w, true)
}

func moveRows(dst []float32, ldd int, src []float32, lds, rows, w int, add bool) {
	if rows == 0 || w == 0 {
		return
	}
	_ = dst[(rows-1)*ldd+w-1]
	_ = src[(rows-1)*lds+w-1]
	if useAsm {
		rowsKernel(&dst[0], ldd, &src[0], lds, rows, w, add)
		return
	}
	for r := 0; r < rows; r++ {
		d, s := dst[r*ldd:r*ldd+w], src[r*lds:r*lds+w]
		if add {
			for i, v := range s {
				d[i] += v
			}
		} else {
			copy(d, s)
		}
	}
}

// convNN computes C (m×n) = A (m×k) · B, where row p of B is
// b[offs[p] : offs[p]+n]; m is even and at least 4, n a multiple of 16,
// A is m×k with stride k and C m×n with stride n.
func convNN(m, n, k int, a, b []float32, offs []int, c []float32) {
	_ = a[m*k-1]
	_ = c[m*n-1]
	_ = offs[k-1]
	for _, o := range offs[:k] {
		_ = b[o+n-1]
	}
	if !useAsm {
		for i := 0; i < m; i++ {
			ci := c[i*n : (i+1)*n]
			clear(ci)
			for p, av := range a[i*k : (i+1)*k] {
				bp := b[offs[p] : offs[p]+n]
				for j, bv := range bp {
					ci[j] += av * bv
				}
			}
		}
		return
	}
	for i := 0; i < m; {
		// Tiles of 6 rows, and of 4 for the last 4 or 8.
		// AVX-512 takes 64 columns at a time with the same bits.
		j := 0
		if r := m - i; r >= 6 && r != 8 {
			if useAVX512 {
				for ; j+64 <= n; j += 64 {
					kernConv6x64(k, &a[i*k], k, &b[j], &offs[0], &c[i*n+j], n)
				}
			}
			for ; j < n; j += 16 {
				kernConv6x16(k, &a[i*k], k, &b[j], &offs[0], &c[i*n+j], n)
			}
			i += 6
			continue
		}
		if useAVX512 {
			for ; j+64 <= n; j += 64 {
				kernConv4x64(k, &a[i*k], k, &b[j], &offs[0], &c[i*n+j], n)
			}
		}
		for ; j < n; j += 16 {
			kernConv4x16(k, &a[i*k], k, &b[j], &offs[0], &c[i*n+j], n)
		}
		i += 4
	}
}

// convNT adds C (m×t, stride ldc) += A·Bᵀ, where row i of A is
// a[aoffs[i] : aoffs[i]+k] and row j of B is b[boffs[j] : boffs[j]+k]; m
// is a multiple of 3, t of 4 and k of 8.
func convNT(m, t, k int, a []float32, aoffs []int, b []float32, boffs []int, c []float32, ldc int) {
	_ = c[(m-1)*ldc+t-1]
	for _, o := range aoffs[:m] {
		_ = a[o+k-1]
	}
	for _, o := range boffs[:t] {
		_ = b[o+k-1]
	}
	if !useAsm {
		for i, ao := range aoffs[:m] {
			ai := a[ao : ao+k]
			for j, bo := range boffs[:t] {
				bj := b[bo : bo+k]
				var s float32
				for p, av := range ai {
					s += av * bj[p]
				}
				c[i*ldc+j] += s
			}
		}
		return
	}
	for i := 0; i < m; i += 3 {
		for j := 0; j < t; j += 4 {
			kernConvNT3x4(k, &a[0], &aoffs[i], &b[0], &boffs[j], &c[i*ldc+j], ldc, true)
		}
	}
}

// sparseRows checks the operands of gatherRows, given bounds the caller
// guarantees by construction for every entry: pos ≤ hiPos, ch ≤ hiCh.
func sparseRows(n int, pos []int32, g []float32, ch []int32, mat []float32, rows int, roffs []int, buf []float32, hiPos, hiCh int) {
	_, _, _ = pos[:n], g[:n], ch[:n]
	_ = roffs[rows-1]
	hiOff := 0
	for _, o := range roffs[:rows] {
		if o < 0 {
			panic("nn: negative row offset")
		}
		hiOff = max(hiOff, o)
	}
	_ = buf[hiPos+hiOff+7]
	_ = mat[(hiCh+1)*rows*8-1]
}

// gatherRows adds, for each entry e < n and row r < rows, g[e] times the
// 8 floats of x at pos[e]+roffs[r] onto the row (ch[e], r) of acc: the
// weight gradient of a convolution from a sparse output gradient. Every
// pos[e] must be in [0, hiPos] and ch[e] in [0, hiCh] (the kernels do not
// check each entry; the bounds are checked once). Every
// pos[e] must be in [0, hiPos] and ch[e] in [0, hiCh] (the kernels do not
// check each entry; the bounds are checked once).
func gatherRows(n int, pos []int32, g []float32, ch []int32, x []float32, rows int, roffs []int, acc []float32, hiPos, hiCh int) {
	if n == 0 {
		return
	}
	sparseRows(n, pos, g, ch, acc, rows, roffs, x, hiPos, hiCh)
	if useAsm && rows%5 == 0 {
		// Runs of one channel (the entries are grouped by channel), five
		// rows at a time with the sums in registers.
		for s := 0; s < n; {
			c := ch[s]
			t := s + 1
			for t < n && ch[t] == c {
				t++
			}
			for r := 0; r < rows; r += 5 {
				sparseGather5(t-s, &pos[s], &g[s], &x[0], &roffs[r], &acc[(int(c)*rows+r)*8])
			}
			s = t
		}
		return
	}
	if useAsm {
		sparseGather(n, &pos[0], &g[0], &ch[0], &x[0], rows, &roffs[0], &acc[0])
		return
	}
	for e := range n {
		for r, o := range roffs[:rows] {
			xr := x[int(pos[e])+o : int(pos[e])+o+8]
			a := acc[(int(ch[e])*rows+r)*8 : (int(ch[e])*rows+r)*8+8]
			for i, v := range xr {
				a[i] += g[e] * v
			}
		}
	}
}
