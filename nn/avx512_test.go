package nn

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// withoutAVX512 runs f on the AVX2 kernels only.
func withoutAVX512(f func()) {
	defer func(v bool) { useAVX512 = v }(useAVX512)
	useAVX512 = false
	f()
}

// TestAVX512SameBits: the 64-column AVX-512 kernels (kernNN6x64,
// kernConv6x64, kernConv4x64) and gemmNN's panels give the very bits of
// the AVX2 kernels, which is what lets LeNet-5 run on them with its golden
// file unchanged.
func TestAVX512SameBits(t *testing.T) {
	if !useAsm || !useAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	same := func(t *testing.T, what string, a, b []float32) {
		t.Helper()
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("%s %d: AVX-512 %v, AVX2 %v", what, i, a[i], b[i])
			}
		}
	}
	for _, sh := range [][3]int{{6, 64, 5}, {13, 200, 70}, {64, 640, 288}, {128, 2100, 64}, {10, 784, 33}} {
		m, n, k := sh[0], sh[1], sh[2]
		for _, acc := range []bool{false, true} {
			t.Run(fmt.Sprintf("gemmNN_m%d_n%d_k%d_acc%v", m, n, k, acc), func(t *testing.T) {
				a, b, c := randSlice(rng, m*k), randSlice(rng, k*n), randSlice(rng, m*n)
				c2 := append([]float32(nil), c...)
				gemmNN(m, n, k, a, k, b, n, c, n, acc)
				withoutAVX512(func() { gemmNNAsm(m, n, k, a, k, b, n, c2, n, acc) })
				same(t, "C", c, c2)
			})
		}
	}
	for _, sh := range [][6]int{{1, 28, 28, 6, 5, 2}, {6, 14, 14, 16, 5, 0}, {32, 26, 26, 64, 3, 0}, {3, 20, 30, 10, 3, 1}} {
		t.Run(fmt.Sprintf("conv_%v", sh), func(t *testing.T) {
			const n = 2
			l := newConv2D(sh[0], sh[1], sh[2], sh[3], sh[4], sh[5])
			params := randSlice(rng, l.NumParams())
			l.Bind(params, make([]float32, len(params)))
			x := randSlice(rng, n*l.InSize())
			y, y2 := make([]float32, n*l.OutSize()), make([]float32, n*l.OutSize())
			l.Forward(y, x, n)
			withoutAVX512(func() { l.Forward(y2, x, n) })
			same(t, "y", y, y2)
		})
	}
}

// TestChannelsLastKernels: chanLast and chanFirst move every float to its
// place (16 and 48 channels, rows with and without a tail of 16), and
// listRouted16 lists the routed windows, in order, with their cells'
// positions and their sums by lane.
func TestChannelsLastKernels(t *testing.T) {
	if !useAsm || !useAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	for _, c := range []int{16, 48} {
		const plane, rows, w, lds = 7 * 11, 5, 19, 23
		src := make([]float32, c*plane)
		for i := range src {
			src[i] = float32(i)
		}
		dst := make([]float32, plane*c)
		chanLast(plane, c, &src[0], plane, &dst[0])
		for q := 0; q < plane; q++ {
			for ci := 0; ci < c; ci++ {
				if dst[q*c+ci] != src[ci*plane+q] {
					t.Fatalf("chanLast c=%d: pixel %d channel %d", c, q, ci)
				}
			}
		}
		hl := make([]float32, rows*lds*c)
		for i := range hl {
			hl[i] = float32(i)
		}
		out := make([]float32, c*rows*w+5)
		chanFirst(rows, w, c, &hl[0], lds, &out[0], rows*w)
		for ci := 0; ci < c; ci++ {
			for r := 0; r < rows; r++ {
				for x := 0; x < w; x++ {
					if out[ci*rows*w+r*w+x] != hl[(r*lds+x)*c+ci] {
						t.Fatalf("chanFirst c=%d: channel %d row %d column %d", c, ci, r, x)
					}
				}
			}
		}
		for _, v := range out[c*rows*w:] {
			if v != 0 {
				t.Fatalf("chanFirst c=%d wrote past the end", c)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 9))
	for _, n := range []int{16, 37, 144, 5} {
		const gw = 30
		hot, dy, base := make([]int32, n), randSlice(rng, n), make([]int32, n)
		for i := range hot {
			hot[i] = [5]int32{0, 1, 2, 4, 8}[rng.IntN(5)]
			base[i] = int32(rng.IntN(1000))
		}
		pos, g := make([]int32, n+16), make([]float32, n+16)
		var sum [16]float32
		cnt := listRouted16(n, &hot[0], &dy[0], &base[0], gw, &pos[0], &g[0], &sum[0])
		k := 0
		var want [16]float32
		for i, h := range hot {
			if h == 0 {
				continue
			}
			p := base[i] + map[int32]int32{1: 0, 2: 1, 4: gw, 8: gw + 1}[h]
			if k >= cnt || pos[k] != p || g[k] != dy[i] {
				t.Fatalf("n=%d: entry %d of %d: (%d, %v), want window %d's (%d, %v)", n, k, cnt, pos[k], g[k], i, p, dy[i])
			}
			want[i%16] += dy[i]
			k++
		}
		if k != cnt || sum != want {
			t.Fatalf("n=%d: %d entries and sums %v, want %d and %v", n, cnt, sum, k, want)
		}
	}
}
