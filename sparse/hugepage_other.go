//go:build !linux

package sparse

// makeFloats returns a zeroed []float32 of length n (huge-page advice is
// Linux only).
func makeFloats(n int) []float32 { return make([]float32, n) }
