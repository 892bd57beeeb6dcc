//go:build !amd64 || purego

package nn

// useAsm is false where there are no assembly kernels; the kernels below
// are never called then and exist only so gemm.go compiles everywhere.
var useAsm = false

func kernNN4x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernNN4x16m(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, mask *int32, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernNN1x16m(k int, a *float32, b *float32, ldb int, c *float32, mask *int32, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernNT1x4(k int, a *float32, b *float32, ldb int, c *float32, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernNT3x4(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func rowsKernel(dst *float32, ldd int, src *float32, lds int, rows, w int, add bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernNN6x16(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func kernConv6x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int) {
	panic("nn: no assembly kernels on this platform")
}
func kernConvNT3x4(k int, a *float32, aoffs *int, b *float32, boffs *int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func poolFwd8(rows, groups int, r *float32, ldr int, bias float32, y *float32, ldy int, hot *int32, mask *int32) {
	panic("nn: no assembly kernels on this platform")
}
func poolBwd8(rows, groups int, d *float32, ldd int, dy *float32, ldy int, hot *int32, mask *int32, sum *float32) {
	panic("nn: no assembly kernels on this platform")
}
func kernConv4x16(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int) {
	panic("nn: no assembly kernels on this platform")
}
func sgdMomentum8(n int, p, gr, v *float32, lr, mu, wd float32) {
	panic("nn: no assembly kernels on this platform")
}
func sparseGather(n int, pos *int32, gv *float32, ch *int32, x *float32, rows int, roffs *int, acc *float32) {
	panic("nn: no assembly kernels on this platform")
}
func sparseGather5(n int, pos *int32, gv *float32, x *float32, roffs *int, acc *float32) {
	panic("nn: no assembly kernels on this platform")
}
func shiftSum(dst *float32, src *float32, lds int, k int, w int) {
	panic("nn: no assembly kernels on this platform")
}
