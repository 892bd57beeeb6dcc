//go:build !amd64 || purego

package nn

// Stand-ins for the kernels of layers_amd64.s, never called when useAsm is
// false.

func maxPool2Fwd(rows, groups int, x *float32, ldx int, y *float32, ldy int, code *int32, lmask, smask *int32) {
	panic("nn: no assembly kernels on this platform")
}
func maxPool2Bwd(rows, groups int, dx *float32, ldx int, dy *float32, ldy int, code *int32, lmask, smask *int32, over bool) {
	panic("nn: no assembly kernels on this platform")
}
func reluFwd8(n int, x, y *float32)      { panic("nn: no assembly kernels on this platform") }
func reluBwd8(n int, dy, y, dx *float32) { panic("nn: no assembly kernels on this platform") }
func biasRows(dst *float32, ldd int, src *float32, lds, rows, w int, bias float32) {
	panic("nn: no assembly kernels on this platform")
}
func copyRowsSum(dst *float32, ldd int, src *float32, lds, rows, w int, sum *float32, tmask *int32) {
	panic("nn: no assembly kernels on this platform")
}
func listNZ(rows, w int, src *float32, lds int, dst *float32, ldd int, ch int32, pos, chs *int32, gv *float32, mask, lut *int32, sum *float32) int {
	panic("nn: no assembly kernels on this platform")
}
func bnSum8(n int, x *float32) float64 { panic("nn: no assembly kernels on this platform") }
func bnSqDev8(n int, x *float32, mean float64) float64 {
	panic("nn: no assembly kernels on this platform")
}
func bnBwdSums8(n int, dy, x *float32, mean float64) (sdy, sdyx float64) {
	panic("nn: no assembly kernels on this platform")
}
func bnAffine8(n int, x, y *float32, mean, a, b float32) {
	panic("nn: no assembly kernels on this platform")
}
func bnBwdDx8(n int, dy, x, dx *float32, mean, a, b, c float32) {
	panic("nn: no assembly kernels on this platform")
}
