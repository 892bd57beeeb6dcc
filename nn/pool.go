package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// MaxPooling2D takes the maximum of each Size×Size window, moved Strides
// cells at a time (0 means Size: windows side by side), with Valid or Same
// padding (padding cells are never a window's maximum).
type MaxPooling2D struct {
	Size, Strides int
	Padding       Padding
}

// AveragePooling2D averages each Size×Size window, as MaxPooling2D places
// them; with Same padding a window averages only its cells inside the
// input.
type AveragePooling2D struct {
	Size, Strides int
	Padding       Padding
}

func (MaxPooling2D) kind() string     { return "max_pooling2d" }
func (AveragePooling2D) kind() string { return "average_pooling2d" }

func init() {
	register("max_pooling2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j poolJSON) (LayerSpec, error) {
			pad, err := parsePadding(j.Padding)
			return MaxPooling2D{Size: j.Size, Strides: j.Strides, Padding: pad}, err
		})
	})
	register("average_pooling2d", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j poolJSON) (LayerSpec, error) {
			pad, err := parsePadding(j.Padding)
			return AveragePooling2D{Size: j.Size, Strides: j.Strides, Padding: pad}, err
		})
	})
}

// poolSpec is what the two pooling specs share.
type poolSpec struct {
	size, strides int
	pad           Padding
	avg           bool
	kind          string
}

func (m MaxPooling2D) pool() poolSpec {
	return poolSpec{m.Size, m.Strides, m.Padding, false, m.kind()}
}

func (a AveragePooling2D) pool() poolSpec {
	return poolSpec{a.Size, a.Strides, a.Padding, true, a.kind()}
}

func (m MaxPooling2D) build(in Shape) (layer, Shape, error)     { return m.pool().build(in) }
func (a AveragePooling2D) build(in Shape) (layer, Shape, error) { return a.pool().build(in) }
func (m MaxPooling2D) bound(in Shape) (Shape, int, bool, error) { return m.pool().bound(in) }
func (a AveragePooling2D) bound(in Shape) (Shape, int, bool, error) {
	return a.pool().bound(in)
}
func (m MaxPooling2D) encode() (any, error)     { return m.pool().encode(), nil }
func (a AveragePooling2D) encode() (any, error) { return a.pool().encode(), nil }

// build builds a pooling layer.
func (p poolSpec) build(in Shape) (layer, Shape, error) {
	if in.vector() {
		return nil, Shape{}, errVector
	}
	if p.size < 1 || p.strides < 0 {
		return nil, Shape{}, fmt.Errorf("pool size %d, stride %d: want a size ≥ 1 and a stride ≥ 0 (0 for the size)", p.size, p.strides)
	}
	s := p.stride()
	oh, pt, _, err := window(in.H, p.size, s, p.pad)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("pool %d×%d over %v: %w", p.size, p.size, in, err)
	}
	ow, pl, _, err := window(in.W, p.size, s, p.pad)
	if err != nil {
		return nil, Shape{}, fmt.Errorf("pool %d×%d over %v: %w", p.size, p.size, in, err)
	}
	return newPool(in.C, in.H, in.W, p.size, s, pt, pl, oh, ow, p.avg), Shape{H: oh, W: ow, C: in.C}, nil
}

// stride is the stride a stride of 0 stands for.
func (p poolSpec) stride() int {
	if p.strides == 0 {
		return p.size
	}
	return p.strides
}

// bound: a window past the limits is refused before its output is sized.
func (p poolSpec) bound(in Shape) (Shape, int, bool, error) {
	if in.vector() || p.size < 1 || p.strides < 0 {
		return Shape{}, 0, false, nil
	}
	if p.size > maxExample {
		return Shape{}, 0, false, fmt.Errorf("pool %d×%d", p.size, p.size)
	}
	oh, _, _, err := window(in.H, p.size, p.stride(), p.pad)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	ow, _, _, err := window(in.W, p.size, p.stride(), p.pad)
	if err != nil {
		return Shape{}, 0, false, nil
	}
	return Shape{H: oh, W: ow, C: in.C}, 0, true, nil
}

// poolJSON is the pooling specs' JSON.
type poolJSON struct {
	Type    string `json:"type"`
	Size    int    `json:"size"`
	Strides int    `json:"strides"`
	Padding string `json:"padding"`
}

