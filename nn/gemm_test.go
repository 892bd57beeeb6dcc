package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// refNN / refNT are float64 references for the products.
func refNN(m, n, k int, a []float32, lda int, b []float32, ldb int) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*lda+p]) * float64(b[p*ldb+j])
			}
			c[i*n+j] = s
		}
	}
	return c
}

func refNT(m, n, k int, a []float32, lda int, b []float32, ldb int) []float64 {
	c := make([]float64, m*n)
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p := 0; p < k; p++ {
				s += float64(a[i*lda+p]) * float64(b[j*ldb+p])
			}
			c[i*n+j] = s
		}
	}
	return c
}

func randSlice(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// TestGemm checks both products, overwrite and accumulate, on shapes that
// hit every kernel edge (rows mod 4, columns mod 16 and mod 4, k mod 8),
// with strides wider than the matrices, against float64 references; and
// checks that no element outside C is written.
func TestGemm(t *testing.T) {
	shapes := [][3]int{{1, 1, 1}, {1, 16, 3}, {2, 17, 9}, {3, 5, 8}, {4, 16, 1}, {4, 100, 150}, {5, 33, 7},
		{6, 784, 25}, {7, 10, 784}, {16, 100, 150}, {10, 784, 32}, {32, 120, 400}, {13, 84, 120}, {9, 3, 16},
		// 64-column tiles (AVX-512) and panels of columns (k·n > gemmPanel).
		{13, 1100, 70}, {20, 2200, 33}, {7, 200, 64},
		// Long dot products (k > ntWideK: AVX-512 tiles in blocks of k).
		{9, 13, 3000}, {64, 128, 2100}, {4, 6, 2049}, {5, 7, 4096}}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, nt := range []bool{false, true} {
			for _, acc := range []bool{false, true} {
				name := fmt.Sprintf("m%d_n%d_k%d_nt%v_acc%v", m, n, k, nt, acc)
				t.Run(name, func(t *testing.T) {
					lda, ldb, ldc := k+3, n+5, n+2
					if nt {
						ldb = k + 1
					}
					a := randSlice(rng, m*lda)
					var b []float32
					var want []float64
					if nt {
						b = randSlice(rng, n*ldb)
						want = refNT(m, n, k, a, lda, b, ldb)
					} else {
						b = randSlice(rng, k*ldb)
						want = refNN(m, n, k, a, lda, b, ldb)
					}
					c := randSlice(rng, m*ldc)
					orig := append([]float32(nil), c...)
					if nt {
						gemmNT(m, n, k, a, lda, b, ldb, c, ldc, acc)
					} else {
						gemmNN(m, n, k, a, lda, b, ldb, c, ldc, acc)
					}
					for i := 0; i < m; i++ {
						for j := 0; j < ldc; j++ {
							got := float64(c[i*ldc+j])
							if j >= n {
								if c[i*ldc+j] != orig[i*ldc+j] {
									t.Fatalf("C[%d,%d] outside the product was written", i, j)
								}
								continue
							}
							w := want[i*n+j]
							if acc {
								w += float64(orig[i*ldc+j])
							}
							if math.Abs(got-w) > 1e-4*math.Sqrt(float64(k))*(1+math.Abs(w)) {
								t.Fatalf("C[%d,%d] = %v, want %v", i, j, got, w)
							}
						}
					}
				})
			}
		}
	}
}

func TestMoveRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for w := 0; w <= 20; w++ {
		for _, add := range []bool{false, true} {
			const rows, lds, ldd = 3, 23, 25
			src := randSlice(rng, rows*lds)
			dst := randSlice(rng, rows*ldd)
			orig := append([]float32(nil), dst...)
			moveRows(dst, ldd, src, lds, rows, w, add)
			for r := 0; r < rows; r++ {
				for i := 0; i < ldd; i++ {
					want := orig[r*ldd+i]
					if i < w {
						if add {
							want += src[r*lds+i]
						} else {
							want = src[r*lds+i]
						}
					}
					if dst[r*ldd+i] != want {
						t.Fatalf("w %d add %v: dst[%d][%d] = %v, want %v", w, add, r, i, dst[r*ldd+i], want)
					}
				}
			}
		}
	}
}
