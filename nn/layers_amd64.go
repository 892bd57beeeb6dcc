//go:build !purego

package nn

// The AVX2 kernels of the generic layers (layers_amd64.s). Like the GEMM
// kernels they take raw pointers; the Go callers check bounds first.

// maxPool2Fwd pools rows pairs of input rows (2i and 2i+1, ldx apart) in
// groups of 8 windows: y[i*ldy+j] is the window's maximum and code[i*ldy+j]
// the one-hot code of its first maximum (bit k for cell k: 0 top left, 1
// top right, 2 bottom left, 3 bottom right). The last group of a row loads
// the input lanes lmask[0:16] selects and stores the lanes smask[0:8]
// selects, so nothing outside the rows is read or written; with lmask nil
// every group is whole, reading and writing past the rows' ends.
//
//go:noescape
func maxPool2Fwd(rows, groups int, x *float32, ldx int, y *float32, ldy int, code *int32, lmask, smask *int32)

// maxPool2Bwd is the adjoint of maxPool2Fwd: it writes every cell of the
// pooled rows of dx, dy at the cell its code names and 0 at the others.
// With over, the last group of a row loads whole and writes its bottom
// row whole, past the row's end into the next pair of rows (which must be
// written after it); the top row's last group is always masked, because
// the bottom row follows it.
//
//go:noescape
func maxPool2Bwd(rows, groups int, dx *float32, ldx int, dy *float32, ldy int, code *int32, lmask, smask *int32, over bool)

// reluFwd8 writes y = max(x, 0) (+0 for ±0, NaN kept: Go's max) for the
// first n&^7 floats.
//
//go:noescape
func reluFwd8(n int, x, y *float32)

// reluBwd8 writes dx = dy where y's bits are a positive int32 (y > 0), 0
// elsewhere, for the first n&^7 floats.
//
//go:noescape
func reluBwd8(n int, dy, y, dx *float32)

// biasRows writes dst[r*ldd+i] = src[r*lds+i] + bias for r < rows, i < w.
//
//go:noescape
func biasRows(dst *float32, ldd int, src *float32, lds, rows, w int, bias float32)

// copyRowsSum copies rows rows of w floats as copyRows does and adds the
// floats copied into sum[0:8]; tmask is &tailTab[w%8].
//
//go:noescape
func copyRowsSum(dst *float32, ldd int, src *float32, lds, rows, w int, sum *float32, tmask *int32)

// listNZ lists the non-zero floats of rows rows of w floats (src, lds
// apart): for each, in order, its value in gv, its grid position in pos
// (row r, column c: r·ldd + c) and ch in chs. It writes up to 8 entries
// past the last, copies the rows onto the grid at dst (rows ldd apart,
// writing zeros up to the next multiple of 8 columns, so ldd ≥ w and the
// grid must have room for the last row's), adds every float into sum[0:8]
// and returns the number listed. mask selects the lanes of a row's last
// chunk of 8 (w mod 8, or all 8); lut is packLUT.
//
//go:noescape
func listNZ(rows, w int, src *float32, lds int, dst *float32, ldd int, ch int32, pos, chs *int32, gv *float32, mask, lut *int32, sum *float32) int
