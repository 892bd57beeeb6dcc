package collective

import (
	"context"
	"fmt"
)

// BroadcastFloat32 copies root's buf into every other rank's buf (same
// length on every rank) along a pipelined chain root → root+1 → …, each
// rank forwarding a chunk as soon as it has it.
func (c *Comm) BroadcastFloat32(ctx context.Context, buf []float32, root int) error {
	return c.broadcast(ctx, asBytes(buf), len(buf), Float32, root)
}

func (c *Comm) broadcast(ctx context.Context, raw []byte, count int, dt DType, root int) error {
	if root < 0 || root >= c.Size() {
		return fmt.Errorf("collective: broadcast root %d out of range for world size %d", root, c.Size())
	}
	o, octx, cancel, err := c.begin(ctx, KindBroadcast, dt, Sum, count)
	if err != nil {
		return err
	}
	o.hdr.Tag = uint32(root)
	if c.Size() > 1 {
		esize := dt.Size()
		p := planChain(c.Size(), c.Rank(), root, count, c.opts.ChunkBytes/esize)
		err = o.runLinear(octx, p, raw, esize, nil)
	}
	return c.end(o, cancel, err)
}

// Barrier returns once every rank has entered it (dissemination barrier:
// ceil(log2 N) rounds of empty frames).
func (c *Comm) Barrier(ctx context.Context) error {
	o, octx, cancel, err := c.begin(ctx, KindBarrier, DTypeNone, Sum, 0)
	if err != nil {
		return err
	}
	to, from := planDissemination(c.Size(), c.Rank())
	for k := range to {
		o.hdr.Tag = uint32(k)
		if err = o.send(octx, to[k], span{}, nil); err != nil {
			break
		}
		var f Frame
		if f, err = o.recv(octx, from[k], span{}, 1); err != nil {
			break
		}
		f.Release()
	}
	return c.end(o, cancel, err)
}
