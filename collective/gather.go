package collective

import (
	"context"
	"encoding/json"
	"fmt"
)

// AllGatherV returns every rank's local payload, indexed by rank; lengths
// may differ. The results are views into one buffer owned by the caller.
// Lengths are exchanged first, and their total is checked against
// Options.MaxGatherBytes before the buffer is allocated.
func (c *Comm) AllGatherV(ctx context.Context, local []byte) ([][]byte, error) {
	n, rank := c.Size(), c.Rank()
	o, octx, cancel, err := c.begin(ctx, KindGatherLens, Int64, Sum, n)
	if err != nil {
		return nil, err
	}
	out, err := o.allGatherV(octx, n, rank, local)
	return out, c.end(o, cancel, err)
}

func (o *op) allGatherV(ctx context.Context, n, rank int, local []byte) ([][]byte, error) {
	lens := make([]int64, n)
	lens[rank] = int64(len(local))
	if err := o.runLinear(ctx, planRing(n, rank, segments(n, n), 1, false), asBytes(lens), 8, nil); err != nil {
		return nil, err
	}
	var total int64
	segs := make([]span, n)
	for r, l := range lens {
		if l < 0 || l > o.c.opts.MaxGatherBytes || total+l > o.c.opts.MaxGatherBytes {
			return nil, fmt.Errorf("all-gather: rank %d announced %d bytes, over the %d-byte MaxGatherBytes limit in total", r, l, o.c.opts.MaxGatherBytes)
		}
		segs[r] = span{int(total), int(l)}
		total += l
	}
	buf := make([]byte, total)
	copy(buf[segs[rank].off:], local)
	o.hdr.Kind, o.hdr.DType, o.hdr.Count = KindAllGatherV, Bytes, uint64(total)
	if err := o.runLinear(ctx, planRing(n, rank, segs, o.c.opts.ChunkBytes, false), buf, 1, nil); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for r, s := range segs {
		out[r] = buf[s.off : s.off+s.n : s.off+s.n]
	}
	return out, nil
}

// AllGatherJSON gives every rank every rank's value, in rank order, sent
// as JSON with AllGatherV: for small records (reports, summaries) at the
// end of a run, over the cluster's own links.
func AllGatherJSON[T any](ctx context.Context, c *Comm, mine T) ([]T, error) {
	b, err := json.Marshal(mine)
	if err != nil {
		return nil, err
	}
	raw, err := c.AllGatherV(ctx, b)
	if err != nil {
		return nil, err
	}
	all := make([]T, len(raw))
	for r, b := range raw {
		if err := json.Unmarshal(b, &all[r]); err != nil {
			return nil, fmt.Errorf("collective: rank %d's record: %w", r, err)
		}
	}
	return all, nil
}
