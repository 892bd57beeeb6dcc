// Package mirrored trains a model as a set of mirrored replicas: every
// replica holds the whole model, computes gradients on its own shard of
// each global batch, and the replicas stay identical because every step
// all-reduces the flat gradient buffer before the same optimizer update.
//
// The training step (Train, in train.go) is, on every replica:
//
//	forward/backward into the flat gradients → Comm.AllReduceSum(grads)
//	→ scale by 1/Size → optimizer step
//
// and start-up broadcasts the parameters and the optimizer state from rank
// 0, so replicas that were initialised differently still start equal. The
// collective layer is reached only through the Comm interface; Local is the
// one-replica Comm, with which Train is plain single-worker training.
//
// Invariants: with the same Config (seed included) and the same Comm size,
// Train performs the same arithmetic in the same order, so a run is
// bitwise reproducible (Result.ParamsSHA256 is the same); a NaN or Inf loss
// stops training with an error naming the epoch and step, before anything
// derived from it (summary, event file entry) is written.
package mirrored
