package collective

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// BenchmarkAllReduceMem measures the executor's own cost (no network):
// in-memory transport, N ranks as goroutines.
func BenchmarkAllReduceMem(b *testing.B) {
	for _, tc := range []struct {
		n, bytes int
		algo     Algo
	}{{4, 4 << 10, Tree}, {4, 4 << 10, Star}, {4, 4 << 10, Ring}, {2, 246824, Tree}, {2, 64 << 20, Ring}, {4, 64 << 20, Ring}} {
		b.Run(fmt.Sprintf("n%d/%dB/%s", tc.n, tc.bytes, tc.algo), func(b *testing.B) {
			comms, _ := newMemComms(b, tc.n, Options{Algo: tc.algo})
			bufs := make([][]float32, tc.n)
			for r := range bufs {
				bufs[r] = make([]float32, tc.bytes/4)
			}
			b.SetBytes(int64(tc.bytes))
			b.ResetTimer()
			for range b.N {
				noErrors(b, onAll(comms, func(c *Comm) error {
					return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], Sum)
				}))
			}
		})
	}
}

// BenchmarkAllReducePhases is what reporting the phases (Options.Phases,
// as --timeline sets it) costs a ring all-reduce of LeNet-5's gradient on
// 2 ranks: three clock reads and two calls of the hook per rank.
func BenchmarkAllReducePhases(b *testing.B) {
	for _, on := range []bool{false, true} {
		b.Run(fmt.Sprintf("phases=%v", on), func(b *testing.B) {
			var mu sync.Mutex
			var got []Phase
			opts := Options{Algo: Ring}
			if on {
				opts.Phases = func(p Phase) {
					mu.Lock()
					got = append(got[:min(len(got), 64)], p)
					mu.Unlock()
				}
			}
			comms, _ := newMemComms(b, 2, opts)
			bufs := [][]float32{make([]float32, 61706), make([]float32, 61706)}
			b.ResetTimer()
			for range b.N {
				noErrors(b, onAll(comms, func(c *Comm) error {
					return c.AllReduceFloat32(context.Background(), bufs[c.Rank()], Sum)
				}))
			}
		})
	}
}
