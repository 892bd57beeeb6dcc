package nn

// ntWideK is the length of the dot products beyond which gemmNT runs on
// AVX-512 in blocks of k (gemmNTWide): a dense layer after a large
// feature map (the Keras CNN's 9216 inputs), not LeNet's (at most 400),
// whose sums the golden file pins.
const ntWideK = 2048

// ntBlockK is the k of a block: 1024 floats of 64 rows of A and of 128 of
// B make 768 KiB, which stay in a core's L2 cache while every tile of C
// reads them, where whole rows (9216 floats) would stream B from memory
// once per tile row.
const ntBlockK = 1024

// gemmNTWide is gemmNT (C (+)= A·Bᵀ) for k > ntWideK, m ≥ 4 and n ≥ 6 on
// the AVX-512 4×6 tiles of dot products (kernNT4x6), k in blocks of
// ntBlockK, each block's sums added to C. Edge tiles overlap the tiles
// before them and go through a buffer. Each element of C is the same
// arithmetic wherever its tile lies, so the split of a batch into shards
// does not change its bits.
func gemmNTWide(m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for k0 := 0; k0 < k; k0 += ntBlockK {
		kb := min(ntBlockK, k-k0)
		add := acc || k0 > 0
		for i := 0; i < m; i += 4 {
			i0 := min(i, m-4)
			for j := 0; j < n; j += 6 {
				j0 := min(j, n-6)
				if i0 == i && j0 == j {
					kernNT4x6(kb, &a[i*lda+k0], lda, &b[j*ldb+k0], ldb, &c[i*ldc+j], ldc, add)
					continue
				}
				var tmp [4 * 6]float32
				kernNT4x6(kb, &a[i0*lda+k0], lda, &b[j0*ldb+k0], ldb, &tmp[0], 6, false)
				for r := i - i0; r < 4; r++ {
					for q := j - j0; q < 6; q++ {
						if add {
							c[(i0+r)*ldc+j0+q] += tmp[r*6+q]
						} else {
							c[(i0+r)*ldc+j0+q] = tmp[r*6+q]
						}
					}
				}
			}
		}
	}
}
