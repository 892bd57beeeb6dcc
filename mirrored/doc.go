// Package mirrored trains a model as a set of mirrored replicas: every
// replica holds the whole model, computes gradients on its own shard of
// each global batch, and the replicas stay identical because every step
// all-reduces the flat gradient buffer before the same optimizer update.
// There is no parameter server and no socket here: the collective layer is
// reached only through the Group interface (NewGroup adapts a
// collective.Comm; LocalGroup is one replica), and package mirrored/launch
// runs replicas as processes over libp2p.
//
// The pieces:
//
//   - RunJob (job.go) is one replica of a run: a start-up handshake that
//     compares every replica's settings (a MismatchError names each setting
//     that differs and the ranks), the chief's (rank 0) parameters and
//     optimizer state broadcast to all, then per step forward/backward →
//     [Barrier, every 16th step] → AllReduceSum(grads) → scale by 1/N →
//     optimizer step; parameter-hash comparisons every Job.HashEvery steps
//     and at the end; sharded evaluation each epoch; checkpoints; and the
//     per-peer figures (time computing / communicating / waiting, bytes,
//     CPU, peak RSS).
//   - Train (train.go) is RunJob without checkpoints, for any Comm; with
//     Local it is single-worker training.
//   - Cluster (cluster.go) is a validated TF_CONFIG: ranks in order, the
//     chief first.
//   - Checkpoint (checkpoint.go, safetensors.go) is a training state in the
//     safetensors format, written atomically by the chief.
//   - RunGossip (gossip.go) is the asynchronous alternative to RunJob: no
//     barrier, each replica averages its parameters with one peer at a time
//     (package mirrored/gossip), so a slow or dead peer does not stop the
//     others.
//   - RunSparseJob (sparse.go) and RunSparseGossip (gossip_sparse.go) are
//     the same two strategies for sparse logistic regression (--model
//     sparse-lr), whose exchanges carry the coordinates that changed
//     rather than the dense vector when that is smaller.
//   - RunStrategy and RunSparseStrategy (gossip_faults.go) pick the
//     strategy and inject Faults (a slow peer, a killed peer) into either,
//     for the ring through its Group (WithFaults).
//
// Invariants: with the same settings (seed included) and the same number of
// replicas, a run performs the same arithmetic in the same order, so it is
// bitwise reproducible (Result.ParamsSHA256 is the same) and every replica
// ends with the same bits; a run resumed from a checkpoint ends bit for bit
// where the uninterrupted run ends; a NaN or Inf loss stops training with
// an error naming the epoch and step, before anything derived from it
// (checkpoint, summary, event file entry) is written.
package mirrored
