package data

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// syntheticMNISTImages returns images of MNIST's training shape (60000 of
// 28x28) with pixels and labels from a fixed seed, so the benchmark needs
// no download and measures the same work as the real set.
func syntheticMNISTImages() *Images {
	r := rand.New(rand.NewPCG(1, 2))
	im := &Images{N: 60000, Rows: 28, Cols: 28, Pixels: make([]uint8, 60000*784), Labels: make([]uint8, 60000)}
	for i := range im.Pixels {
		im.Pixels[i] = uint8(r.Uint32())
	}
	for i := range im.Labels {
		im.Labels[i] = uint8(r.IntN(10))
	}
	return im
}

// BenchmarkPipeline measures MNIST-from-memory shard (rank 0 of 2, DATA) +
// full shuffle + batch 64 (+ prefetch), reporting examples/s. Each op is
// one batch.
func BenchmarkPipeline(b *testing.B) {
	im := syntheticMNISTImages()
	for _, prefetch := range []int{0, 2} {
		b.Run(fmt.Sprintf("prefetch=%d", prefetch), func(b *testing.B) {
			cfg := TrainConfig(0, 2, 64, 1, Forever)
			cfg.Prefetch = prefetch
			p, err := NewPipeline(context.Background(), im.Dataset(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			ctx := context.Background()
			examples := 0
			b.ReportAllocs()
			cpu0 := rusage.CPUTime()
			for b.Loop() {
				batch, err := p.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				examples += batch.Size
			}
			b.ReportMetric(float64(examples)/b.Elapsed().Seconds(), "examples/s")
			b.ReportMetric(float64(examples)/(rusage.CPUTime()-cpu0).Seconds(), "examples/cpu-s")
		})
	}
}

// BenchmarkShuffleOrder measures the per-epoch index shuffle alone (one
// 30000-example shard).
func BenchmarkShuffleOrder(b *testing.B) {
	src := make([]int32, 30000)
	for i := range src {
		src[i] = int32(i)
	}
	dst := make([]int32, len(src))
	var scratch []int32
	e := 0
	for b.Loop() {
		scratch = shuffleInto(dst, src, scratch, FullShuffle, newRNG(1, streamExamples, e, 0))
		e++
	}
	b.ReportMetric(float64(len(src))*float64(b.N)/b.Elapsed().Seconds(), "examples/s")
}
