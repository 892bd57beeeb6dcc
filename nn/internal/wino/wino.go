// Package wino computes 3×3, stride-1 convolutions padded by one cell on
// every side (Keras's and PyTorch's "same" at stride 1) by Winograd's
// minimal filtering F(2×2, 3×3): each 2×2 block of outputs (a tile) takes
// 16 products per input and output channel instead of the direct
// convolution's 36, 2.25× fewer, for transforms of the tiles before and
// after the products that cost additions only. The products of one
// transform coordinate ξ over all tiles are a matrix product (output ×
// input channels by input channels × tiles), which the caller's kernels
// compute (Mul), so that they run on nn's assembly kernels.
//
// The three passes of training are the same scheme: the forward pass
// transforms the input (Bᵀ·d·B) and the weights (G·w·Gᵀ) and the
// products back (Aᵀ·m·A); the input gradient is the forward pass of the
// output gradient with the flipped kernels, channels swapped; the weight
// gradient transforms the output gradient's tiles (A·g·Aᵀ), sums their
// products with the input's transformed tiles over the tiles, and takes
// the sums back to the 3×3 kernel (Gᵀ·s·G), once a batch. F(2×2, 3×3)
// is the small tile whose transforms have coefficients 0, ±1 and ±½, so
// that in float32 its results differ from the direct convolution's by
// a few units in the last place (the tests bound it).
//
// Every sum is taken in a fixed order that depends on the shapes and on
// the examples' count only, never on the data: two replicas given the
// same batch compute the same bits.
//
// Layout. Each example's channel is laid out padded and phased: cell
// (gy, gx) of the padded input (one zero row and column around it) goes to
// phase (gy mod 2, gx mod 2) at row gy/2, column gx/2, each phase pgw =
// tw+1 floats a row for tw = W/2 tile columns. Tile (i, j) then reads
// phase (a mod 2, b mod 2) at row i+a/2, column j+b/2 for its cell (a, b),
// a stride-1 window on each phase: tile t = i·pgw + j, so that 8 tiles
// in a row of the vector kernels read 8 consecutive floats. The column j
// = tw of every tile row is junk (its outputs are dropped; its output
// gradient is zero).
package wino

import "fmt"

// Mul writes C (m×n, rows n floats apart) = A (m×k, rows k floats apart)
// · B, row p of B being b[offs[p] : offs[p]+n]; m is even and at least
// 4, n a multiple of 16 (nn's convNN).
type Mul func(m, n, k int, a, b []float32, offs []int, c []float32)

// MulNT adds C (m×t, rows ldc apart) += A·Bᵀ, row i of A being
// a[aoffs[i] : aoffs[i]+k] and row j of B b[boffs[j] : boffs[j]+k]; m is
// a multiple of 3, t of 4 and k of 8 (nn's convNT).
type MulNT func(m, t, k int, a []float32, aoffs []int, b []float32, boffs []int, c []float32, ldc int)

// Kernels are the caller's kernels the passes run on.
type Kernels struct {
	Mul   Mul
	MulNT MulNT
}

// tileTarget is the tiles a matrix product should have at least: the
// small images' tiles of several examples go into one product, so that
// its 16-column blocks are mostly full and its sums long; but no more
// examples than keep a group's transformed tiles and products (16 ×
// (in + out channels) × tiles floats) within groupBytes, a core's L2
// cache here, where the transforms leave them for the products.
const (
	tileTarget = 256
	groupBytes = 512 << 10
)

