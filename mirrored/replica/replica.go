// Package replica is the arithmetic of one training step, with no loop:
// the Group a replica talks through (NewGroup over a collective.Comm,
// LocalGroup alone), the Combiner that turns every replica's gradient
// into the one they all apply (Mean by default), and the replicas
// themselves: Dense for the nn models, with its gradient buckets sent
// during the backward pass (overlap.go) or, under synchronized batch
// normalization, its statistics summed inside the passes (syncbn.go), and Sparse for sparse logistic
// regression, with its sparse-or-dense exchange (exchange.go) and the
// undo log of elastic commits. mirrored's loops drive a Replica; nothing
// here loads data, touches disk, prints or keeps time beyond the spans it
// reports, so a step can be tested on its own (mirrored's
// TestStepShardedEqualsWhole).
package replica

import (
	"context"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored/checkpoint"
)

// Replica is one replica's model and optimizer: the arithmetic of a step,
// with no data loading, disk or printing. mirrored's loops drive it; Dense
// (the nn models) and Sparse (sparse logistic regression) implement it.
// Methods are called from one goroutine.
type Replica interface {
	// Params is the flat parameter vector and OptState the optimizer's
	// state vectors: views, compared by hash, broadcast and checkpointed.
	Params() []float32
	OptState() [][]float32
	// Gradient computes the gradient of batch b (possibly empty: a zero
	// gradient) into the replica's own buffer and returns the loss to add
	// to the epoch's sum.
	Gradient(b *data.Batch) (float64, error)
	// Combine replaces the gradient by the group's mean gradient.
	Combine(ctx context.Context, g Group, step int) error
	// Update applies the optimizer to params at learning rate lr (params
	// is Params() except under gossip, where it is the shared vector).
	Update(params []float32, lr float64)
	// Settle applies deferred work (lazy regularisation) so that Params
	// holds the exact parameters; every replica calls it at the same
	// steps, since it changes the arithmetic that follows.
	Settle()
	// Evaluate scores Params on the test set: this replica's share, the
	// figures combined over g so that every replica reports the same;
	// Examples is 0 when there is no test set.
	Evaluate(ctx context.Context, g Group) (Metrics, error)
	// Checked returns the values whose hashes the replicas compare every
	// mirrored.Job.HashEvery steps, and what they are.
	Checked() ([]float32, string)
	// Layout names the tensors of Params and OptState as checkpoints
	// store them (PyTorch's names and shapes), and the data's shape.
	Layout() checkpoint.Layout
}

// Metrics are a model's figures on the test set.
type Metrics struct {
	Examples       int
	Loss, Accuracy float64
	AUC            float64 // binary models only
}

// Buffered is a replica whose model has non-trainable buffers (see
// Dense.Buffers): the loop hashes them with the parameters.
type Buffered interface{ Buffers() []float32 }

// Undoer is a replica that can take its parameters and optimizer state
// back to where they were at its last mark: an elastic commit then costs
// a mark rather than a copy.
type Undoer interface {
	Replica
	// Mark starts a new undo log at the current state; false if this
	// replica cannot undo (then the commit copies).
	Mark() bool
	// Undo restores the state at the last mark.
	Undo()
}

// EpochInformer is a replica with something to add to an epoch's line
// (Sparse: how its steps exchanged); EpochInfo starts counting afresh.
type EpochInformer interface{ EpochInfo() string }
