package p2p

import (
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/internal/longtest"
)

// TestStreamsNegotiatedAtConnect: every rank's inbound streams are
// accepted as soon as the cluster is connected, before anyone sends a
// frame. Negotiated lazily, on the first frame, a stream whose first frame
// came more than 10 s after it was opened (a peer slow to start) was reset
// by the remote host, whatever the collective timeout.
func TestStreamsNegotiatedAtConnect(t *testing.T) {
	const n = 3
	_, ts := startCluster(t, n, SecurityTLS, zaptest.NewLogger(t), collective.Options{Timeout: 20 * time.Second})
	deadline := time.Now().Add(5 * time.Second)
	for r, tr := range ts {
		for {
			tr.mu.Lock()
			got := len(tr.inbound)
			tr.mu.Unlock()
			if got == n-1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("rank %d: %d of %d inbound streams accepted with no frame sent: the protocol is negotiated lazily", r, got, n-1)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestLongSlowFirstFrame: a cluster whose first collective comes 11 s after
// connecting (past libp2p's 10 s negotiation timeout) still runs it.
func TestLongSlowFirstFrame(t *testing.T) {
	longtest.Require(t, "waits 11 s")
	comms, _ := startCluster(t, 2, SecurityTLS, zaptest.NewLogger(t), collective.Options{Timeout: 20 * time.Second})
	time.Sleep(11 * time.Second) // the symptom needs the real time to pass: a start-up this slow
	errs := onAll(comms, func(c *collective.Comm) error {
		return c.AllReduceFloat32(t.Context(), []float32{1, 2}, collective.Sum)
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: all-reduce 11 s after connecting: %v", r, err)
		}
	}
}
