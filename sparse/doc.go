// Package sparse is binary logistic regression over very wide, very sparse
// inputs (the Criteo workload: D = 33,762,578 one-hot features, ~26-40
// non-zeros per example), with the pieces a data-parallel trainer needs to
// keep replicas identical while exchanging only the touched features.
//
// Types and their invariants:
//
//   - Vector: Indices strictly increasing (sorted, unique), one Value per
//     index, every value finite. Vector.Validate checks this and the range
//     [0, dim); everything that accepts a Vector from outside (the wire
//     decoder, MergeGradients, MergeEncoded's peer parts) validates it, hot
//     paths that build their own (Coalescer, LogReg.Gradient) produce it by
//     construction.
//   - CSR: a batch of rows, row r is Indices[RowPtr[r]:RowPtr[r+1]]. Rows of a
//     CSR need not be sorted (a reader may emit any order); duplicates within
//     a row are summed by the gradient like any other duplicate.
//   - LogReg: P(y=1|x) = σ(w·x) over a dense []float32 of D weights, so one
//     replica is 4·D bytes and a dense all-reduce of it is possible (the
//     baseline the sparse exchange beats). Its gradient is computed sparsely:
//     only the features present in the batch are read or written, and a step
//     allocates nothing once its buffers have grown.
//   - Optimizers (SGD with lazy L2, AdaGrad, FTRL-Proximal) keep dense
//     per-feature state next to the weights and touch only the indices of the
//     gradient they are given; Flush brings lazily-regularised weights up to
//     date in O(D) before evaluation or checkpointing.
//
// Memory: the weights and the per-feature optimizer state are read at random
// indices of D-sized arrays (135 MB each at Criteo's width), so on Linux they
// are allocated on transparent huge pages (MADV_HUGEPAGE, MADV_COLLAPSE):
// with 4 KB pages nearly every access also missed the TLB.
//
// Determinism: Coalescer sums duplicates in float64 in order of appearance,
// and MergeGradients / MergeEncoded sum the per-rank gradients in rank order
// (a branch-free four-way merge starting each sum from -0, bitwise the
// pairwise merge), so every peer that merges the same parts gets
// bit-identical results and applies the same update — the property that
// lets replicas stay in step without a parameter server.
package sparse
