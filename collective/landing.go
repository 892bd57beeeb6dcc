package collective

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// DirectReceiver is implemented by transports whose reader can put a
// collective frame's payload straight into the executor's buffer (receive
// into the destination, fold from a small cache-hot piece) instead of into
// a pooled buffer the executor then copies or folds from. Both transports
// here and the wrappers (CountingTransport, DelayLinks) implement it; the
// executor falls back to Recv on transports that do not.
type DirectReceiver interface {
	// RecvInto is Recv(ctx, from, Collective) with l offered as the next
	// frame's destination. A returned frame with Landed set had its
	// payload written (or folded) into l's destination; any other frame
	// is returned as Recv returns it, and l was not touched.
	RecvInto(ctx context.Context, from int, l *Landing) (Frame, error)
}

// landPiece is the piece a folding Landing reads at a time: small enough
// that the piece is still in cache when it is folded into the destination.
const landPiece = 64 << 10

// Landing is a destination offered for the next collective frame from one
// rank: only a frame whose header equals want exactly (kind, sequence,
// dtype, op, count, offset, tag and length) lands; any other is received
// the usual way and checked by the executor, which reports the mismatch.
type Landing struct {
	ctx      context.Context // the collective's: when it ends, Fill interrupts the read
	want     Header
	dst      []byte
	fn       foldFunc // nil: copy
	srcFirst bool
	gen      uint64 // the frames the executor had taken from the link when it offered this
	claimed  bool   // guarded by the link's mu
	done     chan struct{}
}

func newLanding(ctx context.Context, want Header, dst []byte, fn foldFunc, srcFirst bool) *Landing {
	want.Len = uint32(len(dst))
	return &Landing{ctx: ctx, want: want, dst: dst, fn: fn, srcFirst: srcFirst, done: make(chan struct{})}
}

// Fill reads the landing's payload from r: straight into the destination,
// or for a fold in pieces of landPiece bytes, each folded in as it
// arrives. If the collective's context ends first, the payload still has
// FrameGrace to arrive (the link then stays in step, for the abort that
// follows); after that Fill calls interrupt, which must make r's reads fail
// (a stream reset), since the executor waits for Fill before it gives its
// buffer back. It returns the frame to deliver: the header, with Landed
// set; deliver is false when the collective ended meanwhile, so that no
// executor takes the frame any more.
func (l *Landing) Fill(r io.Reader, interrupt func()) (f Frame, deliver bool, err error) {
	defer close(l.done)
	finish := AfterGrace(l.ctx, interrupt)
	err = l.read(r)
	if finish() && err == nil {
		err = l.readError(errors.New("interrupted as the read ended"))
	}
	if err != nil {
		return Frame{}, false, err
	}
	return Frame{Header: l.want, Landed: true}, l.ctx.Err() == nil, nil
}

// Mapped is a payload reader whose bytes are already in this process's
// memory (a same-host link's shared ring): Next returns the next n bytes
// without copying them, as bytes.Buffer's does, so that a fold reads them
// in place instead of through a piece buffer.
type Mapped interface {
	io.Reader
	Next(n int) []byte
}

// read reads the payload into the destination, or folds it in piece by
// piece.
func (l *Landing) read(r io.Reader) error {
	if m, ok := r.(Mapped); ok && l.fn != nil {
		src := m.Next(len(l.dst))
		if len(src) != len(l.dst) {
			return l.readError(io.ErrUnexpectedEOF)
		}
		for off := 0; off < len(src); off += landPiece {
			end := min(off+landPiece, len(src))
			l.fn(l.dst[off:end], src[off:end], l.srcFirst)
		}
		return nil
	}
	if l.fn == nil {
		if _, err := io.ReadFull(r, l.dst); err != nil {
			return l.readError(err)
		}
		return nil
	}
	bp := getBuf(min(landPiece, len(l.dst)))
	defer putBuf(bp)
	for off := 0; off < len(l.dst); {
		piece := (*bp)[:min(len(*bp), len(l.dst)-off)]
		if _, err := io.ReadFull(r, piece); err != nil {
			return l.readError(err)
		}
		l.fn(l.dst[off:off+len(piece)], piece, l.srcFirst)
		off += len(piece)
	}
	return nil
}

