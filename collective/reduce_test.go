package collective

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// BenchmarkFoldSum folds 1 MiB frames into a 64 MiB buffer the way a ring's
// reduce-scatter does (the frame hot in cache, the buffer not).
func BenchmarkFoldSum(b *testing.B) {
	const chunk = 1 << 20
	dst := make([]float32, 64<<20/4)
	src := make([]float32, chunk/4)
	for i := range src {
		src[i] = float32(i % 7)
	}
	fn := folder[float32](Sum)
	raw, sraw := asBytes(dst), asBytes(src)
	b.SetBytes(chunk)
	off := 0
	for b.Loop() {
		fn(raw[off:off+chunk], sraw, false)
		off = (off + chunk) % len(raw)
	}
}

// TestFoldSumMatchesScalar checks the vector sum against the plain loop,
// bit for bit, at lengths around the kernels' 16- and 32-element steps
// and at unaligned starts (a frame's payload starts anywhere).
func TestFoldSumMatchesScalar(t *testing.T) {
	t.Run("float32", func(t *testing.T) { testFoldSum[float32](t) })
	t.Run("float64", func(t *testing.T) { testFoldSum[float64](t) })
}

func testFoldSum[T float32 | float64](t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 1000} {
		for _, skip := range []int{0, 1, 3} {
			dst, src := make([]T, n+skip), make([]T, n+skip)
			for i := range dst {
				dst[i], src[i] = T(rng.NormFloat64()*1e3), T(rng.NormFloat64())
			}
			want := slices.Clone(dst[skip:])
			for i := range want {
				want[i] += src[skip+i]
			}
			fold(Sum, dst[skip:], src[skip:], false)
			for i, w := range want {
				if g := dst[skip+i]; g != w {
					t.Fatalf("n=%d skip=%d: element %d = %v, want %v", n, skip, i, g, w)
				}
			}
		}
	}
}
