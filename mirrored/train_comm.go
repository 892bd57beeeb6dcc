package mirrored

import (
	"context"
	"fmt"
)

// Comm is the numeric part of what a replica needs from the collective
// layer (see Group). Every replica calls the same collectives in the same
// order; buffers are updated in place.
type Comm interface {
	Rank() int
	Size() int
	// AllReduceSum replaces buf on every replica by the element-wise sum
	// of all replicas' buf.
	AllReduceSum(ctx context.Context, buf []float32) error
	// Broadcast replaces buf on every replica by root's buf.
	Broadcast(ctx context.Context, buf []float32, root int) error
}

// LocalGroup is the Group of a single replica: rank 0 of 1, where a sum,
// a broadcast or a gather leaves the data as they are.
type LocalGroup struct{}

var _ Group = LocalGroup{}

func (LocalGroup) Rank() int { return 0 }
func (LocalGroup) Size() int { return 1 }

func (LocalGroup) AllReduceSum(ctx context.Context, _ []float32) error { return ctx.Err() }

func (LocalGroup) Broadcast(ctx context.Context, _ []float32, root int) error {
	if root != 0 {
		return fmt.Errorf("mirrored: broadcast from root %d in a one-replica run: the only rank is 0", root)
	}
	return ctx.Err()
}

func (LocalGroup) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	return [][]byte{local}, ctx.Err()
}

func (LocalGroup) Barrier(ctx context.Context) error { return ctx.Err() }