func (p poolSpec) encode() poolJSON {
	return poolJSON{Type: p.kind, Size: p.size, Strides: p.stride(), Padding: p.pad.String()}
}

// pool2D is max or average pooling of Size×Size windows with stride S
// over C×H×W inputs. Window (oy, ox) covers rows oy·S−PadT … and columns
// ox·S−PadL …; cells outside the input (padding, or rows and columns past
// the input) are not part of it: a maximum is over the window's cells in
// the input, an average divides by their number (TensorFlow's 'same'
// pooling, which excludes the padding). With no padding, trailing rows and
// columns that do not fill a window are dropped. Max pooling routes the
// gradient to the first maximum of each window (row by row).
type pool2D struct {
	C, H, W, Size, S int
	PadT, PadL       int
	OutH, OutW       int
	Avg              bool

	// The 2×2 kernels keep each window's code (which cell is its first
	// maximum) from the Forward of x and n for Backward; for a batch in
	// chunks (see chunker), the whole batch's, from cFirst of cBatch.
	code           []int32
	codeX          *float32
	codeN          int
	cFirst, cBatch int
}

func (l *pool2D) chunk(first, batch int) { l.cFirst, l.cBatch = first, batch }

// reads: the 2×2 kernels' Backward reads its Forward's codes, the others
// x and y.
func (l *pool2D) reads() (x, y bool) {
	k := !(l.max2() && useAsm)
	return k, k
}

// newPool returns Size×Size pooling with stride s and padT, padL cells of
// padding above and left, giving outH×outW outputs.
func newPool(c, h, w, size, s, padT, padL, outH, outW int, avg bool) *pool2D {
	return &pool2D{C: c, H: h, W: w, Size: size, S: s, PadT: padT, PadL: padL, OutH: outH, OutW: outW, Avg: avg}
}

// newMaxPool2D returns non-overlapping s×s max pooling; newAvgPool2D
// average pooling.
func newMaxPool2D(c, h, w, s int) *pool2D { return newPool(c, h, w, s, s, 0, 0, h/s, w/s, false) }
func newAvgPool2D(c, h, w, s int) *pool2D { return newPool(c, h, w, s, s, 0, 0, h/s, w/s, true) }

func (l *pool2D) InSize() int         { return l.C * l.H * l.W }
func (l *pool2D) OutSize() int        { return l.C * l.OutH * l.OutW }
func (l *pool2D) NumParams() int      { return 0 }
func (l *pool2D) Bind(_, _ []float32) {}
func (l *pool2D) Init(_ *rand.Rand)   {}

// max2 reports whether the layer is 2×2 max pooling with stride 2 and no
// padding, which has kernels of its own.
func (l *pool2D) max2() bool {
	return !l.Avg && l.Size == 2 && l.S == 2 && l.PadT == 0 && l.PadL == 0 && l.OutH == l.H/2 && l.OutW == l.W/2
}

func (l *pool2D) Forward(y, x []float32, n int) {
	l.codeN, l.codeX = 0, nil
	if n == 0 {
		return
	}
	if l.max2() {
		if useAsm {
			l.forwardMax2Asm(y, x, n)
		} else {
			l.forwardMax2(y, x, n)
		}
		return
	}
	oh, ow := l.OutH, l.OutW
	for p := 0; p < n*l.C; p++ { // one plane per (example, channel)
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			y0, y1 := l.span(oy, l.PadT, l.H)
			for ox := 0; ox < ow; ox++ {
				x0, x1 := l.span(ox, l.PadL, l.W)
				var v float32
				if l.Avg {
					for r := y0; r < y1; r++ {
						for _, t := range xp[r*l.W+x0 : r*l.W+x1] {
							v += t
						}
					}
					v /= float32((y1 - y0) * (x1 - x0))
				} else {
					v = xp[y0*l.W+x0]
					for r := y0; r < y1; r++ {
						for _, t := range xp[r*l.W+x0 : r*l.W+x1] {
							v = max(v, t)
						}
					}
				}
				yp[oy*ow+ox] = v
			}
		}
	}
}

// span is the range [lo, hi) of input rows (or columns) of output row o,
// with pad rows of padding before the first and size rows in the input.
func (l *pool2D) span(o, pad, size int) (lo, hi int) {
	lo = o*l.S - pad
	return max(lo, 0), min(lo+l.Size, size)
}

