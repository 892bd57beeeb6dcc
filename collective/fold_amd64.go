//go:build !purego

package collective

import "golang.org/x/sys/cpu"

// haveAddAsm selects the AVX2 sum kernels: Go does not vectorise the
// scalar loop, which then costs more than the memory traffic
// (BENCHMARKS.md, "Figures behind the code": summing with AVX2).
var haveAddAsm = cpu.X86.HasAVX2

// addFloat32s sets dst[i] += src[i] for i < n, 32 elements per step; it
// returns how many it did (n rounded down to a multiple of 32).
//
//go:noescape
func addFloat32s(dst, src *float32, n int) int

// addFloat64s is addFloat32s for float64 (16 elements per step).
//
//go:noescape
func addFloat64s(dst, src *float64, n int) int