func (l *Landing) readError(err error) error {
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("collective: reading %d-byte payload of %s: %w", l.want.Len, l.want.shape(), err)
}

// RecvInto implements DirectReceiver for a transport whose readers call
// Claim: it offers l if no collective frame from that rank is waiting (or
// on its way into the queue), and
// takes l back (waiting for a Fill under way to stop) when it returns an
// error.
func (ib *Inbox) RecvInto(ctx context.Context, from int, l *Landing) (Frame, error) {
	il := ib.links[from]
	il.mu.Lock()
	posted := il.taken == il.delivered
	if posted {
		l.gen = il.taken
		il.post, il.last = l, l
	}
	il.mu.Unlock()
	if posted {
		select {
		case il.offered <- struct{}{}:
		default:
		}
	}
	f, err := ib.Recv(ctx, from, Collective)
	if !posted {
		return f, err
	}
	il.mu.Lock()
	if il.post == l {
		il.post = nil
	}
	claimed := l.claimed
	il.mu.Unlock()
	if err != nil && claimed {
		// A reader is writing into the caller's buffer: wait for it (since
		// ctx ended or the link went down, its read ends within
		// FrameGrace, interrupted if the payload is still not in).
		<-l.done
	}
	return f, err
}

// Claim is called by a link's reader with the header of the frame it is
// about to read from rank from. It returns the landing the executor offered
// if that frame is the very next collective frame the executor will take
// (it had taken every frame delivered before this one when it made the
// offer) and matches it exactly; the reader then calls Fill and delivers Fill's frame. Nil means
// read the payload the usual way. Readers of one link must call Claim,
// Fill and Deliver from one goroutine, in order.
//
// With wait set, a frame of the operation the executor is taking with
// landings on this link (same kind and sequence number, its context not
// ended) waits for the executor's next offer instead of being read ahead
// into a pooled buffer: otherwise a reader that is a frame ahead stays
// ahead, and no payload ever lands. Only a transport that buffers what its
// peers send (a stream window of at least a frame) may wait: the peer's
// send then completes while this reader waits.
func (ib *Inbox) Claim(from int, h Header, wait bool) *Landing {
	il := ib.links[from]
	for {
		il.mu.Lock()
		l, last := il.post, il.last
		if l != nil && l.gen == il.delivered {
			if h != l.want || l.ctx.Err() != nil {
				l = nil // not the frame expected: the executor reports it
			} else {
				il.post, l.claimed = nil, true
			}
			il.mu.Unlock()
			return l
		}
		il.mu.Unlock()
		if !wait || last == nil || last.want.Kind != h.Kind || last.want.Seq != h.Seq || h.Len == 0 {
			return nil
		}
		select {
		case <-il.offered:
		case <-last.ctx.Done():
			return nil
		case <-ib.closed:
			return nil
		}
	}
}

// count adds d to one of a link's frame counts.
func (ib *Inbox) count(from int, n *uint64, d int) {
	il := ib.links[from]
	il.mu.Lock()
	*n += uint64(d)
	il.mu.Unlock()
}

// recvInto receives from t with l offered, where t can take it.
func recvInto(ctx context.Context, t Transport, from int, l *Landing) (Frame, error) {
	if d, ok := t.(DirectReceiver); ok {
		return d.RecvInto(ctx, from, l)
	}
	return t.Recv(ctx, from, Collective)
}

// deliverOrLand is an in-memory reader's half of Claim: it lands payload
// in an offered landing, or delivers a copy of it. It never waits for an
// offer: nothing buffers the sender's frame meanwhile.
func deliverOrLand(ctx context.Context, ib *Inbox, from int, h Header, payload []byte) error {
	h.Len = uint32(len(payload))
	if l := ib.Claim(from, h, false); l != nil {
		f, deliver, err := l.Fill(bytes.NewReader(payload), func() {})
		if err != nil || !deliver {
			return err
		}
		return ib.Deliver(ctx, from, f)
	}
	f := Frame{Header: h}
	if len(payload) > 0 {
		f.buf = getBuf(len(payload))
		f.Payload = (*f.buf)[:len(payload)]
		copy(f.Payload, payload)
	}
	return ib.Deliver(ctx, from, f)
}