// Conv is one convolution's Winograd passes: InC input channels of H×W to
// OutC output channels of H×W. Its buffers are sized at New and grow
// with the batch (the kept grids), so that after the first batch a step
// allocates nothing.
type Conv struct {
	InC, OutC, H, W int
	k               Kernels

	th, tw, pgw  int // tile rows and columns, phase row width (tw + 1)
	pplane, glen int // floats of a phase and of an example's phased grid (all channels)
	tiles, tp    int // tiles per example (th·pgw) and that rounded up to 8
	group        int // examples per matrix product
	rows         int // tile rows per product: th, or fewer for a large image (group 1)
	nt           int // most tiles per product, rounded up to 16

	fwd, bwd passes // input → output and output gradient → input gradient

	xg     []float32 // the kept phased inputs, n × fwd's glen
	keptN  int
	keptX  *float32
	keptW  *float32  // the weights fwd.u holds
	dyg    []float32 // one group of phased output gradients
	gy     []float32 // 16 × mpo × nt: the output gradients' tiles for the weight gradient
	dwt    []float32 // 16 × m3 × t4: the weight gradient in the transform's domain
	aoffs  []int     // rows of gy by output channel, padded to 3
	boffs  []int     // rows of the inputs' tiles by input channel, padded to 4
	m3, t4 int
}

// passes is one direction's buffers: cin channels in, cout out.
type passes struct {
	cin, cout, mp int
	u             []float32 // 16 × mp × cin: the transformed kernels
	v             []float32 // 16 × cin × nt: the inputs' transformed tiles
	m             []float32 // 16 × mp × nt: the products
	offs          []int     // cin rows of v, nt apart
}

func newPasses(cin, cout, nt int) passes {
	p := passes{cin: cin, cout: cout, mp: max(4, (cout+1)&^1)}
	p.u = make([]float32, 16*p.mp*cin)
	p.v = make([]float32, 16*cin*nt)
	p.m = make([]float32, 16*p.mp*nt+8) // outputRows reads blocks of 8 tiles
	p.offs = make([]int, cin)
	for i := range p.offs {
		p.offs[i] = i * nt
	}
	return p
}

// New returns the passes of a 3×3 stride-1 convolution of inC channels
// of h×w to outC, padded by one on every side, on the kernels k. The
// image's sides are even (whole tiles: every output a tile computes is
// one of the image's).
func New(inC, outC, h, w int, k Kernels) (*Conv, error) {
	if inC < 1 || outC < 1 || h < 2 || w < 2 || h%2 != 0 || w%2 != 0 {
		return nil, fmt.Errorf("wino: %d channels of %d×%d to %d: want at least 1 channel each and even sides", inC, h, w, outC)
	}
	c := &Conv{InC: inC, OutC: outC, H: h, W: w, k: k}
	c.th, c.tw = h/2, w/2
	c.pgw = c.tw + 1
	c.tiles = c.th * c.pgw
	c.tp = (c.tiles + 7) &^ 7
	// A phase holds th+1 rows; the vector kernels read past the last
	// tile (up to tp, and one row and column on) into slack that stays
	// zero.
	c.pplane = (c.th+2)*c.pgw + 16
	c.glen = 4 * c.pplane
	bytes := func(tiles int) int { return 16 * 4 * (inC + outC + 2) * ((tiles + 15) &^ 15) }
	c.group, c.rows = 1, c.th
	for g := 2; (g-1)*c.tp < tileTarget && bytes(g*c.tp) <= groupBytes; g++ {
		c.group = g
	}
	if b := bytes(c.tp); b > groupBytes {
		// A large image goes in blocks of whole tile rows, as even as
		// can be.
		blocks := (b + groupBytes - 1) / groupBytes
		c.rows = (c.th + blocks - 1) / blocks
	}
	c.nt = (c.group*((c.rows*c.pgw+7)&^7) + 15) &^ 15
	c.fwd = newPasses(inC, outC, c.nt)
	c.bwd = newPasses(outC, inC, c.nt)
	c.dyg = make([]float32, c.group*outC*c.glen)
	c.m3, c.t4 = (outC+2)/3*3, (inC+3)&^3
	c.gy = make([]float32, 16*outC*c.nt)
	c.dwt = make([]float32, 16*c.m3*c.t4)
	c.aoffs = make([]int, c.m3)
	for i := range c.aoffs {
		c.aoffs[i] = min(i, outC-1) * c.nt
	}
	c.boffs = make([]int, c.t4)
	for i := range c.boffs {
		c.boffs[i] = min(i, inC-1) * c.nt
	}
	return c, nil
}

