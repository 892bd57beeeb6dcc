package collective

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// AllReduceFloat32 reduces buf element-wise across all ranks, in place: on
// return every rank holds the same bits.
func (c *Comm) AllReduceFloat32(ctx context.Context, buf []float32, op Op) error {
	return allReduce(ctx, c, buf, op, Float32)
}

// AllReduceFloat64 is AllReduceFloat32 for float64.
func (c *Comm) AllReduceFloat64(ctx context.Context, buf []float64, op Op) error {
	return allReduce(ctx, c, buf, op, Float64)
}

// AlgoFor returns the algorithm an all-reduce of nbytes uses.
func (c *Comm) AlgoFor(nbytes int) Algo {
	if c.opts.Algo != Auto {
		return c.opts.Algo
	}
	if nbytes <= c.opts.SmallBytes {
		if n := c.Size(); n > 2 && n <= StarMaxRanks && nbytes <= c.opts.StarBytes {
			return Star
		}
		return Tree
	}
	return Ring
}

// StarMaxRanks is the largest world size Auto uses Star for. Rank 0 handles
// 2(N-1) frames in turn, so its share grows linearly; N=8 is the largest
// size measured (BENCHMARKS.md, "Where the collective defaults come from").
const StarMaxRanks = 8

// treeChunkBytes caps recursive doubling's frames.
const treeChunkBytes = 64 << 10

// AllReduceFloat32Range reduces buf[lo:hi] element-wise across all ranks,
// in place, with the arithmetic of AllReduceFloat32(buf, op): the
// algorithm is the one an all-reduce of the whole buf uses, and each
// element is combined in the same order, so a buffer reduced in pieces
// (a backward pass's gradient, layer by layer as it is ready) ends with
// the bits of the whole reduced at once. Every rank must make the same
// calls with the same len(buf), lo and hi.
func (c *Comm) AllReduceFloat32Range(ctx context.Context, buf []float32, lo, hi int, op Op) error {
	if lo < 0 || hi > len(buf) || lo > hi {
		return fmt.Errorf("collective: all-reduce of elements [%d,%d) of a buffer of %d: the range must lie within the buffer", lo, hi, len(buf))
	}
	return allReduceRange(ctx, c, buf, lo, hi, op, Float32)
}

func allReduce[T number](ctx context.Context, c *Comm, buf []T, rop Op, dt DType) error {
	return allReduceRange(ctx, c, buf, 0, len(buf), rop, dt)
}

// allReduceRange reduces buf[lo:hi] as allReduce(buf) would reduce it: the
// ring, the only algorithm whose order of combination depends on an
// element's place (the segment it falls in says which rank starts its
// sum), runs on the whole buffer's segments cut to [lo, hi); recursive
// doubling and the star combine every element alike.
func allReduceRange[T number](ctx context.Context, c *Comm, buf []T, lo, hi int, rop Op, dt DType) error {
	if rop < 0 || rop >= opEnd {
		return fmt.Errorf("collective: all-reduce with unknown op %d", int(rop))
	}
	esize := dt.Size()
	kind := KindAllReduceRing
	switch c.AlgoFor(len(buf) * esize) {
	case Tree:
		kind = KindAllReduceTree
	case Star:
		kind = KindAllReduceStar
	}
	o, octx, cancel, err := c.begin(ctx, kind, dt, rop, hi-lo)
	if err != nil {
		return err
	}
	n, rank := c.Size(), c.Rank()
	part := buf[lo:hi]
	chunk := c.opts.ChunkBytes / esize
	switch {
	case n == 1:
	case kind == KindAllReduceRing:
		segs := segments(len(buf), n)
		for i, sg := range segs {
			a, b := max(sg.off, lo), min(sg.off+sg.n, hi)
			segs[i] = span{a, max(0, b-a)}
		}
		err = o.runLinear(octx, planRing(n, rank, segs, chunk, true), asBytes(buf), esize, folder[T](rop))
	case kind == KindAllReduceStar:
		err = o.runStar(octx, asBytes(part), len(part), min(c.opts.ChunkBytes, treeChunkBytes)/esize, esize, folder[T](rop))
	default:
		// Smaller frames than the ring's: a round's send then overlaps with
		// receiving and folding the partner's frames.
		treeChunk := min(c.opts.ChunkBytes, treeChunkBytes) / esize
		err = o.runRecDoubling(octx, planRecDoubling(n, rank), asBytes(part), len(part), treeChunk, esize, folder[T](rop))
	}
	if err == nil && rop == Avg && n > 1 {
		divide(part, n)
	}
	return c.end(o, cancel, err)
}

// runRecDoubling executes a recursive-doubling plan over the whole buffer
// (cut into frames of at most chunk elements).
func (o *op) runRecDoubling(ctx context.Context, steps []rdStep, raw []byte, length, chunk, esize int, fn foldFunc) error {
	fr := frames{o: o, cs: chunks(span{0, length}, chunk), raw: raw, esize: esize, fn: fn}
	hook := o.c.opts.Phases
	for _, st := range steps {
		var start time.Time
		if hook != nil {
			start = time.Now()
		}
		var err error
		switch st.move {
		case rdSend:
			err = fr.sendAll(ctx, st.peer, nil)
		case rdRecvFold, rdRecvCopy:
			err = fr.recvAll(ctx, st, nil)
		case rdExchange:
			if len(fr.cs) == 1 {
				// One small frame: the peer's reader always drains it, so
				// sending before receiving cannot deadlock.
				if err = fr.sendAll(ctx, st.peer, nil); err == nil {
					err = fr.recvAll(ctx, st, nil)
				}
				break
			}
			err = o.exchange(ctx, st, fr.sendAll, fr.recvAll)
		}
		if err != nil {
			return err
		}
		if hook != nil {
			hook(Phase{Name: rdPhase(st), Start: start, End: time.Now()})
		}
	}
	return nil
}

