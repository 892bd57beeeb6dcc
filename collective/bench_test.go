package collective

import (
	"context"
	"fmt"
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
