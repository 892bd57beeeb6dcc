//go:build !amd64 || purego

package collective

const haveAddAsm = false

func addFloat32s(dst, src *float32, n int) int { return 0 }

func addFloat64s(dst, src *float64, n int) int { return 0 }
