package replica

import (
	"context"
	"fmt"
)

// A Combiner turns every replica's gradient into the one gradient every
// replica applies: the seam where a strategy's communication lives, as
// DDP's comm hooks and Horovod's compression= are. The dense step hands it
// the gradient one bucket at a time (a range of the flat buffer, possibly
// the whole of it), in the same order on every replica; after the last
// bucket every replica must hold the same bits in every element.
//
// A range is combined on the exchange goroutine while the backward pass
// still writes below lo, so CombineRange touches grad[lo:hi] only.
type Combiner interface {
	// Name says what the replicas combine with; they compare it at
	// start-up (a replica summing fp16 with one summing fp32 would
	// diverge), and checkpoints record it when it is not the default.
	Name() string
	// CombineRange replaces grad[lo:hi] on every replica of g by the
	// group's combination of it.
	CombineRange(ctx context.Context, g Group, grad []float32, lo, hi int) error
}

// Mean is the default Combiner: the all-reduced sum times 1/N, in
// float32 on the wire. A range is all-reduced with the arithmetic of the
// whole buffer (RangeReducer), so bucketed and whole exchanges end with
// the same bits; a Group that cannot reduce part of a buffer takes whole
// buffers only.
type Mean struct{}

var _ Combiner = Mean{}

// MeanName is Mean's Name, the default that settings leave out.
const MeanName = "mean"

func (Mean) Name() string { return MeanName }

func (Mean) CombineRange(ctx context.Context, g Group, grad []float32, lo, hi int) error {
	if err := allReduceRange(ctx, g, grad, lo, hi); err != nil {
		return err
	}
	if n := g.Size(); n > 1 {
		scale := 1 / float32(n)
		part := grad[lo:hi]
		for i := range part {
			part[i] *= scale
		}
	}
	return nil
}

// allReduceRange sums grad[lo:hi] over g, as one all-reduce of grad would.
func allReduceRange(ctx context.Context, g Group, grad []float32, lo, hi int) error {
	if lo == 0 && hi == len(grad) {
		if err := g.AllReduceSum(ctx, grad); err != nil {
			return fmt.Errorf("all-reducing the gradients: %w", err)
		}
		return nil
	}
	rr, ok := g.(RangeReducer)
	if !ok {
		return fmt.Errorf("all-reducing the gradients [%d,%d) of %d: this group reduces whole buffers only (%T)", lo, hi, len(grad), g)
	}
	if err := rr.AllReduceSumRange(ctx, grad, lo, hi); err != nil {
		return fmt.Errorf("all-reducing the gradients [%d,%d) of %d: %w", lo, hi, len(grad), err)
	}
	return nil
}
