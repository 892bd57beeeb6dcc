package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/meshtrain/meshtrain/collective/half"
)

// AllReduceFloat32Half sums buf[lo:hi] across all ranks, in place, with
// every frame carrying 16-bit values in format f (half.BF16 or
// half.FP16): half the bytes of AllReduceFloat32, as Horovod's
// Compression.fp16 and DDP's bf16_compress_hook, but with every addition
// in float32 rather than in 16 bits.
//
// It is a ring over the range's own N segments, whatever the size. In
// the reduce-scatter a rank receives a 16-bit partial sum, adds it to its
// own float32 values and rounds the result to 16 bits to send on; the
// rank that adds the last term rounds the full sum once more and sends
// that frame round the all-gather, where each rank forwards the very
// bytes it received. Every rank, the owner included, keeps the value the
// frame decodes to, so all ranks end with the same bits. With one rank
// nothing travels, but the values are still rounded as a frame would
// round them, so a run alone applies what a cluster would.
//
// Every rank must make the same calls with the same len(buf), lo, hi and
// f; a rank sending another format fails the header check, naming both.
func (c *Comm) AllReduceFloat32Half(ctx context.Context, buf []float32, lo, hi int, f half.Format) error {
	if lo < 0 || hi > len(buf) || lo > hi {
		return fmt.Errorf("collective: 16-bit all-reduce of elements [%d,%d) of a buffer of %d: the range must lie within the buffer", lo, hi, len(buf))
	}
	dt := BFloat16
	switch f {
	case half.BF16:
	case half.FP16:
		dt = Float16
	default:
		return fmt.Errorf("collective: 16-bit all-reduce in %s: want bf16 or fp16 (fp32 is AllReduceFloat32)", f)
	}
	part := buf[lo:hi]
	chunk := max(c.opts.ChunkBytes/4, 1) // a float32 chunk's elements, in half the bytes
	n := c.Size()
	if n == 1 {
		if err := ctx.Err(); err != nil {
			return err
		}
		half.Round(f, part, chunk)
		return nil
	}
	o, octx, cancel, err := c.begin(ctx, KindAllReduceRing, dt, Sum, len(part))
	if err != nil {
		return err
	}
	p := planRing(n, c.Rank(), segments(len(part), n), chunk, true)
	err = o.runHalf(octx, p, part, f, n)
	return c.end(o, cancel, err)
}

// runHalf executes a ring plan (planRing with reduce-scatter) over the
// float32 values buf, in 16-bit frames of format f. A send whose data
// came from a reduce-scatter receive (or from nobody) encodes buf; one
// whose data came from an all-gather receive forwards that frame as it
// arrived, so the rounding happens once per hop of the reduce-scatter and
// once at the owner, and never again.
func (o *op) runHalf(ctx context.Context, p linearPlan, buf []float32, f half.Format, n int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	clock := o.ringClock(p)
	// held[i] is all-gather receive i's frame while a send still has to
	// forward it.
	held := make([]Frame, len(p.recvs))
	forwarded := make([]bool, len(p.recvs))
	for _, s := range p.sends {
		if s.dep >= 0 && !p.recvs[s.dep].reduce {
			forwarded[s.dep] = true
		}
	}
	defer func() {
		for i := range held {
			held[i].Release()
		}
	}()
	recvd, sent := newProgress(), newProgress()
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		var scratch []byte
		for _, s := range p.sends {
			if s.dep >= 0 {
				if err := recvd.waitFor(ctx, s.dep); err != nil {
					sendErr = o.wrapPeer(ctx, "waiting for the data to forward from", p.from, err)
					return
				}
			}
			vals := buf[s.span.off : s.span.off+s.span.n]
			var payload []byte
			if s.dep >= 0 && !p.recvs[s.dep].reduce {
				payload = held[s.dep].Payload
			} else {
				scratch = half.AppendFrame(scratch[:0], f, vals)
				payload = scratch
				if s.step >= n-1 {
					// The owner's finished sum: keep what the others will.
					if err := half.DecodeFrame(payload, f, vals); err != nil {
						sendErr = err
						cancel()
						return
					}
				}
			}
			err := o.send(ctx, p.to, s.span, payload)
			if s.dep >= 0 && !p.recvs[s.dep].reduce {
				held[s.dep].Release()
			}
			if err != nil {
				sendErr = err
				cancel()
				return
			}
			sent.advance()
		}
	}()
	var recvErr error
	for i, r := range p.recvs {
		if r.dep >= 0 {
			if err := sent.waitFor(ctx, r.dep); err != nil {
				recvErr = o.wrapPeer(ctx, "finishing sending to", p.to, err)
				break
			}
		}
		if err := o.recvHalf(ctx, p.from, r, f, buf, &held[i], forwarded[i]); err != nil {
			recvErr = err
			cancel()
			break
		}
		recvd.advance()
		clock.received(i)
	}
	wg.Wait()
	if sendErr != nil && recvErr != nil {
		if errors.Is(recvErr, context.Canceled) && !errors.Is(sendErr, context.Canceled) {
			recvErr = nil
		} else if errors.Is(sendErr, context.Canceled) {
			sendErr = nil
		}
	}
	err := errors.Join(recvErr, sendErr)
	clock.done(err)
	return err
}

// recvHalf receives the frame of r.span from rank from and adds it to buf
// (a reduce-scatter receive) or decodes it over buf (an all-gather one);
// with keep, the frame is left in *held for a send to forward.
func (o *op) recvHalf(ctx context.Context, from int, r xfer, f half.Format, buf []float32, held *Frame, keep bool) error {
	fr, err := o.c.t.Recv(ctx, from, Collective)
	if err != nil {
		return o.wrapPeer(ctx, "waiting for", from, err)
	}
	h := fr.Header
	if h.Len < half.FrameHeader {
		fr.Release()
		return fmt.Errorf("rank %d sent a %d-byte %s frame, shorter than its %d-byte header", from, h.Len, h.DType, half.FrameHeader)
	}
	h.Len -= half.FrameHeader
	if err := o.check(from, h, r.span, 2); err != nil {
		fr.Release()
		return err
	}
	vals := buf[r.span.off : r.span.off+r.span.n]
	if r.reduce {
		err = half.AddFrame(fr.Payload, f, vals)
	} else {
		err = half.DecodeFrame(fr.Payload, f, vals)
	}
	if err != nil || !keep {
		fr.Release()
		if err != nil {
			return fmt.Errorf("elements [%d,+%d) from rank %d: %w", r.span.off, r.span.n, from, err)
		}
		return nil
	}
	*held = fr
	return nil
}
