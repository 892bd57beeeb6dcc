//go:build !purego

package wino

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2 kernels.
var useAsm = cpu.X86.HasAVX2

//go:noescape
func inputTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int)

//go:noescape
func gradTransformAsm(n int, grid *float32, pplane, pgw int, dst *float32, ds int)

//go:noescape
func phaseAsm(ch, h, w int, x, grid *float32, glen, pplane, pgw int)

//go:noescape
func outputRowsAsm(th, tw int, m *float32, ms, pgw int, y *float32, w int)
