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
