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
