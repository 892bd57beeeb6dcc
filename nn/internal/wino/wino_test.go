package wino

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// mulRef and mulNTRef are Mul and MulNT as plain loops.
func mulRef(m, n, k int, a, b []float32, offs []int, c []float32) {
	for i := 0; i < m; i++ {
		for j := 0; j < n; j++ {
			var s float32
			for p := 0; p < k; p++ {
				s += a[i*k+p] * b[offs[p]+j]
			}
			c[i*n+j] = s
		}
	}
}

var refKernels = Kernels{Mul: mulRef, MulNT: mulNTRef}

func mulNTRef(m, t, k int, a []float32, aoffs []int, b []float32, boffs []int, c []float32, ldc int) {
	for i := 0; i < m; i++ {
		for j := 0; j < t; j++ {
			var s float32
			for p := 0; p < k; p++ {
				s += a[aoffs[i]+p] * b[boffs[j]+p]
			}
			c[i*ldc+j] += s
		}
	}
}

func randSlice(r *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = r.Float32()*2 - 1
	}
	return s
}

// direct is the 3×3, stride-1, pad-1 convolution and its gradients in
// float64: y = conv(x, w) + b, and for dy, dx, dw and db.
func direct(x, w, b, dy []float32, n, inC, outC, h, wd int) (y, dx, dw, db []float64) {
	hw := h * wd
	y, dx = make([]float64, n*outC*hw), make([]float64, n*inC*hw)
	dw, db = make([]float64, outC*inC*9), make([]float64, outC)
	for e := 0; e < n; e++ {
		for co := 0; co < outC; co++ {
			for oy := 0; oy < h; oy++ {
				for ox := 0; ox < wd; ox++ {
					o := (e*outC+co)*hw + oy*wd + ox
					s := float64(b[co])
					g := float64(dy[o])
					db[co] += g
					for ci := 0; ci < inC; ci++ {
						for ky := 0; ky < 3; ky++ {
							for kx := 0; kx < 3; kx++ {
								iy, ix := oy+ky-1, ox+kx-1
								if iy < 0 || iy >= h || ix < 0 || ix >= wd {
									continue
								}
								xi := (e*inC+ci)*hw + iy*wd + ix
								wi := (co*inC+ci)*9 + ky*3 + kx
								s += float64(w[wi]) * float64(x[xi])
								dx[xi] += float64(w[wi]) * g
								dw[wi] += float64(x[xi]) * g
							}
						}
					}
					y[o] = s
				}
			}
		}
	}
	return y, dx, dw, db
}

// near reports the first element of got farther from want than tol
// times the scale (want's largest magnitude), or -1.
func near(got []float32, want []float64, tol float64) (int, float64) {
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i, v := range want {
		if d := math.Abs(float64(got[i]) - v); d > tol*max(scale, 1e-30) || math.IsNaN(float64(got[i])) {
			return i, d
		}
	}
	return -1, 0
}

// TestConvAgainstDirect: the forward pass, the input, weight and bias
// gradients equal the direct convolution's (in float64) to float32's
// rounding, for sides that the phasing kernel takes (multiples of 8) and
// that it leaves to Go, odd channel counts, groups of examples that do
// not divide the batch, large images in blocks of tile rows (the last
// of 28 tiles, not a multiple of 8), kept and rebuilt grids; and a
// second step on the same buffers gives the same bits.
func TestConvAgainstDirect(t *testing.T) {
	cases := []struct {
		name                 string
		inC, outC, h, w, n   int
		bias, keep, wantGrad bool
	}{
		{"one tile", 1, 1, 2, 2, 1, true, true, true},
		{"odd channels", 3, 5, 6, 10, 3, true, true, true},
		{"tall", 2, 3, 18, 2, 2, false, true, true},
		{"ResNet 8×8 in groups", 8, 10, 8, 8, 13, false, true, true},
		{"16×16 many channels", 17, 16, 16, 16, 5, true, false, true},
		{"32×32 in blocks of 8 tile rows", 16, 16, 32, 32, 2, false, true, true},
		{"blocks of 28 tiles", 64, 64, 16, 12, 2, true, true, true},
		{"wide", 4, 6, 4, 24, 4, true, true, true},
		{"wide, not kept", 5, 7, 2, 40, 3, true, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.inC), uint64(tc.h*100+tc.w)))
			hw := tc.h * tc.w
			x := randSlice(r, tc.n*tc.inC*hw)
			w := randSlice(r, tc.outC*tc.inC*9)
			b := randSlice(r, tc.outC)
			dy := randSlice(r, tc.n*tc.outC*hw)
			if !tc.bias {
				clear(b)
			}
			wy, wdx, wdw, wdb := direct(x, w, b, dy, tc.n, tc.inC, tc.outC, tc.h, tc.w)
			c, err := New(tc.inC, tc.outC, tc.h, tc.w, refKernels)
			if err != nil {
				t.Fatal(err)
			}
			if blocks := strings.Contains(tc.name, "blocks"); blocks != (c.rows < c.th) || blocks && c.group != 1 {
				t.Fatalf("%d examples of %d tile rows of %d: want blocks %v", c.group, c.rows, c.th, blocks)
			}
			if tc.name == "blocks of 28 tiles" && c.rows*c.pgw != 28 {
				t.Fatalf("blocks of %d tiles, want 28", c.rows*c.pgw)
			}
			var first [][]float32
			for step := 0; step < 2; step++ {
				y := make([]float32, len(wy))
				var bias []float32
				if tc.bias {
					bias = b
				}
				c.Forward(y, x, w, bias, tc.n, tc.keep)
				var dx []float32
				if tc.wantGrad {
					dx = make([]float32, len(x))
				}
				dw := make([]float32, len(w))
				db := make([]float32, tc.outC)
				c.Backward(dx, dy, x, w, dw, db, tc.n)
				if i, d := near(y, wy, 1e-5); i >= 0 {
					t.Fatalf("y[%d] = %v, want %v (off by %g)", i, y[i], wy[i], d)
				}
				if dx != nil {
					if i, d := near(dx, wdx, 1e-5); i >= 0 {
						t.Fatalf("dx[%d] = %v, want %v (off by %g)", i, dx[i], wdx[i], d)
					}
				}
				if i, d := near(dw, wdw, 1e-5); i >= 0 {
					t.Fatalf("dw[%d] = %v, want %v (off by %g)", i, dw[i], wdw[i], d)
				}
				if i, d := near(db, wdb, 1e-5); i >= 0 {
					t.Fatalf("db[%d] = %v, want %v (off by %g)", i, db[i], wdb[i], d)
				}
				got := [][]float32{y, dx, dw, db}
				if step == 0 {
					first = got
					continue
				}
				for i := range got {
					if !slices.Equal(got[i], first[i]) {
						t.Errorf("output %d of the second step differs from the first's", i)
					}
				}
			}
		})
	}
}

