//go:build !purego

package nn

import "golang.org/x/sys/cpu"

// useAsm selects the assembly kernels; they need AVX2 and FMA.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func kernNN4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kernNN4x16m(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, mask *int32, acc bool)

//go:noescape
func kernNN1x16m(k int, a *float32, b *float32, ldb int, c *float32, mask *int32, acc bool)

//go:noescape
func kernNT1x4(k int, a *float32, b *float32, ldb int, c *float32, acc bool)

//go:noescape
func kernNT3x4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func rowsKernel(dst *float32, ldd int, src *float32, lds int, rows, w int, add bool)

//go:noescape
func kernNN6x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func kernConv6x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)

//go:noescape
func kernConvNT3x4(k int, a *float32, aoffs *int, b *float32, boffs *int, c *float32, ldc int, acc bool)

//go:noescape
func poolFwd8(rows, groups int, r *float32, ldr int, bias float32, y *float32, ldy int, hot *int32, mask *int32)

//go:noescape
func poolBwd8(rows, groups int, d *float32, ldd int, dy *float32, ldy int, hot *int32, mask *int32, sum *float32)

//go:noescape
func kernConv4x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int)

//go:noescape
func sgdMomentum8(n int, p, gr, v *float32, lr, mu, wd float32)

func sparseGather(n int, pos *int32, gv *float32, ch *int32, x *float32, rows int, roffs *int, acc *float32)

//go:noescape
func sparseGather5(n int, pos *int32, gv *float32, x *float32, roffs *int, acc *float32)

//go:noescape
func shiftSum(dst *float32, src *float32, lds int, k int, w int)