// frames is a buffer cut into frames (cs, in elements of esize bytes) for
// the send-all / receive-all halves of a recursive-doubling step or of a
// non-root star rank.
type frames struct {
	o     *op
	cs    []span
	raw   []byte
	esize int
	fn    foldFunc
}

func (fr frames) bytesOf(sp span) []byte {
	return fr.raw[sp.off*fr.esize : (sp.off+sp.n)*fr.esize]
}

// sendAll sends every frame to peer, advancing sent (if any) after each.
func (fr frames) sendAll(ctx context.Context, peer int, sent *progress) error {
	for _, sp := range fr.cs {
		if err := fr.o.send(ctx, peer, sp, fr.bytesOf(sp)); err != nil {
			return err
		}
		if sent != nil {
			sent.advance()
		}
	}
	return nil
}

// recvAll receives every frame from st.peer and folds it in (or copies it
// over, for rdRecvCopy).
func (fr frames) recvAll(ctx context.Context, st rdStep, sent *progress) error {
	fn := fr.fn
	if st.move == rdRecvCopy {
		fn = nil
	}
	for i, sp := range fr.cs {
		if sent != nil {
			// Fold or overwrite chunk i only once it left: the send reads
			// the old value (and the payload lands in it as it is read).
			if err := sent.waitFor(ctx, i); err != nil {
				return fr.o.wrapPeer(ctx, "finishing sending to", st.peer, err)
			}
		}
		if err := fr.o.recvInto(ctx, st.peer, sp, fr.esize, fr.bytesOf(sp), fn, st.peerFirst); err != nil {
			return err
		}
	}
	return nil
}

func (o *op) exchange(ctx context.Context, st rdStep,
	sendAll func(context.Context, int, *progress) error,
	recvAll func(context.Context, rdStep, *progress) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sent := newProgress()
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		if sendErr = sendAll(ctx, st.peer, sent); sendErr != nil {
			cancel()
		}
	}()
	recvErr := recvAll(ctx, st, sent)
	if recvErr != nil {
		cancel()
	}
	wg.Wait()
	if recvErr != nil && errors.Is(sendErr, context.Canceled) {
		sendErr = nil
	}
	if sendErr != nil && errors.Is(recvErr, context.Canceled) {
		recvErr = nil
	}
	return errors.Join(recvErr, sendErr)
}

// runStar executes the star all-reduce over raw (cut into frames of at most
// chunk elements). The root, which rotates with the sequence number so that
// no rank does the root's extra work every time, folds frame i of every rank
// in rank order 0..N-1 and sends the result to every rank, so every rank
// ends with the same bits whichever rank was the root.
func (o *op) runStar(ctx context.Context, raw []byte, length, chunk, esize int, fn foldFunc) error {
	n, rank := o.c.Size(), o.c.Rank()
	root := int(o.hdr.Seq % uint64(n))
	fr := frames{o: o, cs: chunks(span{0, length}, chunk), raw: raw, esize: esize, fn: fn}
	if rank == root {
		for _, sp := range fr.cs {
			if err := o.starFold(ctx, root, sp, fr.bytesOf(sp), esize, fn); err != nil {
				return err
			}
			// Every other rank receives while it sends (below), so these
			// sends cannot wait on a rank that waits on us.
			for r := range n {
				if r == root {
					continue
				}
				if err := o.send(ctx, r, sp, fr.bytesOf(sp)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	st := rdStep{move: rdRecvCopy, peer: root}
	if len(fr.cs) == 1 {
		// One small frame: the root's reader always drains it, so sending
		// before receiving cannot deadlock (and needs no goroutine).
		if err := fr.sendAll(ctx, root, nil); err != nil {
			return err
		}
		return fr.recvAll(ctx, st, nil)
	}
	return o.exchange(ctx, st, fr.sendAll, fr.recvAll)
}

// starFold leaves in own (the root's chunk sp) the fold of every rank's
// chunk in rank order: op(...op(op(b0, b1), b2)..., bN-1).
func (o *op) starFold(ctx context.Context, root int, sp span, own []byte, esize int, fn foldFunc) error {
	var acc []byte
	var first Frame // rank 0's frame, the accumulator when the root is not rank 0
	defer first.Release()
	for r := range o.c.Size() {
		if r == root {
			if acc == nil {
				acc = own
			} else {
				fn(acc, own, false)
			}
			continue
		}
		f, err := o.recv(ctx, r, sp, esize)
		if err != nil {
			return err
		}
		if acc == nil {
			first, acc = f, f.Payload
			continue
		}
		fn(acc, f.Payload, false)
		f.Release()
	}
	if root != 0 {
		copy(own, acc)
	}
	return nil
}
