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

// TestInboxBoundsBytes (issue 32 item 3): a link's queue holds at most
// DefaultQueueBytes of payload per channel, or one frame of any size when
// it is empty; a reader whose next frame does not fit waits in Reserve
// until the executor takes one, and the other channel is not held back.
func TestInboxBoundsBytes(t *testing.T) {
	const big = 3 * DefaultQueueBytes / 4
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	frame := func(k Kind, n int) Frame {
		return Frame{Header: Header{Kind: k, DType: Bytes, Len: uint32(n)}, Payload: make([]byte, n)}
	}
	tests := []struct {
		name  string
		first Frame // queued and not taken
		next  Header
		waits bool
	}{
		{"fits", frame(KindBroadcast, DefaultQueueBytes/4), frame(KindBroadcast, DefaultQueueBytes/2).Header, false},
		{"over the bound", frame(KindBroadcast, big), frame(KindBroadcast, big).Header, true},
		{"over the bound, point-to-point", frame(KindP2P, big), frame(KindP2P, big).Header, true},
		{"other channel", frame(KindBroadcast, big), frame(KindP2P, big).Header, false},
		{"landed frames hold nothing", Frame{Header: Header{Kind: KindBroadcast, DType: Bytes, Len: big}, Landed: true}, frame(KindBroadcast, big).Header, false},
		{"larger than the bound, channel empty", Frame{Header: Header{Kind: KindP2P}}, frame(KindP2P, 2*DefaultQueueBytes).Header, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ib := NewInbox(2)
			defer ib.Close()
			if err := ib.Deliver(ctx, 1, tc.first); err != nil {
				t.Fatal(err)
			}
			short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
			defer stop()
			err := ib.Reserve(short, 1, tc.next)
			if waited := errors.Is(err, context.DeadlineExceeded); waited != tc.waits {
				t.Fatalf("Reserve: %v, want waiting %v", err, tc.waits)
			}
			if !tc.waits {
				return
			}
			// Taking the queued frame makes room.
			done := make(chan error, 1)
			go func() { done <- ib.Reserve(ctx, 1, tc.next) }()
			f, err := ib.Recv(ctx, 1, channelOf(tc.first.Kind))
			if err != nil {
				t.Fatal(err)
			}
			f.Release()
			if err := <-done; err != nil {
				t.Fatalf("Reserve after the executor took the frame: %v", err)
			}
		})
	}
}
