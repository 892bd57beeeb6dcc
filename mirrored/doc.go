// Package mirrored trains a model as a set of mirrored replicas: every
// replica holds the whole model, computes gradients on its own shard of
// each global batch, and the replicas stay identical because every step
// combines the gradients across the group before the same optimizer
// update. There is no parameter server and no socket here.
//
// The core, in the manner of a raft node, is arithmetic driven by thin
// loops, with data loading, disk, network and printing outside it:
//
//   - Replica (replica.go) is one replica's model and optimizer: its
//     parameters and optimizer state, the gradient of a batch, the
//     combination across the group, the update, settling deferred work,
//     evaluation. denseReplica wraps the nn models (LeNet-5, softmax
//     regression), sparseReplica sparse logistic regression, whose
//     exchange carries the touched coordinates (sparse_exchange.go).
//   - syncStep (loop.go) is the synchronous step: gradient → [barrier] →
//     combine → update. runSync is the loop around it: the start-up
//     handshake (handshake.go: one hello for every mode, naming every
//     setting that differs and the ranks), resume or broadcast, the
//     epochs, checkpoints, hash comparisons and the final figures.
//   - runGossip (gossip_loop.go) is the asynchronous loop over the same
//     Replica: each replica averages its parameters with one peer at a
//     time through the gossip engine (package mirrored/gossip), so a slow
//     or dead peer does not stop the others.
//   - Every loop reports through one set of Observers (observe.go): the
//     log, the progress lines, TensorBoard event files and the caller's
//     OnEvent hook (the launcher), so every mode reports the same way.
//   - RunJob, RunSparseJob, RunGossip and RunSparseGossip are the drivers:
//     they check the settings, load the data, build a Replica and run a
//     loop. RunStrategy and RunSparseStrategy pick the strategy and inject
//     Faults (gossip_faults.go).
//
// The collective layer is reached through Group (NewGroup adapts a
// collective.Comm; LocalGroup is one replica) by the synchronous loop,
// and through a collective.Comm by the gossip engine, whose messages are
// point-to-point. Checkpoints and TF_CONFIG are packages of their own.
//
// Invariants: with the same settings (seed included) and the same number of
// replicas, a synchronous run performs the same arithmetic in the same
// order, so it is bitwise reproducible (Result.ParamsSHA256 is the same;
// testdata/golden.txt pins it) and every replica ends with the same bits;
// a run resumed from a checkpoint ends bit for bit where the uninterrupted
// run ends; a NaN or Inf loss stops training with an error naming the
// epoch and step, before anything derived from it (checkpoint, summary,
// event file entry) is written.
package mirrored
