package mirrored

import (
	"context"
	"fmt"
)

// Comm is what a replica needs from the collective layer. Every replica
// calls the same collectives in the same order; buffers are updated in
// place. *collective.Comm satisfies it through a thin adapter, and Local is
// the one-replica version.
type Comm interface {
	Rank() int
	Size() int
	// AllReduceSum replaces buf on every replica by the element-wise sum
	// of all replicas' buf.
	AllReduceSum(ctx context.Context, buf []float32) error
	// Broadcast replaces buf on every replica by root's buf.
	Broadcast(ctx context.Context, buf []float32, root int) error
}

// Local is the Comm of a single replica: rank 0 of 1, where a sum or a
// broadcast leaves the buffer as it is.
type Local struct{}

var _ Comm = Local{}

func (Local) Rank() int { return 0 }
func (Local) Size() int { return 1 }

func (Local) AllReduceSum(ctx context.Context, _ []float32) error { return ctx.Err() }

func (Local) Broadcast(ctx context.Context, _ []float32, root int) error {
	if root != 0 {
		return fmt.Errorf("mirrored: broadcast from root %d in a one-replica run: the only rank is 0", root)
	}
	return ctx.Err()
}

// AsGroup returns comm as a Group: comm itself if it is one, LocalGroup for
// a one-replica Comm, and otherwise comm with AllGather and Barrier built
// from its AllReduceSum (each rank fills its own slots of a zeroed buffer,
// so every sum is exact: payload bytes and lengths below 2^24 are exact in
// float32).
func AsGroup(comm Comm) Group {
	if g, ok := comm.(Group); ok {
		return g
	}
	if comm.Size() == 1 && comm.Rank() == 0 {
		return LocalGroup{}
	}
	return sumGroup{comm}
}

type sumGroup struct{ Comm }

// maxSumGatherBytes bounds one rank's AllGather payload on a sumGroup: a
// float32 holds integers exactly up to 2^24.
const maxSumGatherBytes = 1 << 24

func (g sumGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	if len(local) >= maxSumGatherBytes {
		return nil, fmt.Errorf("mirrored: all-gather of %d bytes over all-reduce: at most %d", len(local), maxSumGatherBytes-1)
	}
	n, rank := g.Size(), g.Rank()
	lens := make([]float32, n)
	lens[rank] = float32(len(local))
	if err := g.AllReduceSum(ctx, lens); err != nil {
		return nil, err
	}
	offs := make([]int, n+1)
	for r, l := range lens {
		offs[r+1] = offs[r] + int(l)
	}
	buf := make([]float32, offs[n])
	for i, b := range local {
		buf[offs[rank]+i] = float32(b)
	}
	if err := g.AllReduceSum(ctx, buf); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for r := range out {
		out[r] = make([]byte, offs[r+1]-offs[r])
		for i := range out[r] {
			out[r][i] = byte(buf[offs[r]+i])
		}
	}
	return out, nil
}

func (g sumGroup) Barrier(ctx context.Context) error {
	return g.AllReduceSum(ctx, make([]float32, 1))
}