// grids returns room for n examples' phased grids of ch channels in buf,
// grown if needed (new room is zero: the padding is never written).
func grids(buf *[]float32, n, size int) []float32 {
	if cap(*buf) < n*size {
		*buf = make([]float32, n*size)
	}
	return (*buf)[:n*size]
}

// phase writes ch channels of h×w (x) into the phased grid g (pplane
// floats a phase, 4 phases a channel).
func (c *Conv) phase(g, x []float32, ch int) {
	hw := c.H * c.W
	if useAsm && c.W%8 == 0 {
		_ = x[ch*hw-1]
		_ = g[ch*c.glen-1] // a channel's writes stay in its glen floats
		phaseAsm(ch, c.H, c.W, &x[0], &g[0], c.glen, c.pplane, c.pgw)
		return
	}
	for ci := 0; ci < ch; ci++ {
		gc := g[ci*c.glen : (ci+1)*c.glen]
		for iy := 0; iy < c.H; iy++ {
			gy := iy + 1
			row := gc[gy%2*2*c.pplane+gy/2*c.pgw:]
			// Even input columns are odd grid columns (phase 1 from
			// column 0), odd ones even (phase 0 from column 1).
			deinterleave(row[c.pplane:c.pplane+c.tw], row[1:1+c.W/2], x[ci*hw+iy*c.W:ci*hw+(iy+1)*c.W])
		}
	}
}

// weights transforms w (cout × cin × 3 × 3) into p.u.
func (p *passes) weights(w []float32) {
	for co := 0; co < p.cout; co++ {
		for ci := 0; ci < p.cin; ci++ {
			u := kernelTransform((*[9]float32)(w[(co*p.cin+ci)*9:]))
			for xi, v := range u {
				p.u[(xi*p.mp+co)*p.cin+ci] = v
			}
		}
	}
}

// flipped lays out in p.u the transformed kernels of the transposed
// convolution, each kernel turned by 180°, from f's (the forward
// pass's): G·rev(g) is G·g with its rows 0 and 3 swapped, so the
// turned kernel's transform is f's with coordinates 0 and 3 swapped
// along both axes.
func (p *passes) flipped(f *passes) {
	swap := [4]int{3, 1, 2, 0}
	for xi := 0; xi < 16; xi++ {
		fx := 4*swap[xi/4] + swap[xi%4]
		for co := 0; co < p.cout; co++ { // f's input channels
			row := p.u[(xi*p.mp+co)*p.cin : (xi*p.mp+co+1)*p.cin]
			for ci := range row { // f's output channels
				row[ci] = f.u[(fx*f.mp+ci)*f.cin+co]
			}
		}
	}
}

// run computes tile rows r0 to r1 of the convolution of one group of ng
// examples whose phased grids (cin channels each, glen floats a channel)
// are g, into out (ng × cout × H × W); ng is 1 unless the rows are all.
func (c *Conv) run(p *passes, g []float32, ng, r0, r1 int, out []float32) {
	n8 := ((r1-r0)*c.pgw + 7) &^ 7 // tiles per example
	n := (ng*n8 + 15) &^ 15
	vs := p.cin * c.nt
	for e := 0; e < ng; e++ {
		for ci := 0; ci < p.cin; ci++ {
			inputTransform(n8, g[(e*p.cin+ci)*c.glen+r0*c.pgw:], c.pplane, c.pgw, p.v[ci*c.nt+e*n8:], vs)
		}
	}
	ms := p.mp * c.nt
	for xi := 0; xi < 16; xi++ {
		c.k.Mul(p.mp, n, p.cin, p.u[xi*p.mp*p.cin:(xi+1)*p.mp*p.cin], p.v[xi*vs:], p.offs, p.m[xi*ms:xi*ms+p.mp*n])
	}
	hw := c.H * c.W
	for e := 0; e < ng; e++ {
		for co := 0; co < p.cout; co++ {
			// The product's rows are n floats apart (Mul's C).
			y := out[(e*p.cout+co)*hw : (e*p.cout+co+1)*hw]
			outputRows(r1-r0, c.tw, p.m[co*n+e*n8:], ms, c.pgw, y[2*r0*c.W:2*r1*c.W], c.W)
		}
	}
}

