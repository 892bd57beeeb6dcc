package collective

import (
	"testing"
)

// BenchmarkFoldSum folds 1 MiB frames into a 64 MiB buffer the way a ring's
// reduce-scatter does (the frame hot in cache, the buffer not).
func BenchmarkFoldSum(b *testing.B) {
	const chunk = 1 << 20
	dst := make([]float32, 64<<20/4)
	src := make([]float32, chunk/4)
	for i := range src {
		src[i] = float32(i % 7)
	}
	fn := folder[float32](Sum)
	raw, sraw := asBytes(dst), asBytes(src)
	b.SetBytes(chunk)
	off := 0
	for b.Loop() {
		fn(raw[off:off+chunk], sraw, false)
		off = (off + chunk) % len(raw)
	}
}
