package collective

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"
)

// TestInboxPrefersAbortOverGoodbye: a peer that aborts a collective and
// then closes cleanly leaves both its abort and its goodbye ready; a waiting
// collective must report the abort (the cause), every time, not the
// goodbye that a random select would pick half the time.
func TestInboxPrefersAbortOverGoodbye(t *testing.T) {
	for trial := range 200 {
		ib := NewInbox(2)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, k := range []Kind{KindAbort, KindBye} {
			if err := ib.Deliver(ctx, 1, Frame{Header: Header{Kind: k}, Payload: []byte("rank 2 link down")}); err != nil {
				t.Fatal(err)
			}
		}
		ib.LinkDown(1, io.EOF)
		_, err := ib.Recv(ctx, 1, Collective)
		cancel()
		var pe *PeerError
		if !errors.As(err, &pe) || pe.Reason != "aborted" || pe.Rank != 1 {
			t.Fatalf("trial %d: %v, want rank 1's abort", trial, err)
		}
		// The point-to-point channel ignores aborts: it sees the goodbye.
		if _, err := ib.Recv(context.Background(), 1, PointToPoint); !errors.As(err, &pe) || pe.Reason != "closed its communicator" {
			t.Fatalf("trial %d: point-to-point: %v, want rank 1's goodbye", trial, err)
		}
		ib.Close()
	}
}