func (l *pool2D) Backward(dx, dy, x, y []float32, n int) {
	if dx == nil || n == 0 {
		return
	}
	if l.max2() && useAsm && (l.cBatch > 0 || l.codeN == n && l.codeX == &x[0]) {
		l.backwardMax2Asm(dx, dy, n)
		return
	}
	if l.max2() && l.H%2 == 0 && l.W%2 == 0 {
		l.backwardMax2(dx, dy, x, y, n)
		return
	}
	oh, ow := l.OutH, l.OutW
	clear(dx[:n*l.InSize()])
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		dxp := dx[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		dyp := dy[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			y0, y1 := l.span(oy, l.PadT, l.H)
			for ox := 0; ox < ow; ox++ {
				x0, x1 := l.span(ox, l.PadL, l.W)
				g := dyp[oy*ow+ox]
				if l.Avg {
					g /= float32((y1 - y0) * (x1 - x0))
					for r := y0; r < y1; r++ {
						for i := range dxp[r*l.W+x0 : r*l.W+x1] {
							dxp[r*l.W+x0+i] += g
						}
					}
					continue
				}
				m := yp[oy*ow+ox]
			find:
				for r := y0; r < y1; r++ {
					for c := x0; c < x1; c++ {
						if xp[r*l.W+c] == m {
							dxp[r*l.W+c] += g
							break find
						}
					}
				}
			}
		}
	}
}

// maxMasks returns the groups of 8 windows per pooled row for the 2×2
// kernels and their masks for the last group: its input lanes (16) and
// its output lanes (8).
func (l *pool2D) maxMasks() (groups int, lmask, smask *int32) {
	groups = (l.OutW + 7) / 8
	last := l.OutW - 8*(groups-1)
	return groups, &maskTab[16-2*last], &maskTab[16-last]
}

// forwardMax2Asm is Forward for 2×2 max pooling on the AVX2 kernel, which
// also keeps each window's code for Backward. With an even number of rows
// the planes' pooled rows follow one another, so one call pools the batch.
func (l *pool2D) forwardMax2Asm(y, x []float32, n int) {
	oh, ow := l.OutH, l.OutW
	planes := n * l.C
	code := l.codes(n)
	l.codeN, l.codeX = n, &x[0]
	if oh == 0 || ow == 0 {
		return
	}
	groups, lmask, smask := l.maxMasks()
	calls, rows := planes, oh
	if l.H%2 == 0 {
		calls, rows = 1, planes*oh
	}
	for p := 0; p < calls; p++ {
		xp, yp, cp := x[p*l.H*l.W:], y[p*oh*ow:], code[p*oh*ow:]
		_ = xp[(2*rows-1)*l.W+2*ow-1]
		_ = yp[rows*ow-1]
		_ = cp[rows*ow-1]
		// Masked moves cost more than whole ones: the rows before the
		// last run whole, each overrun landing in a row written after it.
		whole := l.wholeRows(rows, groups)
		if whole > 0 {
			maxPool2Fwd(whole, groups, &xp[0], l.W, &yp[0], ow, &cp[0], nil, nil)
		}
		if rows > whole {
			xp, yp, cp = xp[2*whole*l.W:], yp[whole*ow:], cp[whole*ow:]
			maxPool2Fwd(rows-whole, groups, &xp[0], l.W, &yp[0], ow, &cp[0], lmask, smask)
		}
	}
}

// wholeRows is how many of rows pooled rows the 2×2 kernels can run with
// whole groups: all but the last, when a row's overrun (16 floats a group
// past 2·OutW input columns, 8 past OutW outputs) stays within the next
// row, which is written after it.
func (l *pool2D) wholeRows(rows, groups int) int {
	if 16*groups-2*l.OutW > l.W || 8*groups-l.OutW > l.OutW || l.W%2 != 0 {
		return 0
	}
	return rows - 1
}

// codes returns the window codes of a pass over n examples: the batch's
// from the chunk's first example, or the pass's own.
func (l *pool2D) codes(n int) []int32 {
	per := l.C * l.OutH * l.OutW
	first, batch := l.cFirst, l.cBatch
	if batch == 0 {
		first, batch = 0, n
	}
	if cap(l.code) < batch*per {
		l.code = make([]int32, batch*per)
	}
	l.code = l.code[:batch*per]
	return l.code[first*per:]
}