// Forward writes y (n × OutC × H × W) = the convolution of x (n × InC × H
// × W) with w (OutC × InC × 3 × 3), plus bias[co] unless bias is nil.
// With keep it keeps x's grids for Backward.
func (c *Conv) Forward(y, x, w, bias []float32, n int, keep bool) {
	c.fwd.weights(w)
	c.keptW = &w[0]
	in, out := c.InC*c.H*c.W, c.OutC*c.H*c.W
	c.keptN, c.keptX = 0, nil
	var g []float32
	if keep && n > 0 {
		g = grids(&c.xg, n, c.InC*c.glen)
		c.keptN, c.keptX = n, &x[0]
	} else {
		g = grids(&c.xg, c.group, c.InC*c.glen)
	}
	for e0 := 0; e0 < n; e0 += c.group {
		ng := min(c.group, n-e0)
		ge := g
		if keep {
			ge = g[e0*c.InC*c.glen:]
		}
		for e := 0; e < ng; e++ {
			c.phase(ge[e*c.InC*c.glen:], x[(e0+e)*in:(e0+e+1)*in], c.InC)
		}
		for r0 := 0; r0 < c.th; r0 += c.rows {
			c.run(&c.fwd, ge, ng, r0, min(r0+c.rows, c.th), y[e0*out:(e0+ng)*out])
		}
	}
	if bias != nil {
		hw := c.H * c.W
		for e := 0; e < n; e++ {
			for co, b := range bias {
				yc := y[e*out+co*hw : e*out+(co+1)*hw]
				for i := range yc {
					yc[i] += b
				}
			}
		}
	}
}

// Backward adds the weight gradient of the batch (x, dy: n examples) to
// dw, the bias gradient to db unless it is nil, and writes the input
// gradient dx unless it is nil; w is the weights Forward had.
func (c *Conv) Backward(dx, dy, x, w, dw, db []float32, n int) {
	if n == 0 {
		return
	}
	in, out, hw := c.InC*c.H*c.W, c.OutC*c.H*c.W, c.H*c.W
	xs := c.InC * c.glen
	g := grids(&c.xg, n, xs)
	if c.keptN != n || c.keptX != &x[0] {
		for e := 0; e < n; e++ {
			c.phase(g[e*xs:], x[e*in:(e+1)*in], c.InC)
		}
	}
	if dx != nil {
		if c.keptW != &w[0] {
			c.fwd.weights(w) // the forward pass's are another's
		}
		c.bwd.flipped(&c.fwd)
	}
	clear(c.dwt)
	for e0 := 0; e0 < n; e0 += c.group {
		ng := min(c.group, n-e0)
		dyg := c.dyg[:ng*c.OutC*c.glen]
		for e := 0; e < ng; e++ {
			c.phase(dyg[e*c.OutC*c.glen:], dy[(e0+e)*out:(e0+e+1)*out], c.OutC)
		}
		for r0 := 0; r0 < c.th; r0 += c.rows {
			r1 := min(r0+c.rows, c.th)
			c.weightGrad(g[e0*xs:], dyg, ng, r0, r1)
			if dx != nil {
				c.run(&c.bwd, dyg, ng, r0, r1, dx[e0*in:(e0+ng)*in])
			}
		}
	}
	for co := 0; co < c.OutC; co++ {
		for ci := 0; ci < c.InC; ci++ {
			var s [16]float32
			for xi := range s {
				s[xi] = c.dwt[(xi*c.m3+co)*c.t4+ci]
			}
			d := gradKernel(&s)
			dk := dw[(co*c.InC+ci)*9 : (co*c.InC+ci)*9+9]
			for i, v := range d {
				dk[i] += v
			}
		}
	}
	if db != nil {
		for e := 0; e < n; e++ {
			for co := range db {
				var s float32
				for _, v := range dy[e*out+co*hw : e*out+(co+1)*hw] {
					s += v
				}
				db[co] += s
			}
		}
	}
}