// TestNewRefuses: no channels, no pixels or an odd side is an error.
func TestNewRefuses(t *testing.T) {
	for _, s := range [][4]int{{0, 1, 2, 2}, {1, 0, 2, 2}, {1, 1, 0, 2}, {1, 1, 2, 0}, {1, 1, 3, 2}, {1, 1, 2, 5}, {1, 1, 1, 1}} {
		if _, err := New(s[0], s[1], s[2], s[3], refKernels); err == nil {
			t.Errorf("New%v: no error", s)
		}
	}
}

// TestTransformsAgainstMatrices: the input and gradient transforms
// equal their matrix products (Bᵀ·d·B, A·γ·Aᵀ with the last row's sign
// turned) in float64, and the kernels equal the Go versions bit for bit,
// for tile counts of 8 to 40 and odd row widths.
func TestTransformsAgainstMatrices(t *testing.T) {
	bt := [4][4]float64{{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}}
	ap := [4][2]float64{{1, 0}, {1, 1}, {1, -1}, {0, 1}}
	for _, s := range []struct{ n, pgw int }{{8, 3}, {16, 5}, {24, 17}, {40, 9}} {
		r := rand.New(rand.NewPCG(uint64(s.n), uint64(s.pgw)))
		pplane := s.n + 2*s.pgw + 16
		g := randSlice(r, 4*pplane)
		ds := s.n + 3
		cell := func(a, b, t int) float64 { return float64(g[(a%2*2+b%2)*pplane+a/2*s.pgw+b/2+t]) }

		in, inGo := make([]float32, 16*ds), make([]float32, 16*ds)
		inputTransform(s.n, g, pplane, s.pgw, in, ds)
		inputTransformGo(s.n, g, pplane, s.pgw, inGo, ds)
		gr, grGo := make([]float32, 16*ds), make([]float32, 16*ds)
		gradTransform(s.n, g, pplane, s.pgw, gr, ds)
		gradTransformGo(s.n, g, pplane, s.pgw, grGo, ds)
		for _, p := range []struct {
			name     string
			got, ref []float32
		}{{"input", in, inGo}, {"gradient", gr, grGo}} {
			if !slices.Equal(p.got, p.ref) {
				t.Errorf("n %d pgw %d: the %s kernel differs from its Go version", s.n, s.pgw, p.name)
			}
		}
		for tile := 0; tile < s.n; tile++ {
			for u := 0; u < 4; u++ {
				for v := 0; v < 4; v++ {
					var want, wantG float64
					for a := 0; a < 4; a++ {
						for b := 0; b < 4; b++ {
							want += bt[u][a] * cell(a, b, tile) * bt[v][b]
						}
					}
					// γ's cell (r, c) is the padded grid's (r+1, c+1).
					for rr := 0; rr < 2; rr++ {
						for cc := 0; cc < 2; cc++ {
							wantG += ap[u][rr] * cell(rr+1, cc+1, tile) * ap[v][cc]
						}
					}
					if d := math.Abs(float64(inGo[(4*u+v)*ds+tile]) - want); d > 1e-5 {
						t.Errorf("input transform tile %d (%d,%d) = %v, want %v", tile, u, v, inGo[(4*u+v)*ds+tile], want)
					}
					if d := math.Abs(float64(grGo[(4*u+v)*ds+tile]) - wantG); d > 1e-5 {
						t.Errorf("gradient transform tile %d (%d,%d) = %v, want %v", tile, u, v, grGo[(4*u+v)*ds+tile], wantG)
					}
				}
			}
		}
	}
}

