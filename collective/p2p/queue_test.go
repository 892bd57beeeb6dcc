package p2p

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/collective"
)

// TestHostileFramesBounded (issue 32 item 3): an authenticated member
// (rank 1, over TLS) floods rank 0 with frames of MaxFrame on both
// channels, and rank 0's executor never takes one. Rank 0 may hold the
// stream's window and, per channel, max(DefaultQueueBytes, MaxFrame) of
// queued or half-read frames; the member's further sends wait for the
// window. Before the queues were bounded in bytes it held 8 frames per
// channel, and one in the reader's hands: 272 MiB and the window (the
// figures are in the log).
func TestHostileFramesBounded(t *testing.T) {
	const window = 4 << 20
	peers := freeAddrs(t, 2, false)
	_, ts := startWith(t, 2, collective.Options{Timeout: 20 * time.Second}, func(r int) (*Transport, error) {
		return New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, Timeout: 20 * time.Second, StreamWindow: window})
	})
	maxFrame := ts[0].MaxFrame()
	payload := make([]byte, maxFrame)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := liveHeap()
	var sent atomic.Int64
	var wg sync.WaitGroup
	for _, kind := range []collective.Kind{collective.KindBroadcast, collective.KindP2P} {
		wg.Go(func() {
			for i := range 32 {
				h := collective.Header{Kind: kind, Seq: uint64(i + 1), DType: collective.Bytes, Count: uint64(maxFrame)}
				if ts[1].Send(ctx, 0, h, payload) != nil {
					return
				}
				sent.Add(1)
			}
		})
	}
	// The member is held back once nothing more is sent for a second.
	var peak uint64
	last, still := int64(-1), time.Now()
	for deadline := time.Now().Add(60 * time.Second); time.Since(still) < time.Second; {
		if time.Now().After(deadline) {
			t.Fatalf("rank 1 was still sending after 60 s (%d frames of %d sent): nothing holds a member back", sent.Load(), 64)
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		if n := sent.Load(); n != last {
			last, still = n, time.Now()
		}
		time.Sleep(50 * time.Millisecond) // sampling the heap while the flood goes on
	}
	grew := liveHeap() - before
	bound := int64(window) + 2*int64(max(collective.DefaultQueueBytes, maxFrame)) + 8<<20
	t.Logf("rank 1 sent %d frames of %d MiB before it was held back; rank 0's live heap grew %.1f MiB (HeapInuse peaked at %.1f MiB); the bound is %.1f MiB",
		sent.Load(), maxFrame>>20, float64(grew)/(1<<20), float64(peak)/(1<<20), float64(bound)/(1<<20))
	if grew > bound {
		t.Errorf("rank 0's heap grew %.1f MiB under a member's flood of unread frames, over the %.1f MiB bound (the window, a queue's bytes per channel and 8 MiB)",
			float64(grew)/(1<<20), float64(bound)/(1<<20))
	}
	cancel()
	wg.Wait()
}

// TestLargeAllReduceWithinQueueBound: the byte bound on the queues holds
// back no legitimate exchange. A 64 MiB all-reduce among 4 ranks over TLS
// completes, with the default chunk (8 frames fit a queue) and with chunks
// of MaxFrame (one frame at a time, larger than the bound), and sums right.
func TestLargeAllReduceWithinQueueBound(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 64 MiB among 4 ranks")
	}
	const n, count = 4, 64 << 20 / 4
	for _, chunk := range []int{collective.DefaultChunkBytes, collective.DefaultMaxFrame} {
		t.Run(fmt.Sprintf("chunk %d MiB", chunk>>20), func(t *testing.T) {
			comms, _ := startCluster(t, n, SecurityTLS, nil, collective.Options{Algo: collective.Ring, ChunkBytes: chunk, Timeout: 60 * time.Second})
			bufs := make([][]float32, n)
			for r := range bufs {
				bufs[r] = make([]float32, count)
				for i := range bufs[r] {
					bufs[r][i] = float32(r + 1)
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			if err := errors.Join(onAll(comms, func(c *collective.Comm) error {
				return c.AllReduceFloat32(ctx, bufs[c.Rank()], collective.Sum)
			})...); err != nil {
				t.Fatal(err)
			}
			for r := range bufs {
				for _, i := range []int{0, count / 2, count - 1} {
					if bufs[r][i] != 10 {
						t.Fatalf("rank %d element %d = %v, want 10", r, i, bufs[r][i])
					}
				}
			}
		})
	}
}
