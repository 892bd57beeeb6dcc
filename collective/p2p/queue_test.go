package p2p

import (
	"context"
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
