package nn

import (
	"math/rand/v2"
	"testing"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// BenchmarkConvPasses is one training step (forward, input and weight
// gradients) of ResNet-20's three sizes of 3×3 convolution over 32
// examples (a shard of its batch of 64), by Winograd and by the direct
// products with the full-correlation input gradient (what Graph used
// before): -bench ConvPasses/ -count N, alternated.
func BenchmarkConvPasses(b *testing.B) {
	for _, s := range []struct {
		name string
		in   Shape
	}{{"16x32x32", imageShape(32, 32, 16)}, {"32x16x16", imageShape(16, 16, 32)}, {"64x8x8", imageShape(8, 8, 64)}} {
		for _, wino := range []bool{false, true} {
			name := s.name + "/direct"
			if wino {
				name = s.name + "/winograd"
			}
			b.Run(name, func(b *testing.B) {
				const n = 32
				l, _, err := Conv2D{Filters: s.in.C, Kernel: 3, Padding: Same, NoBias: true}.build(s.in)
				if err != nil {
					b.Fatal(err)
				}
				c := l.(*conv2D)
				c.sparse = false
				if !wino {
					c.useFull()
				} else if !c.useWino() {
					b.Fatal("useWino refused")
				}
				r := rand.New(rand.NewPCG(1, 2))
				params, grads := make([]float32, c.NumParams()), make([]float32, c.NumParams())
				for i := range params {
					params[i] = r.Float32() - 0.5
				}
				c.Bind(params, grads)
				c.setTrain(true)
				x, dy := make([]float32, n*c.InSize()), make([]float32, n*c.OutSize())
				for i := range x {
					x[i], dy[i] = r.Float32(), r.Float32()-0.5
				}
				y, dx := make([]float32, len(dy)), make([]float32, len(x))
				cpu0 := rusage.CPUTime()
				for b.Loop() {
					c.Forward(y, x, n)
					c.Backward(dx, dy, x, y, n)
				}
				b.ReportMetric(float64((rusage.CPUTime()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
