package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// directGatherTag marks the frames of AllGatherDirect; the ring AllGatherV
// sends tag 0, so ranks that mix the two fail with a mismatch.
const directGatherTag = 0x44495245 // "DIRE"

// AllGatherDirect returns every rank's local payload, indexed by rank, like
// AllGatherV, but in one round: each rank sends its payload straight to
// every other rank and receives theirs. It moves the same bytes per rank as
// the ring ((N-1) × its own payload out, everyone else's in) with one
// one-way latency instead of 2(N-1) (the ring passes the lengths, then the
// data, one hop at a time), which is what a small per-step message such as a
// sparse gradient needs. Large payloads are cut into ChunkBytes frames. The
// results other than out[Rank()] (which is local itself) are freshly
// allocated.
func (c *Comm) AllGatherDirect(ctx context.Context, local []byte) ([][]byte, error) {
	n, rank := c.Size(), c.Rank()
	if int64(len(local)) > c.opts.MaxGatherBytes {
		return nil, fmt.Errorf("collective: direct all-gather of %d bytes on rank %d exceeds MaxGatherBytes %d", len(local), rank, c.opts.MaxGatherBytes)
	}
	o, octx, cancel, err := c.begin(ctx, KindAllGatherV, Bytes, Sum, n)
	if err != nil {
		return nil, err
	}
	o.hdr.Tag = directGatherTag
	out, err := o.allGatherDirect(octx, n, rank, local)
	return out, c.end(o, cancel, err)
}

func (o *op) allGatherDirect(ctx context.Context, n, rank int, local []byte) ([][]byte, error) {
	out := make([][]byte, n)
	out[rank] = local
	if n == 1 {
		return out, nil
	}
	chunk := o.c.opts.ChunkBytes
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sendAll := func() error {
		h := o.hdr
		h.Count = uint64(len(local))
		// Rank r sends to r+1, r+2, ...: at any moment the ranks send to
		// different peers, and each receives in the same order below.
		for k := 1; k < n; k++ {
			to := (rank + k) % n
			for _, sp := range chunks(span{0, len(local)}, chunk) {
				h.Offset = uint64(sp.off)
				if err := o.c.t.Send(ctx, to, h, local[sp.off:sp.off+sp.n]); err != nil {
					return o.wrapPeer(ctx, "sending to", to, err)
				}
			}
		}
		return nil
	}
	// A payload of one frame per peer is sent before receiving, on this
	// goroutine: each link's reader queues several frames, so the sends
	// complete without the peers reading, and at thousands of gathers per
	// second a goroutine per gather shows in the profile. Larger payloads
	// are sent concurrently with the receives.
	var sendErr, inlineErr error
	var wg sync.WaitGroup
	if len(local) <= chunk {
		inlineErr = sendAll()
		sendErr = inlineErr
	} else {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if sendErr = sendAll(); sendErr != nil {
				cancel()
			}
		}()
	}
	var recvErr error
	var total int64 = int64(len(local))
	for k := 1; k < n && inlineErr == nil; k++ {
		from := (rank - k + n) % n
		b, err := o.recvDirect(ctx, from, &total)
		if err != nil {
			recvErr = err
			cancel()
			break
		}
		out[from] = b
	}
	wg.Wait()
	if sendErr != nil && errors.Is(recvErr, context.Canceled) {
		recvErr = nil // our own cancel after the send failed
	}
	if err := errors.Join(recvErr, sendErr); err != nil {
		return nil, err
	}
	return out, nil
}

// recvDirect reads one rank's whole payload of a direct all-gather,
// checking every frame against the operation and the running total
// against MaxGatherBytes before allocating.
func (o *op) recvDirect(ctx context.Context, from int, total *int64) ([]byte, error) {
	var buf []byte
	for got := 0; ; {
		f, err := o.c.t.Recv(ctx, from, Collective)
		if err != nil {
			return nil, o.wrapPeer(ctx, "waiting for", from, err)
		}
		want := o.hdr
		h := f.Header
		if h.Kind != want.Kind || h.Seq != want.Seq || h.DType != want.DType || h.Op != want.Op || h.Tag != want.Tag {
			f.Release()
			return nil, fmt.Errorf("mismatch: rank %d is at %s (direct) but rank %d sent %s (tag %d): every rank must call the same collectives in the same order",
				o.c.Rank(), want.shape(), from, h.shape(), h.Tag)
		}
		if buf == nil {
			if h.Offset != 0 || int64(h.Count) < 0 || *total+int64(h.Count) > o.c.opts.MaxGatherBytes {
				f.Release()
				return nil, fmt.Errorf("direct all-gather: rank %d announced %d bytes at offset %d, over the %d-byte MaxGatherBytes limit in total or out of order",
					from, h.Count, h.Offset, o.c.opts.MaxGatherBytes)
			}
			*total += int64(h.Count)
			buf = make([]byte, h.Count)
		} else if h.Count != uint64(len(buf)) || h.Offset != uint64(got) {
			f.Release()
			return nil, fmt.Errorf("direct all-gather: rank %d sent bytes [%d,+%d) of %d, expected offset %d of %d", from, h.Offset, len(f.Payload), h.Count, got, len(buf))
		}
		if got+len(f.Payload) > len(buf) {
			f.Release()
			return nil, fmt.Errorf("direct all-gather: rank %d overran its announced %d bytes", from, len(buf))
		}
		copy(buf[got:], f.Payload)
		got += len(f.Payload)
		f.Release()
		if got == len(buf) {
			return buf, nil
		}
	}
}
