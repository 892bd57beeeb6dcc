//go:build !purego

package nn

import "golang.org/x/sys/cpu"

// useAVX512 selects the AVX-512 kernels (avx512_amd64.s) where the CPU and
// the OS support them; they are used only where useAsm is also set.
var useAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ

// The channels-last kernels of a 3×3 stride-1 convolution's backward
// pass from a sparse output gradient (see hwcBackward). Each entry e < n is
// a window whose top-left pixel is pos[e] on a grid of pixels pix bytes
// apart (the channels, 32 or 16 floats here, contiguous) in rows row bytes
// apart, and whose gradient is gv[e]. A tap block holds the 9 taps (ky, kx)
// in order, 32 or 16 floats each, pix bytes apart.
//
// hwcGrad32 adds, to the tap block acc, Σ_e gv[e] times each tap's 32
// floats of x: the weight gradient of one output channel for 32 input
// channels, summed in registers over the entries in order.
//
//go:noescape
func hwcGrad32(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32)

// hwcGrad16 is hwcGrad32 for 16 channels.
//
//go:noescape
func hwcGrad16(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32)

// hwcScatter32 adds, for each entry in order, gv[e] times each tap of the
// tap block w to the tap's 32 floats of dx: the input gradient of one
// output channel's entries for 32 input channels.
//
//go:noescape
func hwcScatter32(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32)

// hwcScatter16 is hwcScatter32 for 16 channels.
//
//go:noescape
func hwcScatter16(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32)

// kernConv6x64 and kernConv4x64 are kernConv6x16 and kernConv4x16 for 64
// columns, and kernNN6x64 is kernNN6x16 for 64 columns: each element is the
// same chain of FMAs in the same order, so they give the same bits.
//
//go:noescape
func kernConv6x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)

//go:noescape
func kernConv4x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)

//go:noescape
func kernNN6x64(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

// chanLast writes the c planes of src, plane floats apart, pixel by pixel:
// dst[q·c + ci] = src[ci·plane + q] for q < np and ci < c, a multiple of 16.
//
//go:noescape
func chanLast(np, c int, src *float32, plane int, dst *float32)

// chanFirst is the converse for rows rows of w pixels, lds pixels apart:
// dst[ci·hw + r·w + x] = src[(r·lds + x)·c + ci] for ci < c, r < rows and
// x < w; rows ≥ 1 and c a multiple of 16.
//
//go:noescape
func chanFirst(rows, w, c int, src *float32, lds int, dst *float32, hw int)

// listRouted16 lists the routed gradients of n windows of one channel of
// a fused convolution → ReLU → 2×2 max-pool: window i's code hot[i] (bit k
// for cell k of its first maximum, 0 where the ReLU is off), its pooled
// gradient dy[i] and base[i], the grid position of its top-left cell. For
// each window with a code, in order, it writes the position of the cell
// (one column right for cells 1 and 3, gw down for 2 and 3) to pos and
// the gradient to gv, and returns their number; it writes up to 16
// entries past the last. sum[i] receives the sum of the listed gradients
// of the windows i mod 16.
//
//go:noescape
func listRouted16(n int, hot *int32, dy *float32, base *int32, gw int, pos *int32, gv *float32, sum *float32) int

// kernNT4x6 sets or adds C[i, j] = dot(A[i, 0:k], B[j, 0:k]) for i < 4 and
// j < 6 (rows lda, ldb and ldc floats apart), k ≥ 1: each dot product in 16
// lanes, the lanes then summed in a fixed order.
//
//go:noescape
func kernNT4x6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)
