package collective

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestAllGatherDirect: every rank gets every payload, of any length
// (empty, one frame, many frames), the same as the ring AllGatherV gives.
func TestAllGatherDirect(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4} {
		for _, lens := range [][]int{{0, 0, 0, 0}, {5, 0, 17, 1}, {64, 65, 200, 3}, {1000, 1, 0, 640}} {
			t.Run(fmt.Sprintf("n=%d/lens=%v", n, lens[:n]), func(t *testing.T) {
				comms, _ := newMemComms(t, n, Options{Timeout: 10 * time.Second, ChunkBytes: 64})
				payload := func(r int) []byte {
					b := make([]byte, lens[r])
					for i := range b {
						b[i] = byte(r*31 + i)
					}
					return b
				}
				for round := range 3 { // repeated calls stay in step
					errs := onAll(comms, func(c *Comm) error {
						ctx := context.Background()
						direct, err := c.AllGatherDirect(ctx, payload(c.Rank()))
						if err != nil {
							return err
						}
						ring, err := c.AllGatherV(ctx, payload(c.Rank()))
						if err != nil {
							return err
						}
						for r := range n {
							if !bytes.Equal(direct[r], payload(r)) || !bytes.Equal(direct[r], ring[r]) {
								return fmt.Errorf("round %d rank %d: part %d is %v, want %v", round, c.Rank(), r, direct[r], payload(r))
							}
						}
						return nil
					})
					noErrors(t, errs)
				}
			})
		}
	}
}

// TestAllGatherDirectMismatch: a rank in a ring all-gather while another is
// in a direct one is a mismatch error, not a corrupt result.
func TestAllGatherDirectMismatch(t *testing.T) {
	comms, _ := newMemComms(t, 2, Options{Timeout: 5 * time.Second})
	errs := onAll(comms, func(c *Comm) error {
		if c.Rank() == 0 {
			_, err := c.AllGatherDirect(context.Background(), []byte("abc"))
			return err
		}
		_, err := c.AllGatherV(context.Background(), []byte("abc"))
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "mismatch") && !strings.Contains(err.Error(), "aborted") {
			t.Fatalf("rank %d: error %v, want a mismatch", r, err)
		}
	}
}

// TestAllGatherDirectKilledPeer: a dead rank fails the gather promptly.
func TestAllGatherDirectKilledPeer(t *testing.T) {
	comms, net := newMemComms(t, 3, Options{Timeout: 20 * time.Second})
	net.Kill(2)
	start := time.Now()
	errs := onAll(comms[:2], func(c *Comm) error {
		_, err := c.AllGatherDirect(context.Background(), []byte("x"))
		return err
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2") {
			t.Fatalf("rank %d: error %v, want one naming rank 2", r, err)
		}
	}
	if time.Since(start) > 10*time.Second {
		t.Fatalf("took %v to notice the dead rank", time.Since(start))
	}
}