// TestOutputRows: the output transform into the image equals Aᵀ·m·A in
// float64, and the kernel (tile columns a multiple of 4, in blocks of 8
// and a last 4) equals the Go version bit for bit and writes nothing
// past the image.
func TestOutputRows(t *testing.T) {
	at := [2][4]float64{{1, 1, 1, 0}, {0, 1, -1, -1}}
	for _, s := range []struct{ th, tw int }{{1, 4}, {4, 4}, {3, 8}, {2, 12}, {5, 16}, {2, 3}, {1, 1}} {
		r := rand.New(rand.NewPCG(uint64(s.th), uint64(s.tw)))
		pgw, w := s.tw+1, 2*s.tw
		ms := s.th*pgw + 8
		m := randSlice(r, 16*ms)
		y, yGo := make([]float32, 2*s.th*w+8), make([]float32, 2*s.th*w+8)
		outputRows(s.th, s.tw, m, ms, pgw, y[:2*s.th*w], w)
		outputRowsGo(s.th, s.tw, m, ms, pgw, yGo, w)
		if !slices.Equal(y, yGo) {
			t.Errorf("%d×%d tiles: the kernel differs from the Go version", s.th, s.tw)
		}
		for _, v := range y[2*s.th*w:] {
			if v != 0 {
				t.Fatalf("%d×%d tiles: wrote past the image", s.th, s.tw)
			}
		}
		for i := 0; i < s.th; i++ {
			for j := 0; j < s.tw; j++ {
				tile := i*pgw + j
				for a := 0; a < 2; a++ {
					for b := 0; b < 2; b++ {
						var want float64
						for u := 0; u < 4; u++ {
							for v := 0; v < 4; v++ {
								want += at[a][u] * float64(m[(4*u+v)*ms+tile]) * at[b][v]
							}
						}
						if got := yGo[(2*i+a)*w+2*j+b]; math.Abs(float64(got)-want) > 1e-5 {
							t.Errorf("%d×%d tiles: tile (%d,%d) output (%d,%d) = %v, want %v", s.th, s.tw, i, j, a, b, got, want)
						}
					}
				}
			}
		}
	}
}

// TestDeinterleave splits every length from 0 to 40, the kernel's blocks
// of 8 and the tails.
func TestDeinterleave(t *testing.T) {
	for n := 0; n <= 40; n++ {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(i + 1)
		}
		even, odd := make([]float32, (n+1)/2+1), make([]float32, n/2+1)
		deinterleave(even[:(n+1)/2], odd[:n/2], src)
		for i := 0; i < n; i++ {
			got := even[i/2]
			if i%2 != 0 {
				got = odd[i/2]
			}
			if got != src[i] {
				t.Fatalf("n %d: float %d went to %v, want %v", n, i, got, src[i])
			}
		}
		if even[(n+1)/2] != 0 || odd[n/2] != 0 {
			t.Errorf("n %d: wrote past the halves", n)
		}
	}
}

// TestBackwardWithoutItsForward: a Backward whose weights or inputs are
// not the last Forward's (another slice, or no Forward at all) lays out
// and transforms them anew, and its gradients are the direct ones.
func TestBackwardWithoutItsForward(t *testing.T) {
	const inC, outC, h, w, n = 9, 8, 8, 16, 3
	r := rand.New(rand.NewPCG(5, 6))
	hw := h * w
	x, wt := randSlice(r, n*inC*hw), randSlice(r, outC*inC*9)
	dy := randSlice(r, n*outC*hw)
	_, wdx, wdw, _ := direct(x, wt, make([]float32, outC), dy, n, inC, outC, h, w)
	for _, tc := range []struct {
		name    string
		forward bool
	}{{"no forward", false}, {"another slice", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(inC, outC, h, w, refKernels)
			if err != nil {
				t.Fatal(err)
			}
			if tc.forward {
				// A Forward on other inputs and weights, kept.
				c.Forward(make([]float32, n*outC*hw), randSlice(r, len(x)), randSlice(r, len(wt)), nil, n, true)
			}
			dx, dw := make([]float32, len(x)), make([]float32, len(wt))
			c.Backward(dx, dy, slices.Clone(x), slices.Clone(wt), dw, nil, n)
			if i, d := near(dx, wdx, 1e-5); i >= 0 {
				t.Fatalf("dx[%d] = %v, want %v (off by %g)", i, dx[i], wdx[i], d)
			}
			if i, d := near(dw, wdw, 1e-5); i >= 0 {
				t.Fatalf("dw[%d] = %v, want %v (off by %g)", i, dw[i], wdw[i], d)
			}
		})
	}
}
