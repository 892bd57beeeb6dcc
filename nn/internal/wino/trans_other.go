//go:build !amd64 || purego

package wino

// useAsm is false where there are no assembly kernels; the declarations
// below only let trans.go compile everywhere.
var useAsm = false

func inputTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int) {
	panic("wino: no assembly kernels on this platform")
}
func gradTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int) {
	panic("wino: no assembly kernels on this platform")
}
func phaseAsm(ch, h, w int, x, grid *float32, glen, pplane, pgw int) {
	panic("wino: no assembly kernels on this platform")
}
func outputRowsAsm(th, tw int, m *float32, ms, pgw int, y *float32, w int) {
	panic("wino: no assembly kernels on this platform")
}