// backwardMax2Asm is Backward from the codes of the last Forward. The
// kernel writes every cell of the pooled rows and columns; a trailing odd
// row or column, in no window, is cleared first.
func (l *pool2D) backwardMax2Asm(dx, dy []float32, n int) {
	oh, ow := l.OutH, l.OutW
	planes := n * l.C
	if l.H%2 != 0 || l.W%2 != 0 {
		clear(dx[:n*l.InSize()])
	}
	if oh == 0 || ow == 0 {
		return
	}
	code := l.codes(n)
	groups, lmask, smask := l.maxMasks()
	calls, rows := planes, oh
	if l.H%2 == 0 {
		calls, rows = 1, planes*oh
	}
	for p := 0; p < calls; p++ {
		dxp, dyp, cp := dx[p*l.H*l.W:], dy[p*oh*ow:], code[p*oh*ow:]
		_ = dxp[(2*rows-1)*l.W+2*ow-1]
		_ = dyp[rows*ow-1]
		_ = cp[rows*ow-1]
		// The rows before the last may overrun into the next pair of rows,
		// which is written after them (see maxPool2Bwd).
		over := rows - 1
		if 16*groups-l.W > 2*ow || l.W%2 != 0 {
			over = 0
		}
		if over > 0 {
			maxPool2Bwd(over, groups, &dxp[0], l.W, &dyp[0], ow, &cp[0], lmask, smask, true)
		}
		dxp, dyp, cp = dxp[2*over*l.W:], dyp[over*ow:], cp[over*ow:]
		maxPool2Bwd(rows-over, groups, &dxp[0], l.W, &dyp[0], ow, &cp[0], lmask, smask, false)
	}
}

// forwardMax2 is Forward for 2×2 max pooling, with the builtin max, which
// compiles to branch-free MINSS/MAXSS sequences.
func (l *pool2D) forwardMax2(y, x []float32, n int) {
	oh, ow := l.OutH, l.OutW
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			r0 := xp[2*oy*l.W : 2*oy*l.W+2*ow]
			r1 := xp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			yr := yp[oy*ow : (oy+1)*ow]
			for ox := range yr {
				yr[ox] = max(max(r0[2*ox], r0[2*ox+1]), max(r1[2*ox], r1[2*ox+1]))
			}
		}
	}
}

// backwardMax2 is Backward for 2×2 max pooling over even sizes: every
// input belongs to exactly one window, so each window writes its four
// gradients (dy at the first maximum, 0 elsewhere) without clearing dx
// first. The choice is made with bit masks rather than branches, which a
// random argmax would mispredict.
func (l *pool2D) backwardMax2(dx, dy, x, y []float32, n int) {
	oh, ow := l.OutH, l.OutW
	for p := 0; p < n*l.C; p++ {
		xp := x[p*l.H*l.W : (p+1)*l.H*l.W]
		dxp := dx[p*l.H*l.W : (p+1)*l.H*l.W]
		yp := y[p*oh*ow : (p+1)*oh*ow]
		dyp := dy[p*oh*ow : (p+1)*oh*ow]
		for oy := 0; oy < oh; oy++ {
			r0 := xp[2*oy*l.W : 2*oy*l.W+2*ow]
			r1 := xp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			d0 := dxp[2*oy*l.W : 2*oy*l.W+2*ow]
			d1 := dxp[(2*oy+1)*l.W : (2*oy+1)*l.W+2*ow]
			yr := yp[oy*ow : (oy+1)*ow]
			dyr := dyp[oy*ow : (oy+1)*ow]
			for ox, m := range yr {
				mb := math.Float32bits(m)
				g := math.Float32bits(dyr[ox])
				e0 := eqMask(math.Float32bits(r0[2*ox]), mb)
				e1 := eqMask(math.Float32bits(r0[2*ox+1]), mb) &^ e0
				e2 := eqMask(math.Float32bits(r1[2*ox]), mb) &^ (e0 | e1)
				e3 := ^(e0 | e1 | e2)
				d0[2*ox] = math.Float32frombits(g & e0)
				d0[2*ox+1] = math.Float32frombits(g & e1)
				d1[2*ox] = math.Float32frombits(g & e2)
				d1[2*ox+1] = math.Float32frombits(g & e3)
			}
		}
	}
}

// eqMask is all ones if a == b and 0 otherwise, without a branch.
func eqMask(a, b uint32) uint32 {
	d := a ^ b
	return ^uint32(int32(d|-d) >> 31)
}