// weightGrad adds to dwt the weight gradient of tile rows r0 to r1 of a
// group of ng examples, whose phased inputs are g and output gradients
// dyg.
func (c *Conv) weightGrad(g, dyg []float32, ng, r0, r1 int) {
	bt := (r1 - r0) * c.pgw
	n8 := (bt + 7) &^ 7
	gs, vs := c.OutC*c.nt, c.InC*c.nt
	for e := 0; e < ng; e++ {
		for co := 0; co < c.OutC; co++ {
			gradTransform(n8, dyg[(e*c.OutC+co)*c.glen+r0*c.pgw:], c.pplane, c.pgw, c.gy[co*c.nt+e*n8:], gs)
			if r1 < c.th {
				// Tiles past the block are the next block's: not here.
				for xi := 0; xi < 16; xi++ {
					clear(c.gy[xi*gs+co*c.nt+e*n8+bt : xi*gs+co*c.nt+e*n8+n8])
				}
			}
		}
		// The inputs' tiles, as the forward pass had them.
		for ci := 0; ci < c.InC; ci++ {
			inputTransform(n8, g[(e*c.InC+ci)*c.glen+r0*c.pgw:], c.pplane, c.pgw, c.fwd.v[ci*c.nt+e*n8:], vs)
		}
	}
	for xi := 0; xi < 16; xi++ {
		c.k.MulNT(c.m3, c.t4, ng*n8, c.gy[xi*gs:], c.aoffs, c.fwd.v[xi*vs:], c.boffs, c.dwt[xi*c.m3*c.t4:], c.t4)
	}
}

// kernelTransform is G·g·Gᵀ for the 3×3 kernel g (rows first), G the
// 4×3 matrix [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1].
func kernelTransform(g *[9]float32) [16]float32 {
	var t [12]float32 // G·g, 4 rows of 3
	for c := 0; c < 3; c++ {
		g0, g1, g2 := g[c], g[3+c], g[6+c]
		t[c], t[3+c], t[6+c], t[9+c] = g0, (g0+g1+g2)*0.5, (g0-g1+g2)*0.5, g2
	}
	var u [16]float32
	for r := 0; r < 4; r++ {
		t0, t1, t2 := t[3*r], t[3*r+1], t[3*r+2]
		u[4*r], u[4*r+1], u[4*r+2], u[4*r+3] = t0, (t0+t1+t2)*0.5, (t0-t1+t2)*0.5, t2
	}
	return u
}

// gradKernel is Gᵀ·(S∘s)·G, the weight gradient of a 3×3 kernel from
// the sums s of its transformed products. S negates row 3 and column 3
// (their product at (3, 3) twice): gradTransform leaves out A's −1
// there (see it).
func gradKernel(s *[16]float32) [9]float32 {
	var t [12]float32 // Gᵀ·(S∘s), 3 rows of 4; Gᵀ = [1 ½ ½ 0; 0 ½ −½ 0; 0 ½ ½ 1]
	for v := 0; v < 4; v++ {
		q0, q1, q2, q3 := s[v], s[4+v], s[8+v], -s[12+v]
		if v == 3 {
			q0, q1, q2, q3 = -q0, -q1, -q2, -q3
		}
		t[v], t[4+v], t[8+v] = q0+(q1+q2)*0.5, (q1-q2)*0.5, (q1+q2)*0.5+q3
	}
	var d [9]float32
	for r := 0; r < 3; r++ {
		t0, t1, t2, t3 := t[4*r], t[4*r+1], t[4*r+2], t[4*r+3]
		d[3*r], d[3*r+1], d[3*r+2] = t0+(t1+t2)*0.5, (t1-t2)*0.5, (t1+t2)*0.5+t3
	}
	return d
}
