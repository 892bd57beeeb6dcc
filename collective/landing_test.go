package collective

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"
)

// TestLanding drives one link of an Inbox the way the p2p transport's
// reader does (Claim, then Fill or a plain read, then Deliver) while the
// executor side takes the frame with RecvInto.
func TestLanding(t *testing.T) {
	want := Header{Kind: KindAllReduceRing, DType: Float32, Seq: 7, Count: 8, Offset: 4}
	src := asBytes([]float32{1, 2, 3, 4})
	for _, tc := range []struct {
		name     string
		fold     bool
		send     Header // the frame the peer sends
		queued   bool   // a frame is already queued when the executor offers
		landed   bool
		wantDst  []float32
		mismatch bool
	}{
		{name: "copy lands", send: want, landed: true, wantDst: []float32{1, 2, 3, 4}},
		{name: "fold lands", fold: true, send: want, landed: true, wantDst: []float32{11, 12, 13, 14}},
		{name: "other offset is read the usual way", send: func() Header { h := want; h.Offset = 0; return h }(), mismatch: true, wantDst: []float32{10, 10, 10, 10}},
		{name: "a queued frame is taken first", send: want, queued: true, wantDst: []float32{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ib := NewInbox(2)
			dst := []float32{10, 10, 10, 10}
			var fn foldFunc
			if tc.fold {
				fn = folder[float32](Sum)
			}
			if tc.queued {
				if err := deliverOrLand(ctx, ib, 1, tc.send, src); err != nil {
					t.Fatal(err)
				}
			}
			type got struct {
				f   Frame
				err error
			}
			res := make(chan got, 1)
			go func() {
				f, err := ib.RecvInto(ctx, 1, newLanding(ctx, want, asBytes(dst), fn, true))
				res <- got{f, err}
			}()
			if !tc.queued {
				waitOffered(t, ib, 1)
				h := tc.send
				h.Len = uint32(len(src))
				// A reader that waits sees the offer once it is made.
				if l := ib.Claim(1, h, true); l != nil {
					f, deliver, err := l.Fill(bytes.NewReader(src), func() {})
					if err != nil || !deliver {
						t.Fatal(deliver, err)
					}
					if err := ib.Deliver(ctx, 1, f); err != nil {
						t.Fatal(err)
					}
				} else if err := deliverOrLand(ctx, ib, 1, tc.send, src); err != nil {
					t.Fatal(err)
				}
			}
			r := <-res
			if r.err != nil {
				t.Fatal(r.err)
			}
			defer r.f.Release()
			if r.f.Landed != tc.landed {
				t.Fatalf("Landed = %v, want %v", r.f.Landed, tc.landed)
			}
			if !r.f.Landed && !tc.mismatch {
				copy(asBytes(dst), r.f.Payload) // what the executor does with a frame that did not land
			}
			if !slicesEqual(dst, tc.wantDst) {
				t.Fatalf("dst = %v, want %v", dst, tc.wantDst)
			}
		})
	}
}

// waitOffered waits until the executor side offered a landing on the link
// from rank from (a reader's Claim waits only for an operation that did).
func waitOffered(t *testing.T, ib *Inbox, from int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		il := ib.links[from]
		il.mu.Lock()
		offered := il.post != nil
		il.mu.Unlock()
		if offered {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no landing offered within 10s")
		}
		runtime.Gosched()
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestLandingAbandoned: when the collective's context ends while a reader
// fills the executor's buffer, the payload still has FrameGrace to arrive:
// if it does, the reader has read the whole frame (its link stays in step,
// for the abort that follows) and drops it; if not, the reader is
// interrupted. Either way RecvInto returns only once the reader let go of
// the buffer.
func TestLandingAbandoned(t *testing.T) {
	for _, tc := range []struct {
		name   string
		finish bool // the rest of the payload arrives after the cancel
	}{
		{name: "payload finishes within the grace", finish: true},
		{name: "payload never finishes", finish: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ib := NewInbox(2)
			want := Header{Kind: KindAllReduceRing, DType: Bytes, Seq: 1, Count: 8}
			ctx, cancel := context.WithCancel(context.Background())
			dst := make([]byte, 8)
			res := make(chan error, 1)
			go func() {
				_, err := ib.RecvInto(ctx, 1, newLanding(ctx, want, dst, nil, false))
				res <- err
			}()
			waitOffered(t, ib, 1)
			h := want
			h.Len = 8
			l := ib.Claim(1, h, true)
			if l == nil {
				t.Fatal("the offered landing was not claimed")
			}
			pr, pw := io.Pipe()
			interrupted := make(chan struct{})
			type filled struct {
				deliver bool
				err     error
			}
			fill := make(chan filled, 1)
			go func() {
				_, deliver, err := l.Fill(pr, func() { close(interrupted); _ = pw.CloseWithError(errors.New("reset")) })
				fill <- filled{deliver, err}
			}()
			if _, err := pw.Write([]byte{1, 2, 3}); err != nil { // part of the payload
				t.Fatal(err)
			}
			cancel()
			if tc.finish {
				// The rest, then the next frame's first byte: still in step.
				go func() { _, _ = pw.Write([]byte{4, 5, 6, 7, 8, 9}) }()
			}
			deadline := time.After(10 * time.Second)
			var got filled
			select {
			case got = <-fill:
			case <-deadline:
				t.Fatal("Fill did not return after the collective's context ended")
			}
			select {
			case <-interrupted:
				if tc.finish {
					t.Fatal("a payload that arrived within the grace was interrupted")
				}
			default:
				if !tc.finish {
					t.Fatal("Fill returned without being interrupted")
				}
			}
			if tc.finish {
				var next [1]byte
				if got.err != nil || got.deliver {
					t.Fatalf("Fill = deliver %v, %v; want the frame read and dropped", got.deliver, got.err)
				}
				if _, err := io.ReadFull(pr, next[:]); err != nil || next[0] != 9 {
					t.Fatalf("after the dropped frame the stream reads %v, %v; want 9", next[0], err)
				}
			} else if got.err == nil {
				t.Fatal("Fill of an interrupted read returned no error")
			}
			select {
			case err := <-res:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("RecvInto: %v, want context.Canceled", err)
				}
			case <-deadline:
				t.Fatal("RecvInto did not return after the reader let go")
			}
		})
	}
}
