//go:build !amd64 || purego

package nn

// useAVX512 is false where there are no assembly kernels; the stand-ins
// below are never called then.
var useAVX512 = false

func hwcGrad32(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32) {
	panic("nn: no assembly kernels on this platform")
}
func hwcGrad16(n int, pos *int32, gv *float32, x *float32, pix, row int, acc *float32) {
	panic("nn: no assembly kernels on this platform")
}
func hwcScatter32(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32) {
	panic("nn: no assembly kernels on this platform")
}
func hwcScatter16(n int, pos *int32, gv *float32, dx *float32, pix, row int, w *float32) {
	panic("nn: no assembly kernels on this platform")
}
func kernConv6x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int) {
	panic("nn: no assembly kernels on this platform")
}
func kernConv4x64(k int, a *float32, lda int, b *float32, offs *int, c *float32, ldc int) {
	panic("nn: no assembly kernels on this platform")
}
func kernNN6x64(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
func chanLast(np, c int, src *float32, plane int, dst *float32) {
	panic("nn: no assembly kernels on this platform")
}
func chanFirst(rows, w, c int, src *float32, lds int, dst *float32, hw int) {
	panic("nn: no assembly kernels on this platform")
}
func listRouted16(n int, hot *int32, dy *float32, base *int32, gw int, pos *int32, gv *float32, sum *float32) int {
	panic("nn: no assembly kernels on this platform")
}
func kernNT4x6(k int, a *float32, lda int, b *float32, ldb int, c *float32, ldc int, acc bool) {
	panic("nn: no assembly kernels on this platform")
}
